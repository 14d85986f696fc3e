// The memory backend: the reference backend, in-process and deterministic.
//
// Transactions are exclusive: Begin() takes the backend's one lock and the
// transaction holds it until it commits or is dropped, so transactions run
// one at a time in the order they begin. Changes are applied in place and an
// undo log reverts them on rollback. Row locks (LockMode) are therefore
// implied and ignored.
//
// Thread-safety: safe for concurrent use; a Transaction belongs to one thread.
#ifndef SLUICE_BACKENDS_MEMORY_MEMORY_BACKEND_H_
#define SLUICE_BACKENDS_MEMORY_MEMORY_BACKEND_H_

#include <memory>
#include <string_view>

#include "sluice/backend.h"

namespace sluice {

class MemoryBackend : public Backend {
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
