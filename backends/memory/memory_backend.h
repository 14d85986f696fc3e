// The memory backend: the reference backend, in-process and deterministic.
//
// Transactions are exclusive: Begin() takes the backend's one lock and the
// transaction holds it until it commits or is dropped, so transactions run
// one at a time in the order they begin. Changes are applied in place and an
// undo log reverts them on rollback. Row locks (LockMode) are therefore
// implied and ignored. A call that fails rolls the transaction back at once
// and releases the lock; later calls on it return kFailedPrecondition.
//
// Semantics the interface leaves open: a limit of 0 or less lists nothing
// (as in the SQLite backend), and ids handed out by a rolled-back transaction
// (messages, reports) are handed out again.
//
// Memory: writes take ownership of what they may move from; every stored
// JSON value lives in the default memory resource (stored_copy.h). Rows go
// away only through DeleteRuns (the retention path); until then the store
// grows with every run, task and archived message. A deleted row's memory is
// freed when its transaction commits, and its slot is reused by later rows.
//
// Thread-safety: safe for concurrent use; a Transaction belongs to one thread,
// which must not Begin() another on the same backend while it is open (that
// returns kFailedPrecondition instead of deadlocking). Transactions must not
// outlive the backend.
#ifndef SLUICE_BACKENDS_MEMORY_MEMORY_BACKEND_H_
#define SLUICE_BACKENDS_MEMORY_MEMORY_BACKEND_H_

#include <memory>
#include <string_view>

#include "sluice/backend.h"
#include "sluice/internal/stores_payload_copies.h"

namespace sluice {

class MemoryBackend : public Backend, public internal::StoresPayloadCopies {
 public:
  MemoryBackend();
  ~MemoryBackend() override;

  std::string_view name() const override { return "memory"; }
  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace sluice

#endif  // SLUICE_BACKENDS_MEMORY_MEMORY_BACKEND_H_
