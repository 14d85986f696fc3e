// Prepared statements: a per-connection cache and one execution at a time.
//
//   SLUICE_ASSIGN_OR_RETURN(
//       Statement get, cache.Prepare("SELECT ... WHERE slug = ?1",
//       "GetFlow"));
//   get.BindText(1, flow_slug);
//   SLUICE_ASSIGN_OR_RETURN(bool found, get.Step());
//
// Every value is bound, never formatted into SQL. Times are stored as INTEGER
// microseconds since the Unix epoch.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_STATEMENT_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::sqlite_internal {

class BoundRows;

// SQL text assembled at compile time, so a column list is written once and
// shared by every statement that reads those columns. Converts to
// std::string_view; join a joined text through its `text` member:
//
//   constexpr auto kFrom = JoinSql(" FROM tasks WHERE ", kCondition);
//   constexpr auto kSelect = JoinSql("SELECT ", kColumns, kFrom.text);
//   cache.Prepare(kSelect, "GetTasks");
template <size_t N>
struct SqlText {
  char text[N] = {};
  constexpr std::string_view view() const { return {text, N - 1}; }
  constexpr operator std::string_view() const { return view(); }  // NOLINT
};

template <size_t... N>
constexpr SqlText<(N + ...) - sizeof...(N) + 1> JoinSql(
    const char (&... parts)[N]) {
  SqlText<(N + ...) - sizeof...(N) + 1> joined;
  size_t position = 0;
  ((std::copy_n(parts, N - 1, joined.text + position), position += N - 1), ...);
  return joined;
}

// Infinite times map to the ends of the integer range, so "never visible"
// survives a round trip.
int64_t ToStoredTime(absl::Time time);
absl::Time FromStoredTime(int64_t micros);

// One execution of a cached prepared statement. Binds by 1-based parameter
// index, steps, and reads the current row's columns by 0-based index. When it
// goes out of scope it resets the statement and clears its bindings, so the
// cache can hand the statement out again. Move-only.
//
// A failed bind is remembered and reported by the next Step() or Run().
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  // Text is copied into SQLite, so temporaries are fine.
  void BindInt(int index, int64_t value);
  void BindText(int index, std::string_view value);
  void BindNull(int index);
  void BindTime(int index, absl::Time value);
  void BindOptionalInt(int index, std::optional<int> value);
  void BindOptionalTime(int index, std::optional<absl::Time> value);
  // As BindText without the copy, for hot statements run once per record:
  // `value` must outlive this execution, up to Reset() or this object's end.
  void BindBorrowedText(int index, std::string_view value);
  // Binds `rows` for `sluice_rows(?index)` (sqlite_bound_rows.h). `rows`
  // must outlive this execution.
  void BindRows(int index, const BoundRows& rows);

  // Advances to the next row: true if there is one, false when done.
  absl::StatusOr<bool> Step();
  // Readies the statement to run again with new bindings (for loops that
  // run one statement per row).
  void Reset();
  // Steps until done, ignoring any rows.
  absl::Status Run();
  // Rows changed by the last completed INSERT, UPDATE or DELETE.
  int Changes() const;
  // The rowid the last INSERT assigned.
  int64_t LastInsertRowid() const;

  // Columns of the current row. Text stays valid until the next Step().
  bool IsNull(int column) const;
  int64_t Int(int column) const;
  std::string_view Text(int column) const;
  absl::Time Time(int column) const;
  std::optional<int> OptionalInt(int column) const;
  std::optional<absl::Time> OptionalTime(int column) const;

 private:
  friend class StatementCache;
  // `operation` must outlive the statement (operation names are literals).
  Statement(sqlite3_stmt* statement, bool* borrowed,
            std::string_view operation);
  void NoteBind(int result);

  sqlite3_stmt* statement_;
  bool* borrowed_;  // the cache entry's flag, cleared on destruction
  std::string_view operation_;
  int bind_result_ = SQLITE_OK;
};

// A connection's prepared statements, keyed by SQL text and prepared once
// with SQLITE_PREPARE_PERSISTENT.
//
// REQUIRES: external synchronization (the connection's mutex); the cache
// must outlive every Statement it hands out and be destroyed before its
// connection is closed.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache();

  // The statement for `sql`, prepared on first use. `operation` names the
  // caller in errors. kInternal if the statement is already in use (a nested
  // use of one statement is a backend bug).
  absl::StatusOr<Statement> Prepare(std::string_view sql,
                                    std::string_view operation);

 private:
  struct Entry {
    sqlite3_stmt* statement = nullptr;
    bool borrowed = false;
  };

  sqlite3* db_;
  // Node-based: a borrowed Statement points at its entry's flag.
  absl::node_hash_map<std::string, Entry> entries_;
};

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_STATEMENT_H_
