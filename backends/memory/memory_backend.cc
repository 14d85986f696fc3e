#include "memory_backend.h"

// Placeholder until the memory backend lands.
namespace sluice {
struct MemoryBackend::State {};
MemoryBackend::MemoryBackend() : state_(std::make_unique<State>()) {}
MemoryBackend::~MemoryBackend() = default;
absl::StatusOr<std::unique_ptr<Transaction>> MemoryBackend::Begin() {
  return absl::UnimplementedError("memory backend not built yet");
}
}  // namespace sluice
