// Delivers events to in-process subscribers, in commit order.
//
// Each committing transaction takes a ticket just before it commits; batches
// are delivered strictly in ticket order, so an effect's events (committed
// by a later transaction that saw the cause) are never delivered before
// their cause's. Delivery runs on a committing thread, one batch at a time;
// a slow commit delays later deliveries, never later commits.
//
// No lock is held across a backend commit; deliver_mu_ is held while
// calling subscribers.
// Subscribers may read through the engine but must not write through it.
#ifndef SLUICE_ENGINE_EVENT_PUBLISHER_H_
#define SLUICE_ENGINE_EVENT_PUBLISHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sluice/events.h"

namespace sluice {

class EventPublisher {
 public:
  int Subscribe(EventHandler handler);
  void Unsubscribe(int id);
  bool HasSubscribers() const {
    return has_subscribers_.load(std::memory_order_acquire);
  }

  // Runs `commit`; if it succeeds, delivers `events` in commit order.
  absl::Status CommitAndPublish(const std::function<absl::Status()>& commit,
                                std::vector<Event> events);

 private:
  void DeliverInOrder(uint64_t ticket, std::vector<Event> events);

  std::atomic<bool> has_subscribers_{false};
  std::atomic<uint64_t> next_ticket_{0};

  absl::Mutex deliver_mu_;
  uint64_t next_delivery_ ABSL_GUARDED_BY(deliver_mu_) = 0;
  std::map<uint64_t, std::vector<Event>> waiting_ ABSL_GUARDED_BY(deliver_mu_);
  std::vector<std::pair<int, EventHandler>> subscribers_
      ABSL_GUARDED_BY(deliver_mu_);
  int next_id_ ABSL_GUARDED_BY(deliver_mu_) = 1;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_EVENT_PUBLISHER_H_
