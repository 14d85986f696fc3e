#include "huge_pages.h"

#include <cstdint>
#include <new>

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

void* AllocateChunk(size_t bytes) {
  if (!OnHugePages(bytes)) return ::operator new(bytes);
  const size_t size = RoundUp(bytes, kHugePageBytes);
  // Map a huge page more than needed, then unmap the unaligned ends.
  void* mapped = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
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

#endif

}  // namespace sluice::memory
