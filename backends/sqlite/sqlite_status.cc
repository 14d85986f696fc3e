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
    case SQLITE_FULL:
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
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_INTERRUPT:
      return absl::StatusCode::kCancelled;
    case SQLITE_SCHEMA:
    case SQLITE_ABORT:
      return absl::StatusCode::kAborted;
    default:  // SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_ERROR, SQLITE_MISUSE...
      return absl::StatusCode::kInternal;
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
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    StrAppend(&message,
              "; another connection held the write lock past the busy "
              "timeout, retry later");
  }
  return absl::Status(CodeFor(code), message);
}

absl::Status DescribeDuplicate(const absl::Status& status,
                               std::string_view record) {
  if (status.code() != absl::StatusCode::kAlreadyExists) return status;
  return absl::AlreadyExistsError(
      StrCat(record, " already exists (", status.message(), ")"));
}

}  // namespace sluice::sqlite_internal
