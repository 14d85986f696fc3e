// Plain (not pipelined) libpq statements, for one-off work: migrations,
// schema checks, the version check at open, the listener's LISTEN, session
// setup, and the tests' and benchmarks' own connections. Execute() and
// Query() are the one place that runs PQexec/PQexecParams and turns their
// results into statuses (pg_status.h); the pipelined transactions are
// pg_connection.h's.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_connect.h"
#include "pg_connection.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {

// Runs `sql`, which may hold several statements (no parameters), on
// `connection`, which must not be in pipeline mode. `what` names it in an
// error.
absl::Status Execute(PGconn* connection, std::string_view sql,
                     std::string_view what);
// Runs one statement with text parameters ($1, $2, ...) on `connection`.
absl::StatusOr<Result> Query(PGconn* connection, std::string_view sql,
                             const std::vector<std::string>& params,
                             std::string_view what);

// A connection for plain statements.
class Session {
 public:
  // Connects with `options`' connect timeout and keepalives (pg_connect.h);
  // kUnavailable if the server can't be reached or doesn't answer in time.
  static absl::StatusOr<Session> Open(const std::string& url,
                                      const PostgresOptions& options = {});

  absl::Status Execute(std::string_view sql, std::string_view what) {
    return postgres_internal::Execute(get(), sql, what);
  }
  absl::StatusOr<Result> Query(std::string_view sql,
                               const std::vector<std::string>& params,
                               std::string_view what) {
    return postgres_internal::Query(get(), sql, params, what);
  }
  // The first column of the first row, as text ("" for none or NULL).
  absl::StatusOr<std::string> QueryText(std::string_view sql,
                                        const std::vector<std::string>& params,
                                        std::string_view what);
  PGconn* get() const { return connection_.get(); }

 private:
  explicit Session(ConnectionHandle connection)
      : connection_(std::move(connection)) {}
  ConnectionHandle connection_;
};

// The installed schema version: 0 when sluice.schema_migrations is missing.
absl::StatusOr<int> InstalledSchemaVersion(Session& session);
// MigratePostgres() up to `version` only (tests of upgrades from an older
// schema). kInvalidArgument outside 0..latest.
absl::Status MigratePostgresTo(const std::string& url, int version);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_
