// Fans the engine's events out to the dashboard's live streams
// (/api/events). The engine's publishing thread only appends to each
// stream's bounded buffer (the oldest event is dropped when it is full),
// so a slow browser never holds the engine up.
#ifndef SLUICE_DASHBOARD_EVENT_HUB_H_
#define SLUICE_DASHBOARD_EVENT_HUB_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/engine.h"
#include "sluice/events.h"

namespace sluice::dashboard {

// What a stream sends of an event: never its payload value or error.
struct StreamEvent {
  EventKind kind = EventKind::kRunStarted;
  std::string run_id;
  std::string flow_slug;
  std::string step_slug;
};

class EventHub {
 public:
  static constexpr size_t kBufferEvents = 1000;  // per stream
  static constexpr int kMaxStreams = 16;

  explicit EventHub(Engine& engine);
  ~EventHub();  // unsubscribes

  struct Stream {
    std::deque<StreamEvent> buffer;
    int64_t dropped = 0;
  };
  // A new stream, or null when kMaxStreams are open or the hub stopped.
  std::shared_ptr<Stream> Open();
  void Close(const std::shared_ptr<Stream>& stream);
  // Waits up to `timeout` for events of `stream`, and moves them out.
  // False once the hub has stopped (the server is stopping).
  // `dropped` is how many it dropped so far for a full buffer.
  bool Wait(Stream& stream, absl::Duration timeout,
            std::vector<StreamEvent>& events, int64_t& dropped);
  // Ends every stream; idempotent.
  void Stop();

 private:
  void Publish(const Event& event);

  Engine& engine_;
  int subscription_ = 0;
  absl::Mutex mu_;
  std::list<std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::dashboard

#endif  // SLUICE_DASHBOARD_EVENT_HUB_H_
