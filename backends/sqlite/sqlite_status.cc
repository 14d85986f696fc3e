#include "sqlite_status.h"

#include <string>

#include "sluice/internal/strings.h"

namespace sluice::sqlite_internal {
namespace {

absl::StatusCode CodeFor(int extended_code) {
  switch (extended_code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      switch (extended_code) {
        case SQLITE_CONSTRAINT_PRIMARYKEY:
        case SQLITE_CONSTRAINT_UNIQUE:
        case SQLITE_CONSTRAINT_ROWID:
          return absl::StatusCode::kAlreadyExists;
        default:
          return absl::StatusCode::kInternal;
      }
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_NOTADB:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_NOMEM:
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_INTERRUPT:
      return absl::StatusCode::kCancelled;
    case SQLITE_SCHEMA:
    case SQLITE_ABORT:
      return absl::StatusCode::kAborted;
    default:  // SQLITE_CORRUPT, SQLITE_ERROR, SQLITE_MISUSE...
      return absl::StatusCode::kInternal;
  }
}

// What to do about `code`, for the codes whose cause the operator fixes.
std::string_view HintFor(int extended_code) {
  switch (extended_code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "; another connection held the write lock past the busy "
             "timeout, retry later";
    case SQLITE_FULL:
      return "; the disk is full or the database reached its size limit "
             "(SqliteOptions::max_pages): free space, then retry; nothing "
             "of the failed transaction is kept";
    case SQLITE_READONLY:
      return "; the file, its directory or its file system is read-only: "
             "make them writable for this process";
    case SQLITE_NOTADB:
      return "; the file is not an SQLite database: point sqlite:PATH at a "
             "Sluice database or at a path that does not exist yet";
    default:
      return "";
  }
}

}  // namespace

absl::Status StatusFromSqlite(int code, sqlite3* db,
                              std::string_view operation) {
  // sqlite3_errmsg describes the connection's latest failure; without a
  // connection the generic text for the code is all there is.
  const char* detail =
      db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  std::string message =
      StrCat("sqlite ", operation, ": ", detail, " (code ", code, ")");
  StrAppend(&message, HintFor(code));
  return absl::Status(CodeFor(code), message);
}

absl::Status DescribeDuplicate(const absl::Status& status,
                               std::string_view record) {
  if (status.code() != absl::StatusCode::kAlreadyExists) return status;
  return absl::AlreadyExistsError(
      StrCat(record, " already exists (", status.message(), ")"));
}

}  // namespace sluice::sqlite_internal
