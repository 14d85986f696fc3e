#include "sqlite_statement.h"

#include <limits>
#include <utility>

#include "sluice/internal/strings.h"
#include "sqlite_bound_rows.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {

int64_t ToStoredTime(absl::Time time) {
  if (time == absl::InfiniteFuture())
    return std::numeric_limits<int64_t>::max();
  if (time == absl::InfinitePast()) return std::numeric_limits<int64_t>::min();
  return absl::ToUnixMicros(time);
}

absl::Time FromStoredTime(int64_t micros) {
  if (micros == std::numeric_limits<int64_t>::max()) {
    return absl::InfiniteFuture();
  }
  if (micros == std::numeric_limits<int64_t>::min()) {
    return absl::InfinitePast();
  }
  return absl::FromUnixMicros(micros);
}

Statement::Statement(sqlite3_stmt* statement, bool* borrowed,
                     std::string_view operation)
    : statement_(statement), borrowed_(borrowed), operation_(operation) {}

Statement::Statement(Statement&& other) noexcept
    : statement_(std::exchange(other.statement_, nullptr)),
      borrowed_(std::exchange(other.borrowed_, nullptr)),
      operation_(other.operation_),
      bind_result_(other.bind_result_) {}

Statement::~Statement() {
  if (statement_ == nullptr) return;
  // reset() repeats the last step's error, which was already reported.
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
  *borrowed_ = false;
}

void Statement::NoteBind(int result) {
  if (bind_result_ == SQLITE_OK) bind_result_ = result;
}

void Statement::BindInt(int index, int64_t value) {
  NoteBind(sqlite3_bind_int64(statement_, index, value));
}

void Statement::BindText(int index, std::string_view value) {
  NoteBind(sqlite3_bind_text64(statement_, index, value.data(), value.size(),
                               SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::BindBorrowedText(int index, std::string_view value) {
  NoteBind(sqlite3_bind_text64(statement_, index, value.data(), value.size(),
                               SQLITE_STATIC, SQLITE_UTF8));
}

void Statement::BindNull(int index) {
  NoteBind(sqlite3_bind_null(statement_, index));
}

void Statement::BindTime(int index, absl::Time value) {
  BindInt(index, ToStoredTime(value));
}

void Statement::BindOptionalInt(int index, std::optional<int> value) {
  if (value.has_value()) {
    BindInt(index, *value);
  } else {
    BindNull(index);
  }
}

void Statement::BindOptionalTime(int index, std::optional<absl::Time> value) {
  if (value.has_value()) {
    BindTime(index, *value);
  } else {
    BindNull(index);
  }
}

void Statement::BindRows(int index, const BoundRows& rows) {
  // SQLite only reads through the pointer; the cast is its API's.
  NoteBind(sqlite3_bind_pointer(statement_, index,
                                const_cast<BoundRows*>(&rows),
                                BoundRows::kPointerType, nullptr));
}

absl::StatusOr<bool> Statement::Step() {
  sqlite3* db = sqlite3_db_handle(statement_);
  if (bind_result_ != SQLITE_OK) {
    return StatusFromSqlite(bind_result_, db, operation_);
  }
  int result = sqlite3_step(statement_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  return StatusFromSqlite(result, db, operation_);
}

void Statement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
  bind_result_ = SQLITE_OK;
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int Statement::Changes() const {
  return sqlite3_changes(sqlite3_db_handle(statement_));
}

int64_t Statement::LastInsertRowid() const {
  return sqlite3_last_insert_rowid(sqlite3_db_handle(statement_));
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(statement_, column);
}

std::string_view Statement::Text(int column) const {
  // text() before bytes(), as SQLite asks: text() may convert the value.
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return {};
  int size = sqlite3_column_bytes(statement_, column);
  return {reinterpret_cast<const char*>(text), static_cast<size_t>(size)};
}

absl::Time Statement::Time(int column) const {
  return FromStoredTime(Int(column));
}

std::optional<int> Statement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return static_cast<int>(Int(column));
}

std::optional<absl::Time> Statement::OptionalTime(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Time(column);
}

StatementCache::~StatementCache() {
  for (auto& [sql, entry] : entries_) sqlite3_finalize(entry.statement);
}

absl::StatusOr<Statement> StatementCache::Prepare(std::string_view sql,
                                                  std::string_view operation) {
  auto it = entries_.find(ToAbsl(sql));
  if (it == entries_.end()) {
    sqlite3_stmt* statement = nullptr;
    int result =
        sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                           SQLITE_PREPARE_PERSISTENT, &statement, nullptr);
    if (result != SQLITE_OK) return StatusFromSqlite(result, db_, operation);
    it = entries_.emplace(std::string(sql), Entry{statement, false}).first;
  }
  Entry& entry = it->second;
  if (entry.borrowed) {
    return absl::InternalError(StrCat(
        "sqlite ", operation, ": a statement was used while already in use"));
  }
  entry.borrowed = true;
  return Statement(entry.statement, &entry.borrowed, operation);
}

}  // namespace sluice::sqlite_internal
