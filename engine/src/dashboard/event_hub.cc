#include "dashboard/event_hub.h"

#include <utility>

namespace sluice::dashboard {

EventHub::EventHub(Engine& engine) : engine_(engine) {
  subscription_ =
      engine_.Subscribe([this](const Event& event) { Publish(event); });
}

EventHub::~EventHub() {
  // Once Unsubscribe returns no delivery is running or will run.
  engine_.Unsubscribe(subscription_);
  Stop();
}

void EventHub::Publish(const Event& event) {
  absl::MutexLock lock(&mu_);
  if (streams_.empty()) return;
  StreamEvent item{event.kind, event.run_id.ToString(), event.flow_slug,
                   event.step_slug};
  for (const std::shared_ptr<Stream>& stream : streams_) {
    if (stream->buffer.size() >= kBufferEvents) {
      stream->buffer.pop_front();
      ++stream->dropped;
    }
    stream->buffer.push_back(item);
  }
}

std::shared_ptr<EventHub::Stream> EventHub::Open() {
  absl::MutexLock lock(&mu_);
  if (stopped_ || streams_.size() >= static_cast<size_t>(kMaxStreams)) {
    return nullptr;
  }
  streams_.push_back(std::make_shared<Stream>());
  return streams_.back();
}

void EventHub::Close(const std::shared_ptr<Stream>& stream) {
  absl::MutexLock lock(&mu_);
  streams_.remove(stream);
}

bool EventHub::Wait(Stream& stream, absl::Duration timeout,
                    std::vector<StreamEvent>& events, int64_t& dropped) {
  struct Ready {
    Stream* stream;
    const bool* stopped;
    bool Check() const { return *stopped || !stream->buffer.empty(); }
  };
  absl::MutexLock lock(&mu_);
  Ready ready{&stream, &stopped_};
  mu_.AwaitWithTimeout(absl::Condition(&ready, &Ready::Check), timeout);
  if (stopped_) return false;
  events.assign(std::make_move_iterator(stream.buffer.begin()),
                std::make_move_iterator(stream.buffer.end()));
  stream.buffer.clear();
  dropped = stream.dropped;
  return true;
}

void EventHub::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

}  // namespace sluice::dashboard
