// In-process wake-ups: a transaction that makes messages visible on a queue
// pokes the workers idle on it, so they claim without waiting for a poll.
#ifndef SLUICE_ENGINE_QUEUE_SIGNALS_H_
#define SLUICE_ENGINE_QUEUE_SIGNALS_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice {

// Thread-safe. Listeners run under this object's lock, so a listener must
// only set a flag or signal a condition variable.
class QueueSignals {
 public:
  int Listen(std::string queue, std::function<void()> poke);
  void Unlisten(int id);
  // Pokes the listeners of `queue`, or every listener if `queue` is empty.
  void Notify(std::string_view queue);

 private:
  struct Listener {
    int id;
    std::string queue;
    std::function<void()> poke;
  };
  absl::Mutex mu_;
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_QUEUE_SIGNALS_H_
