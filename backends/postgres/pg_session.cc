#include "pg_session.h"

#include <charconv>

#include "sluice/internal/status_macros.h"

namespace sluice::postgres_internal {

absl::StatusOr<Session> Session::Open(const std::string& url,
                                      const PostgresOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(ConnectionHandle connection, Connect(url, options));
  return Session(std::move(connection));
}

namespace {

bool Succeeded(const Result& result) {
  const ExecStatusType status = PQresultStatus(result.get());
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

}  // namespace

absl::Status Execute(PGconn* connection, std::string_view sql,
                     std::string_view what) {
  Result result(PQexec(connection, std::string(sql).c_str()));
  if (Succeeded(result)) return absl::OkStatus();
  return StatusFromResult(result.get(), connection, {std::string(what), {}});
}

absl::StatusOr<Result> Query(PGconn* connection, std::string_view sql,
                             const std::vector<std::string>& params,
                             std::string_view what) {
  std::vector<const char*> values;
  for (const std::string& param : params) values.push_back(param.c_str());
  Result result(PQexecParams(connection, std::string(sql).c_str(),
                             static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0));
  if (Succeeded(result)) return result;
  return StatusFromResult(result.get(), connection, {std::string(what), {}});
}

absl::StatusOr<std::string> Session::QueryText(
    std::string_view sql, const std::vector<std::string>& params,
    std::string_view what) {
  SLUICE_ASSIGN_OR_RETURN(Result result, Query(sql, params, what));
  if (result.rows() == 0 || PQgetisnull(result.get(), 0, 0)) return "";
  return std::string(PQgetvalue(result.get(), 0, 0));
}

absl::StatusOr<int> InstalledSchemaVersion(Session& session) {
  SLUICE_ASSIGN_OR_RETURN(
      std::string exists,
      session.QueryText(
          "SELECT to_regclass('sluice.schema_migrations') IS NOT NULL", {},
          "read schema version"));
  if (exists != "t") return 0;
  SLUICE_ASSIGN_OR_RETURN(
      std::string version,
      session.QueryText(
          "SELECT coalesce(max(version), 0) FROM sluice.schema_migrations", {},
          "read schema version"));
  int value = 0;
  std::from_chars(version.data(), version.data() + version.size(), value);
  return value;
}

}  // namespace sluice::postgres_internal
