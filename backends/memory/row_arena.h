// Rows at stable addresses, for tables whose rows are never deleted.
#ifndef SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_
#define SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace sluice::memory {

// Rows live in fixed-size chunks, so adding a row never moves another: hash
// indexes can hold Row* and stay small, and growing a table never copies its
// rows. Only the newest row can be removed. That is all the store needs: rows
// are only ever removed by rolling back their insertion, and a rollback
// reverts changes newest first.
//
// Not thread-safe.
template <typename Row, size_t kRowsPerChunk = 512>
class RowArena {
 public:
  RowArena() = default;
  RowArena(const RowArena&) = delete;
  RowArena& operator=(const RowArena&) = delete;

  // Returns the new row; its address never changes while it exists.
  Row& Append(Row row) {
    if (chunks_.empty() || chunks_.back().size() == kRowsPerChunk) {
      chunks_.emplace_back().reserve(kRowsPerChunk);
    }
    return chunks_.back().emplace_back(std::move(row));
  }

  bool IsNewest(const Row& row) const {
    const std::vector<Row>* chunk = NewestChunk();
    return chunk != nullptr && &chunk->back() == &row;
  }

  // Removes the newest row. REQUIRES: there is one.
  void PopNewest() {
    // A chunk emptied by PopNewest is kept until the one before it is popped
    // from, so rolling back and redoing an insert at a chunk boundary does
    // not free and allocate a chunk every time.
    if (chunks_.back().empty()) chunks_.pop_back();
    chunks_.back().pop_back();
  }

 private:
  // The last chunk holding a row, or nullptr.
  const std::vector<Row>* NewestChunk() const {
    for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
      if (!it->empty()) return &*it;
    }
    return nullptr;
  }

  // Each chunk's capacity is reserved up front and never exceeded, so its
  // rows never move.
  std::vector<std::vector<Row>> chunks_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_ROW_ARENA_H_
