// The database connection a backend transaction runs on, for code that
// writes its own rows in the same transaction: a handler's write that must
// commit with its task's completion (TaskContext::WriteOnCompletion).
//
//   context.WriteOnCompletion([](const sluice::NativeConnection& c) {
//     sqlite3* db = sluice::SqliteHandle(c);  // sluice/sqlite.h
//     ... INSERT the handler's row on db ...
//     return absl::OkStatus();
//   });
#ifndef SLUICE_NATIVE_CONNECTION_H_
#define SLUICE_NATIVE_CONNECTION_H_

#include <functional>
#include <string_view>

#include "absl/status/status.h"

namespace sluice {

// `backend` is the backend's name() and `handle` its native handle: an
// `sqlite3*` for "sqlite", a `PGconn*` for "postgres" (SqliteHandle in
// sluice/sqlite.h and PostgresHandle in sluice/postgres.h convert it, null
// for another backend); null for a backend without one (memory).
struct NativeConnection {
  std::string_view backend;
  void* handle = nullptr;
};

// A write run on a transaction's native connection. It must not end the
// transaction (no COMMIT, ROLLBACK, or RELEASE of a savepoint it did not
// open) and must not call the engine; a non-OK status fails the transaction
// it ran in. Use the connection's plain blocking calls (sqlite3_exec,
// sqlite3_prepare_v2; PQexec, PQexecParams).
using NativeWrite = std::function<absl::Status(const NativeConnection&)>;

}  // namespace sluice

#endif  // SLUICE_NATIVE_CONNECTION_H_
