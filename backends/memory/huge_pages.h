// Memory for the memory backend's large row chunks, on transparent huge
// pages where the kernel offers them (docs/decisions/0054).
#ifndef SLUICE_BACKENDS_MEMORY_HUGE_PAGES_H_
#define SLUICE_BACKENDS_MEMORY_HUGE_PAGES_H_

#include <cstddef>

namespace sluice::memory {

// The x86-64 and arm64 (4 KiB granule) transparent huge page.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Returns uninitialised memory for `bytes`, aligned for any row type. Above
// half a huge page (Linux), it is its own mapping of whole huge pages,
// aligned to one and advised MADV_HUGEPAGE, so the kernel can back it with 2
// MiB pages: a growing store then faults once per 2 MiB instead of once per 4
// KiB, and page faults were a fifth of the memory backend's W1 time. Smaller
// blocks, and other systems, use operator new. Throws std::bad_alloc when out
// of memory, like operator new.
void* AllocateChunk(size_t bytes);

// Frees memory from AllocateChunk(bytes), given the same `bytes`.
void FreeChunk(void* memory, size_t bytes) noexcept;

// Faults in, ahead of need, the huge-page chunks that AllocateChunk will hand
// out next (Linux). Call it outside the store's lock: faulting a 2 MiB page
// in means the kernel zeroes it, a few milliseconds on a VM, and under the
// lock that stalls every worker (docs/decisions/0093). Does nothing until some
// store has taken a huge-page chunk, and keeps at most kReadyChunks ready for
// the whole process: chunks are interchangeable among arenas and stores.
// Never throws; when the system is out of memory, AllocateChunk maps its own.
void PrepareChunks() noexcept;
inline constexpr int kReadyChunks = 2;

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_HUGE_PAGES_H_
