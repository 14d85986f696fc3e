// The SQLite backend's schema and its version check.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_H_

#include <sqlite3.h>

#include "absl/status/status.h"

namespace sluice::sqlite_internal {

// In one IMMEDIATE transaction: creates the schema in an empty database and
// sets `PRAGMA user_version`, upgrades a file of an earlier version in place
// (every row kept), and checks that the database then has this build's
// version and every table and index of it. kFailedPrecondition
// (naming both versions) for a newer schema, for a file that holds tables
// but no Sluice schema version, and (naming them) for missing tables or
// indexes; nothing is changed then.
// REQUIRES: no transaction is open on `db`.
absl::Status EnsureSchema(sqlite3* db);

// Checks, without changing anything, that `db`'s database has exactly this
// build's schema version and every table and index of it;
// kFailedPrecondition naming what is wrong otherwise. Runs in whatever
// transaction `db` has open (a borrowed host connection's).
absl::Status CheckSchema(sqlite3* db);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_H_
