// SQLite result codes as Abseil statuses.
//
// Mapping (Abseil's retry meaning, see backend.h):
//   SQLITE_BUSY, SQLITE_LOCKED         kUnavailable: another writer held the
//                                      lock past the busy timeout; retry later
//   SQLITE_CONSTRAINT (unique, primary kAlreadyExists: the record exists
//   key, rowid)
//   other SQLITE_CONSTRAINT            kInternal: the schema rejected a row the
//                                      backend built (a backend bug)
//   SQLITE_CORRUPT                     kInternal: the file is damaged
//   SQLITE_NOTADB                      kFailedPrecondition: the file is not a
//                                      database; point at another file
//   SQLITE_IOERR, SQLITE_CANTOPEN,     kUnavailable: the disk or the file is in
//   SQLITE_PROTOCOL                    trouble; retry later
//   SQLITE_READONLY, SQLITE_PERM,      kFailedPrecondition: fix the file's
//   SQLITE_AUTH                        permissions first
//   SQLITE_FULL                        kResourceExhausted: the disk is full or
//                                      the file reached max_pages
//   SQLITE_NOMEM                       kResourceExhausted
//   SQLITE_TOOBIG                      kInvalidArgument
//   SQLITE_INTERRUPT                   kCancelled
//   SQLITE_SCHEMA, SQLITE_ABORT        kAborted: retry the transaction
//   anything else                      kInternal
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_STATUS_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_STATUS_H_

#include <sqlite3.h>

#include <string_view>

#include "absl/status/status.h"

namespace sluice::sqlite_internal {

// The status for the (extended) result `code` that `operation` (an
// operation name such as "InsertTasks") got from SQLite. Adds SQLite's own
// message for `db` when `db` is not null, and what to do for the codes an
// operator fixes (full, read-only, not a database). SQLite's messages name
// tables and columns, never bound values, so no payload reaches the status.
absl::Status StatusFromSqlite(int code, sqlite3* db,
                              std::string_view operation);

// `status` unless it reports a duplicate key; then a kAlreadyExists naming
// `record` ("run 0190... already exists"), with SQLite's detail (which
// names the key's columns).
absl::Status DescribeDuplicate(const absl::Status& status,
                               std::string_view record);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_STATUS_H_
