#include "memory_backend.h"

#include <thread>

#include "huge_pages.h"
#include "memory_state.h"
#include "memory_transaction.h"

namespace sluice {

MemoryBackend::MemoryBackend() : state_(std::make_unique<State>()) {}

MemoryBackend::~MemoryBackend() = default;

absl::StatusOr<std::unique_ptr<Transaction>> MemoryBackend::Begin() {
  if (state_->holder.load(std::memory_order_relaxed) ==
      std::this_thread::get_id()) {
    return absl::FailedPreconditionError(
        "this thread already has an open memory transaction; commit or drop "
        "it before beginning another (waiting would deadlock)");
  }
  // Before the lock: a growing store's next chunks are faulted in here, not
  // while it holds every other transaction up.
  memory::PrepareChunks();
  return std::make_unique<memory::MemoryTransaction>(*state_);
}

}  // namespace sluice
