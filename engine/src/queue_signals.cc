#include "queue_signals.h"

#include <algorithm>

namespace sluice {

int QueueSignals::Listen(std::string queue, std::function<void()> poke) {
  absl::MutexLock lock(&mu_);
  int id = next_id_++;
  listeners_.push_back({id, std::move(queue), std::move(poke)});
  return id;
}

void QueueSignals::Unlisten(int id) {
  absl::MutexLock lock(&mu_);
  std::erase_if(listeners_, [id](const Listener& l) { return l.id == id; });
}

void QueueSignals::Notify(std::string_view queue) {
  absl::MutexLock lock(&mu_);
  for (const Listener& l : listeners_) {
    if (queue.empty() || l.queue == queue) l.poke();
  }
}

}  // namespace sluice
