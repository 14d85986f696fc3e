// The one SQLite connection a SqliteBackend owns.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_CONNECTION_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_CONNECTION_H_

#include <sqlite3.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sqlite_backend.h"
#include "sqlite_statement.h"
#include "sqlite_tables.h"

namespace sluice {

// The connection is opened in SQLite's multi-thread mode (no SQLite mutex),
// so `mu` is the only thing keeping two threads off it: a transaction holds
// `mu` from Begin() until it commits or is dropped. That also makes
// in-process transactions queue here rather than in SQLite's busy handler.
// `owner` names the thread holding `mu`, so a second Begin() on that thread
// fails instead of waiting for itself forever.
struct SqliteBackend::Connection {
  // Closes the database unless it is a host's borrowed connection.
  struct CloseDatabase {
    bool close = true;
    void operator()(sqlite3* db) const {
      if (close) sqlite3_close_v2(db);
    }
  };

  // With `borrowed`, `handle` is a host's connection (SqliteBackend::Borrow):
  // it is never closed, and transactions are savepoints inside the host's
  // own transaction.
  Connection(sqlite3* handle, absl::Duration busy_timeout,
             bool borrowed = false)
      : db(handle, CloseDatabase{!borrowed}),
        busy_timeout(busy_timeout),
        borrowed(borrowed),
        statements(handle) {}

  // Declared first, so it is closed after every statement is finalized.
  const std::unique_ptr<sqlite3, CloseDatabase> db;
  // How long Begin() waits for another process's write lock (read by the
  // busy handler, which runs on the thread holding `mu`).
  const absl::Duration busy_timeout;
  // A host's connection: Begin() opens a savepoint in the host's open
  // transaction and Commit() releases it, leaving the host to commit.
  const bool borrowed;
  absl::Mutex mu;
  // The thread whose transaction holds `mu`; no thread while none does.
  // Only that thread writes it (set after locking, cleared before
  // unlocking), so a thread reading its own id here knows it holds `mu`.
  std::atomic<std::thread::id> owner;
  sqlite_internal::StatementCache statements ABSL_GUARDED_BY(mu);
  // Not kept for a borrowed connection: its host may roll back what a
  // transaction released.
  sqlite_internal::KnownRunSeqs known_seqs ABSL_GUARDED_BY(mu);
};

}  // namespace sluice

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_CONNECTION_H_
