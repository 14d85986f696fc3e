// Batches bound to one statement parameter as rows of a table.
//
// A BoundRows is a list of rows of typed cells. Bound to a parameter
// (Statement::BindRows), SQL reads it through the `sluice_rows`
// table-valued function, whose columns are `key` (the row's 0-based
// position) and c0, c1, ... (its cells):
//
//   BoundRows steps(2);
//   for (const StepRef& step : refs) steps.AddInt(seq_of(step)).AddInt(...);
//   get.BindRows(1, steps);
//   // SELECT j.key, t.output FROM sluice_rows(?1) AS j CROSS JOIN tasks AS t
//   //   ON t.run_seq = j.c0 AND t.step_index = j.c1
//
// A batch of 100 is then one statement execution instead of 100: no
// per-row reset, rebinding or cursor reopening. It works like SQLite's
// carray extension (not part of Debian's library), but rows have several
// typed columns and nothing is formatted or parsed on the way, as it would
// be for a JSON array read with json_each. See
// docs/decisions/0010-sqlite-backend.md.
//
// Rows sorted by their leading integer cells (SortByKey) can also be
// searched: `WHERE c0 = ?` (or `c0 = ? AND c1 = ?`) in a correlated
// subquery is then a binary search, which is what lets an UPDATE take each
// row's new values from the batch while the IN list of keys drives it:
//
//   UPDATE runs SET (status, ...) = (SELECT c1, ... FROM sluice_rows(?1)
//     WHERE c0 = runs.seq) WHERE seq IN (SELECT c0 FROM sluice_rows(?1))
//
// Thread-safety: none; a BoundRows belongs to one statement execution and
// must outlive it (and must not change while bound).
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_BOUND_ROWS_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_BOUND_ROWS_H_

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice::sqlite_internal {

class BoundRows {
 public:
  // The most cells a row may have (c0 ... c23).
  static constexpr int kMaxColumns = 24;
  // The pointer type sqlite3_bind_pointer checks.
  static constexpr char kPointerType[] = "sluice_rows";

  // Rows of `columns` cells each, room made for `rows` of them.
  // REQUIRES: 1 <= columns <= kMaxColumns.
  explicit BoundRows(int columns, size_t rows = 0);
  BoundRows(const BoundRows&) = delete;
  BoundRows& operator=(const BoundRows&) = delete;

  // Append one cell to the row being filled; a row is complete after
  // `columns` cells. Text is copied.
  BoundRows& AddInt(int64_t value);
  BoundRows& AddNull();
  BoundRows& AddText(std::string_view value);
  BoundRows& AddTime(absl::Time value);
  BoundRows& AddOptionalInt(std::optional<int> value);
  BoundRows& AddOptionalTime(std::optional<absl::Time> value);

  // Sorts the rows by their first `key_cells` cells (1 or 2, which must be
  // integers) so searches by them are binary. `key` keeps naming each row's
  // position before the sort.
  void SortByKey(int key_cells);

  // Complete rows.
  int64_t size() const {
    return static_cast<int64_t>(cells_.size()) / columns_;
  }
  bool empty() const { return size() == 0; }
  int columns() const { return columns_; }

  // Sets `context`'s result to cell `column` of row `row`. Text is handed to
  // SQLite without a copy: it stays put while the rows are bound.
  void ResultCell(sqlite3_context* context, int64_t row, int column) const;
  // The position row `row` had when it was added.
  int64_t PositionOf(int64_t row) const;
  // The rows whose leading cells may equal `key`, as [first, last): exactly
  // those, found by binary search, if sorted by at least key.size() cells;
  // else every row.
  // REQUIRES: 1 <= key.size() <= 2.
  std::pair<int64_t, int64_t> Candidates(std::span<const int64_t> key) const;

 private:
  enum class Kind : uint8_t { kNull, kInt, kText };
  struct Cell {
    int64_t value = 0;  // the integer, or the text's offset in text_
    uint32_t text_size = 0;
    Kind kind = Kind::kNull;
  };

  int columns_;
  std::vector<Cell> cells_;         // row-major
  std::string text_;                // every text cell, back to back
  int sorted_by_ = 0;               // leading cells the rows are sorted by
  std::vector<int64_t> positions_;  // each row's position when added, once
                                    // sorted (empty: unsorted)
};

// The most rows one insert binds at a time. A batch larger than this (the
// tasks of a 100,000-element map) is inserted in statements of this many
// rows, so its cells are never all held at once (16 bytes a cell, 21 cells
// a task).
inline constexpr size_t kRowsPerInsert = 1024;

// Calls `insert(begin, end)` for consecutive ranges of at most
// kRowsPerInsert that cover [0, count), stopping at the first error.
template <typename Insert>
absl::Status InsertInChunks(size_t count, Insert insert) {
  for (size_t begin = 0; begin < count; begin += kRowsPerInsert) {
    absl::Status s = insert(begin, std::min(count, begin + kRowsPerInsert));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Registers `sluice_rows` on `db`. Every connection that prepares the
// backend's statements needs it.
absl::Status RegisterBoundRows(sqlite3* db);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_BOUND_ROWS_H_
