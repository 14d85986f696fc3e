// A plain (not pipelined) libpq session for one-off administrative work:
// migrations, schema checks, the version check at open.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pg_connection.h"

namespace sluice::postgres_internal {

class Session {
 public:
  // kUnavailable if the server can't be reached.
  static absl::StatusOr<Session> Open(const std::string& url);

  // Runs `sql`, which may hold several statements (no parameters).
  absl::Status Execute(std::string_view sql, std::string_view what);
  // Runs one statement with text parameters.
  absl::StatusOr<Result> Query(std::string_view sql,
                               const std::vector<std::string>& params,
                               std::string_view what);
  // The first column of the first row, as text ("" for none or NULL).
  absl::StatusOr<std::string> QueryText(std::string_view sql,
                                        const std::vector<std::string>& params,
                                        std::string_view what);
  PGconn* get() { return connection_.get(); }

 private:
  explicit Session(PGconn* connection) : connection_(connection, &PQfinish) {}
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection_;
};

// The installed schema version: 0 when sluice.schema_migrations is missing.
absl::StatusOr<int> InstalledSchemaVersion(Session& session);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SESSION_H_
