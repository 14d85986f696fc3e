// The Postgres + pgmq backend: production storage that many worker processes
// on many machines share.
//
// A database is prepared once, by a role allowed to create schemas, with
// MigratePostgres() (the `sluice migrate URL` command): it installs the
// `sluice` schema, pgmq's tables and functions when no `pgmq` schema exists
// yet, and a NOLOGIN group role `sluice_runtime` that holds exactly what
// workers need. Hosts then connect as a login role that is a member of it:
//
//   CREATE ROLE app_worker LOGIN PASSWORD '...';
//   GRANT sluice_runtime TO app_worker;
//
//   absl::Status migrated = sluice::MigratePostgres(admin_url);
//   absl::StatusOr<std::unique_ptr<sluice::Backend>> backend =
//       sluice::OpenPostgres("postgresql://app_worker@db/app",
//                            {.pool_size = 16});
//
// OpenPostgres() refuses a database whose schema is missing or older than
// this build (kFailedPrecondition, naming both versions); it never migrates
// by itself, so a worker never needs DDL rights.
//
// Thread-safety: the Backend is safe for concurrent use; these free
// functions may run concurrently, from several processes too (migrations
// serialize on an advisory lock).
#ifndef SLUICE_POSTGRES_H_
#define SLUICE_POSTGRES_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"

// libpq's connection (libpq-fe.h).
typedef struct pg_conn PGconn;

namespace sluice {

struct PostgresOptions {
  // The most connections open at once for transactions; Begin() waits for a
  // free one. Size it to the host's worker concurrency plus a few. The queue
  // listener (WatchQueue) uses one more connection of its own.
  int pool_size = 8;
  // How long Begin() waits for a free connection before kUnavailable.
  absl::Duration acquire_timeout = absl::Seconds(30);

  // Connections. A setting the URL makes itself (libpq's connect_timeout,
  // keepalives, keepalives_idle, keepalives_interval, keepalives_count, or
  // statement_timeout through `options=-c statement_timeout=...`) wins
  // over these. docs/operations.md, "Connections", lists them all.

  // How long one connection attempt waits for the server to answer before
  // kUnavailable, so that a server that accepts and never answers can't
  // hang OpenPostgres() or Begin(). Applies to every address tried. Zero or
  // infinite: wait forever (libpq's own default). PGCONNECT_TIMEOUT, when
  // set, wins over this too.
  absl::Duration connect_timeout = absl::Seconds(10);
  // TCP keepalives, so a connection whose server vanished (a host down, a
  // cable pulled) fails in about idle + interval * count instead of hanging
  // in a read; no effect on Unix sockets. Whole seconds, at least 1.
  bool tcp_keepalives = true;
  absl::Duration keepalives_idle = absl::Seconds(30);
  absl::Duration keepalives_interval = absl::Seconds(10);
  int keepalives_count = 3;
  // The longest one statement of a backend transaction may run before the
  // server cancels it (kDeadlineExceeded). Zero: off (the server's
  // setting applies). Not applied to migrations and schema checks.
  absl::Duration statement_timeout = absl::ZeroDuration();
};

// Opens the backend at a libpq URL (postgres://... or postgresql://...).
// Connections are made lazily; this one checks the schema version.
// kFailedPrecondition if the database is not migrated to this build's
// version; kUnavailable if the server can't be reached or doesn't answer
// within the connect timeout (retry later). Failures that retrying can't
// fix: kInvalidArgument for a malformed URL or a bad option in it,
// kPermissionDenied for a wrong password, an unknown role or no
// pg_hba.conf entry, kNotFound for a database that does not exist.
// No error message shows the URL's password.
absl::StatusOr<std::unique_ptr<Backend>> OpenPostgres(
    const std::string& url, const PostgresOptions& options = {});

// Applies every migration the database lacks, in order, one transaction
// each, recording them in sluice.schema_migrations. Idempotent; concurrent
// callers wait for each other. Needs a role that may create schemas, roles
// and functions (the database owner or a superuser).
absl::Status MigratePostgres(const std::string& url);

// What CheckPostgresSchema() found. Names are schema-qualified
// ("sluice.runs", "sluice.create_queue(text)"); a missing privilege reads
// "sluice_runtime: UPDATE on sluice.runs".
struct SchemaReport {
  int installed_version = 0;  // 0: never migrated
  int latest_version = 0;     // what this build installs
  std::vector<std::string> missing_tables;
  std::vector<std::string> missing_functions;
  std::vector<std::string> missing_privileges;

  bool ok() const {
    return installed_version == latest_version && missing_tables.empty() &&
           missing_functions.empty() && missing_privileges.empty();
  }
  // One line per finding, for operators.
  std::string ToString() const;
};

// Inspects the database without changing it.
absl::StatusOr<SchemaReport> CheckPostgresSchema(const std::string& url);

// The schema version this build installs and requires.
int LatestPostgresSchemaVersion();

// --- Transactional enqueue ---------------------------------------------------

// A Backend on the host's own libpq connection, for starting runs in the
// host's transaction (sluice/host_transaction.h):
//
//   PQexec(conn, "BEGIN");
//   ... the host's own statements ...
//   auto borrowed = sluice::BorrowPostgres(conn);
//   engine->WithHostTransaction(**borrowed).Enqueue("send_invoice", payload);
//   PQexec(conn, "COMMIT");  // the run exists, its workers are notified
//
// Its Begin() opens a SAVEPOINT in the host's open transaction and its
// Commit() releases it: nothing Sluice writes through it is visible to
// anyone else until the host commits, and a host rollback removes it all,
// the queue's NOTIFY included. A call of Sluice's that fails rolls back to
// its savepoint, leaving the host's transaction usable.
//
// kInvalidArgument for a null `connection`. kFailedPrecondition, changing
// nothing, if it is not open, is in pipeline mode, has no open transaction
// (or an aborted one), does not use client_encoding UTF8, or its database
// lacks this build's Sluice schema (run MigratePostgres). Begin() checks
// the connection again each time. While a transaction of Sluice's runs it
// sets TimeZone, DateStyle and IntervalStyle locally and puts the host's
// values back after; its statements are not prepared, so nothing stays in
// the host's session. The role needs sluice_runtime's rights.
//
// Use the borrowed backend on the thread that owns `connection`, and
// destroy it before closing `connection`.
absl::StatusOr<std::unique_ptr<Backend>> BorrowPostgres(PGconn* connection);

// The `PGconn*` a completion write runs on (TaskContext::WriteOnCompletion);
// null unless `connection` is a Postgres backend's. The write runs in the
// completion's transaction, outside pipeline mode: use PQexec/PQexecParams.
PGconn* PostgresHandle(const NativeConnection& connection);

}  // namespace sluice

#endif  // SLUICE_POSTGRES_H_
