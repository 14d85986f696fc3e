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
  // The ticket is taken before the commit, and no lock is held across it: a
  // commit may wait on the database for a row another thread of this
  // process holds, and that thread must still be able to commit. Order is
  // kept all the same: an effect's transaction read its cause's commit, so
  // it took its ticket after the cause took its own.
  uint64_t ticket = next_ticket_.fetch_add(1, std::memory_order_acq_rel);
  absl::Status status = commit();
  // A failed commit still fills its place in the order, with nothing.
  if (!status.ok()) events.clear();
  DeliverInOrder(ticket, std::move(events));
  return status;
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
