// Rows at stable addresses, with erased rows' slots reused.
#ifndef SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_
#define SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "huge_pages.h"

namespace sluice::memory {

// Rows live in fixed-size chunks, so adding a row never moves another: hash
// indexes can hold Row* and stay small, and growing a table never copies its
// rows. Erasing a row destroys it at once (freeing what it owns: JSON,
// strings) and puts its slot on a free list that the next AddMade takes
// first, so a table's slots are bounded by its peak row count, not by its
// history.
// Chunks are kept until the arena is destroyed, even when empty: a table that
// empties and refills (a run deleted, the next one inserted) then reuses
// memory it has already touched instead of faulting in fresh pages.
//
// The first chunk holds kFirstChunkRows rows and each next one twice as many,
// up to a huge page's worth (huge_pages.h): a small table stays small, and a
// large one grows in 2 MiB chunks the kernel can map with one page fault each.
//
// Not thread-safe.
template <typename Row, size_t kFirstChunkRows = 256>
class RowArena {
 public:
  RowArena() = default;
  RowArena(const RowArena&) = delete;
  RowArena& operator=(const RowArena&) = delete;
  ~RowArena() {
    DestroyLiveRows();
    for (const Chunk& chunk : chunks_) {
      FreeChunk(chunk.slots, chunk.capacity * sizeof(Slot));
    }
  }

  // Adds `make()`'s result, built in its slot: a row with many members (a
  // run's or a task's record) is not moved there from a temporary. Returns
  // the new row; its address never changes while it exists.
  template <typename Make>
  Row& AddMade(Make make) {
    Slot* slot = TakeSlot();
    Row* added = ::new (static_cast<void*>(&slot->row)) Row(make());
    ++size_;
    return *added;
  }

  // Destroys `row`. REQUIRES: `row` was returned by AddMade and not erased.
  void Erase(Row& row) {
    // A union and its members are pointer-interconvertible.
    Slot* slot = reinterpret_cast<Slot*>(&row);
    std::destroy_at(&row);
    slot->next_free = free_;
    free_ = slot;
    --size_;
  }

  size_t size() const { return size_; }

 private:
  // A slot holds a row, or is free and links to the next free slot.
  union Slot {
    Slot() {}
    ~Slot() {}
    Row row;
    Slot* next_free;
  };

  // A chunk's slots; AllocateChunk's memory, whose slots are constructed one
  // by one as rows are added (a free slot holds only `next_free`).
  struct Chunk {
    Slot* slots;
    size_t capacity;
  };
  static_assert(alignof(Slot) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  static constexpr size_t kLargeChunkRows =
      std::max(kFirstChunkRows, kHugePageBytes / sizeof(Slot));

  Slot* TakeSlot() {
    if (free_ != nullptr) return std::exchange(free_, free_->next_free);
    if (chunks_.empty() || used_in_last_ == chunks_.back().capacity) {
      AddChunk();
    }
    return std::construct_at(chunks_.back().slots + used_in_last_++);
  }

  void AddChunk() {
    const size_t capacity =
        chunks_.empty()
            ? kFirstChunkRows
            : std::min(chunks_.back().capacity * 2, kLargeChunkRows);
    // Room first, so the push_back below can't throw and leak the chunk.
    if (chunks_.size() == chunks_.capacity()) {
      chunks_.reserve(std::max<size_t>(8, 2 * chunks_.size()));
    }
    void* memory = AllocateChunk(capacity * sizeof(Slot));
    chunks_.push_back(Chunk{static_cast<Slot*>(memory), capacity});
    used_in_last_ = 0;
  }

  void DestroyLiveRows() {
    if (size_ == 0) return;
    absl::flat_hash_set<const Slot*> free_slots;
    for (const Slot* s = free_; s != nullptr; s = s->next_free) {
      free_slots.insert(s);
    }
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const size_t used =
          c + 1 == chunks_.size() ? used_in_last_ : chunks_[c].capacity;
      for (size_t i = 0; i < used; ++i) {
        Slot& slot = chunks_[c].slots[i];
        if (!free_slots.contains(&slot)) std::destroy_at(&slot.row);
      }
    }
  }

  std::vector<Chunk> chunks_;
  size_t used_in_last_ = 0;  // slots of the last chunk ever handed out
  Slot* free_ = nullptr;     // erased slots, most recent first
  size_t size_ = 0;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_
