#include "huge_pages.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <new>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace sluice::memory {
namespace {

[[maybe_unused]] size_t RoundUp(size_t value, size_t to) {
  return (value + to - 1) / to * to;
}

// A chunk of a huge page's worth of rows falls short of it by part of a row.
[[maybe_unused]] bool OnHugePages(size_t bytes) {
  return bytes > kHugePageBytes / 2;
}

}  // namespace

#ifdef __linux__

namespace {

// `size` bytes of whole huge pages, aligned to one; null when out of memory.
void* MapHugePages(size_t size) noexcept {
  // Map a huge page more than needed, then unmap the unaligned ends.
  void* mapped = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = RoundUp(start, kHugePageBytes);
  if (aligned > start) munmap(mapped, aligned - start);
  const uintptr_t end = aligned + size;
  const uintptr_t mapped_end = start + size + kHugePageBytes;
  if (mapped_end > end) {
    munmap(reinterpret_cast<void*>(end), mapped_end - end);
  }
  void* chunk = reinterpret_cast<void*>(aligned);
  // Advice only: with THP off, or "never", the chunk keeps 4 KiB pages.
  madvise(chunk, size, MADV_HUGEPAGE);
  return chunk;
}

// Writes one byte of every 4 KiB page, so the kernel backs them all now (one
// fault per huge page where it uses them).
void FaultIn(void* chunk, size_t size) noexcept {
  auto* bytes = static_cast<volatile unsigned char*>(chunk);
  for (size_t offset = 0; offset < size; offset += 4096) bytes[offset] = 0;
}

// One-huge-page chunks faulted in ahead of need (PrepareChunks).
class ChunkReserve {
 public:
  // A ready chunk, or null; either way one more is wanted.
  void* Take() {
    int wanted = wanted_.load(std::memory_order_relaxed);
    while (wanted < kReadyChunks &&
           !wanted_.compare_exchange_weak(wanted, wanted + 1,
                                          std::memory_order_relaxed)) {
    }
    absl::MutexLock lock(&mu_);
    return ready_count_ == 0 ? nullptr : ready_[--ready_count_];
  }

  void Prepare() {
    if (wanted_.load(std::memory_order_relaxed) == 0) return;
    // One thread prepares at a time; the others go straight on.
    if (preparing_.exchange(true, std::memory_order_acquire)) return;
    while (wanted_.load(std::memory_order_relaxed) > 0) {
      void* chunk = MapHugePages(kHugePageBytes);
      if (chunk == nullptr) break;
      FaultIn(chunk, kHugePageBytes);
      if (!Keep(chunk)) munmap(chunk, kHugePageBytes);
      wanted_.fetch_sub(1, std::memory_order_relaxed);
    }
    preparing_.store(false, std::memory_order_release);
  }

 private:
  bool Keep(void* chunk) {
    absl::MutexLock lock(&mu_);
    if (ready_count_ == kReadyChunks) return false;
    ready_[ready_count_++] = chunk;
    return true;
  }

  absl::Mutex mu_;
  std::array<void*, kReadyChunks> ready_ ABSL_GUARDED_BY(mu_) = {};
  int ready_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> wanted_{0};  // chunks taken and not yet replaced
  std::atomic<bool> preparing_{false};
};

// Never destroyed: the ready chunks go with the process.
ChunkReserve& Reserve() {
  static ChunkReserve* reserve = new ChunkReserve;
  return *reserve;
}

}  // namespace

void* AllocateChunk(size_t bytes) {
  if (!OnHugePages(bytes)) return ::operator new(bytes);
  const size_t size = RoundUp(bytes, kHugePageBytes);
  if (size == kHugePageBytes) {
    if (void* ready = Reserve().Take()) return ready;
  }
  void* chunk = MapHugePages(size);
  if (chunk == nullptr) throw std::bad_alloc();
  return chunk;
}

void PrepareChunks() noexcept { Reserve().Prepare(); }

void FreeChunk(void* memory, size_t bytes) noexcept {
  if (!OnHugePages(bytes)) {
    ::operator delete(memory);
    return;
  }
  munmap(memory, RoundUp(bytes, kHugePageBytes));
}

#else

void* AllocateChunk(size_t bytes) { return ::operator new(bytes); }

void FreeChunk(void* memory, size_t /*bytes*/) noexcept {
  ::operator delete(memory);
}

void PrepareChunks() noexcept {}

#endif

}  // namespace sluice::memory
