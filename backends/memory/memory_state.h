// The state behind a MemoryBackend: its one lock and what the lock guards.
#ifndef SLUICE_BACKENDS_MEMORY_MEMORY_STATE_H_
#define SLUICE_BACKENDS_MEMORY_MEMORY_STATE_H_

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "memory_backend.h"
#include "memory_store.h"
#include "undo_log.h"

namespace sluice {

// Lock discipline: `mu` is the only lock. An open MemoryTransaction holds it
// from Begin() until Commit(), a failed call, or its destruction; nothing
// else takes it, so there is no lock order to keep.
struct MemoryBackend::State {
  absl::Mutex mu;
  // The thread whose open transaction holds `mu` (default id if none), so a
  // second Begin() on that thread fails instead of deadlocking.
  std::atomic<std::thread::id> holder;
  memory::MemoryStore store ABSL_GUARDED_BY(mu);
  // The open transaction's changes. Shared by every transaction (one is open
  // at a time) so its vectors keep their capacity from one to the next.
  memory::UndoLog undo ABSL_GUARDED_BY(mu);
};

}  // namespace sluice

#endif  // SLUICE_BACKENDS_MEMORY_MEMORY_STATE_H_
