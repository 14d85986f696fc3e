// The SQLite backend: the embedded default.
//
// One database file in WAL mode; several processes on one machine may share
// it. Every transaction is BEGIN IMMEDIATE, so it holds SQLite's write lock
// from its start: transactions are serializable and row locks (LockMode) are
// implied. Within a process, transactions queue on a mutex; across
// processes, on SQLite's busy timeout. The backend creates its schema on
// first open and records the schema version in `PRAGMA user_version`.
// docs/decisions/0010-sqlite-backend.md explains the layout and the tuning.
//
// Thread-safety: safe for concurrent use; a Transaction belongs to the thread
// that began it, and Begin() on a thread that holds one fails with
// kFailedPrecondition.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_BACKEND_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/sqlite.h"

namespace sluice {

struct SqliteOptions {
  // How long a transaction waits for another process's write lock before
  // failing with kUnavailable.
  absl::Duration busy_timeout = absl::Seconds(10);
  // synchronous=FULL makes every commit durable against power loss; the
  // default (NORMAL) is durable against process crashes.
  bool synchronous_full = false;
  // How many pages (4 KiB each) the WAL file collects before the commit
  // that crosses the mark copies them into the database file (a
  // checkpoint). Larger means fewer pauses and a larger -wal file; SQLite's
  // own default is 1,000. 0 disables automatic checkpoints.
  int checkpoint_pages = 10'000;
  // The most pages (4 KiB each) the database file may hold. A transaction
  // that would grow it past them fails with kResourceExhausted and changes
  // nothing, as on a full disk. 0: SQLite's own limit (about 4 billion
  // pages).
  int64_t max_pages = 0;
};

// What a `sqlite:` backend URL names: the file, and options after a `?`
// as key=value pairs joined by `&`. The one option is
// synchronous=normal|full (SqliteOptions::synchronous_full; any case).
struct SqliteUrl {
  std::string path;
  SqliteOptions options;
};
// Parses the part of a URL after "sqlite:". kInvalidArgument naming the
// problem for an empty path, an unknown option, or an unknown value.
absl::StatusOr<SqliteUrl> ParseSqliteUrl(std::string_view rest);

class SqliteBackend : public Backend {
 public:
  // The schema version this build creates and expects.
  static constexpr int kSchemaVersion = 10;

  // Opens (creating if needed) the database at `path`. Fails with
  // kFailedPrecondition, naming the file and changing nothing, if it is not
  // an SQLite database, is read-only to this process, holds a newer schema
  // than this build or another application's tables, or lacks tables or
  // indexes of this build's schema.
  static absl::StatusOr<std::unique_ptr<SqliteBackend>> Open(
      const std::string& path, SqliteOptions options = {});
  // A backend on a host's own connection, for enqueuing in the host's
  // transaction (sluice/sqlite.h, BorrowSqlite, says how to use it).
  // kInvalidArgument for a null `db`; kFailedPrecondition, changing
  // nothing, if `db` has no open transaction or its database lacks this
  // build's schema.
  static absl::StatusOr<std::unique_ptr<SqliteBackend>> Borrow(sqlite3* db);
  ~SqliteBackend() override;

  std::string_view name() const override { return "sqlite"; }
  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override;

  struct Connection;

 private:
  explicit SqliteBackend(std::unique_ptr<Connection> connection);
  std::unique_ptr<Connection> connection_;
};

}  // namespace sluice

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_BACKEND_H_
