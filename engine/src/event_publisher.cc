#include "event_publisher.h"

#include <algorithm>

namespace sluice {

int EventPublisher::Subscribe(EventHandler handler) {
  absl::MutexLock lock(&deliver_mu_);
  int id = next_id_++;
  subscribers_.emplace_back(id, std::move(handler));
  has_subscribers_.store(true, std::memory_order_release);
  return id;
}

void EventPublisher::Unsubscribe(int id) {
  absl::MutexLock lock(&deliver_mu_);
  std::erase_if(subscribers_, [id](const auto& s) { return s.first == id; });
  has_subscribers_.store(!subscribers_.empty(), std::memory_order_release);
}

absl::Status EventPublisher::CommitAndPublish(
    const std::function<absl::Status()>& commit, std::vector<Event> events) {
  if (!HasSubscribers()) return commit();
  uint64_t ticket;
  {
    absl::MutexLock lock(&commit_mu_);
    absl::Status status = commit();
    if (!status.ok()) return status;
    ticket = next_ticket_++;
  }
  DeliverInOrder(ticket, std::move(events));
  return absl::OkStatus();
}

void EventPublisher::DeliverInOrder(uint64_t ticket,
                                    std::vector<Event> events) {
  absl::MutexLock lock(&deliver_mu_);
  waiting_.emplace(ticket, std::move(events));
  // Whoever holds the next ticket's batch delivers everything now in order;
  // a later ticket that arrives first waits in waiting_.
  while (!waiting_.empty() && waiting_.begin()->first == next_delivery_) {
    std::vector<Event> batch = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    ++next_delivery_;
    for (const Event& event : batch) {
      for (const auto& [id, handler] : subscribers_) handler(event);
    }
  }
}

}  // namespace sluice
