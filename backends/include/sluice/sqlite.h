// The SQLite backend's entry points for a host that keeps its own data in
// the same SQLite file: enqueuing in the host's transaction, and the
// `sqlite3*` a completion write runs on.
//
//   sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
//   ... the host's own INSERTs on db ...
//   auto borrowed = sluice::BorrowSqlite(db);
//   sluice::HostTransaction host = engine->WithHostTransaction(**borrowed);
//   host.Enqueue("send_invoice", payload);
//   sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
//   host.Committed();  // wakes this process's workers at once
//
// docs/decisions/0037-transactional-enqueue.md explains the design.
#ifndef SLUICE_SQLITE_H_
#define SLUICE_SQLITE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "sluice/backend.h"

struct sqlite3;

namespace sluice {

// A Backend on the host's own connection `db`, whose Begin() opens a
// SAVEPOINT inside the host's open transaction and whose Commit() releases
// it: nothing Sluice writes through it is committed, or seen by any other
// connection, until the host commits its transaction; a host rollback
// removes it all. Begin the host transaction with BEGIN IMMEDIATE, so it
// holds the write lock from the start (a deferred one may fail with
// SQLITE_BUSY when it first writes).
//
// kInvalidArgument for a null `db`. kFailedPrecondition, changing nothing,
// if `db` has no open transaction (Begin() checks again each time), or its
// database has no Sluice schema of this build's version (open the file once
// with SqliteBackend::Open / OpenBackend("sqlite:PATH") to create it).
//
// The borrowed backend registers Sluice's `sluice_rows` table function on
// `db`, uses `db` only on the thread that calls it, and must be destroyed
// before `db` is closed. It has no queue watch: workers of this process wake
// on HostTransaction::Committed(), others by polling.
absl::StatusOr<std::unique_ptr<Backend>> BorrowSqlite(sqlite3* db);

// The `sqlite3*` a completion write runs on; null unless `connection` is an
// SQLite backend's.
sqlite3* SqliteHandle(const NativeConnection& connection);

}  // namespace sluice

#endif  // SLUICE_SQLITE_H_
