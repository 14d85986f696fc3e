// Postgres failures as Abseil status codes, with Abseil's retry meaning:
//
//   40001 serialization failure, 40P01 deadlock, 55P03 lock not available
//                                          -> kAborted (retry the transaction)
//   class 08, 57P01..57P03, a lost connection -> kUnavailable (retry later)
//   23505 unique violation                 -> kAlreadyExists
//   53300 too many connections             -> kUnavailable
//   23503 foreign key violation, P0002 (sluice.require_found), 42P01 on a
//   queue's table, 3D000 no such database  -> kNotFound
//   22003 numeric value out of range       -> kOutOfRange
//   42501 insufficient privilege, class 28 (28P01 wrong password, 28000
//   unknown role or no pg_hba.conf entry)  -> kPermissionDenied
//   57014 query canceled (statement timeout) -> kDeadlineExceeded
//   anything else                          -> kInternal
#ifndef SLUICE_BACKENDS_POSTGRES_PG_STATUS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_STATUS_H_

#include <libpq-fe.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace sluice::postgres_internal {

// What a statement was for, to name in its error.
struct StatementContext {
  std::string operation;  // "UpdateRuns"
  std::string queue;      // set for statements on a queue's tables
};

// The code for a SQLSTATE, by the table above (42P01 on a queue's table
// is the caller's to tell: kInternal here).
absl::StatusCode CodeForSqlstate(std::string_view state);

// The status of a failed `result` (which may be null when the connection
// failed before one arrived); `connection` supplies the message then.
absl::Status StatusFromResult(const PGresult* result, PGconn* connection,
                              const StatementContext& context);

// The SQLSTATE that a status from StatusFromResult carries ("" for none),
// for callers that must tell apart failures sharing a code (55006 object in
// use is kInternal like most).
std::string SqlstateOf(const absl::Status& status);

// kUnavailable naming the operation and libpq's message.
absl::Status ConnectionLost(PGconn* connection, std::string_view operation);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_STATUS_H_
