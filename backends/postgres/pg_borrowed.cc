#include "pg_borrowed.h"

#include <utility>

#include "pg_session.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {
namespace {

// The session settings Sluice's statements rely on (pg_connection.cc sets
// them for its own connections), with the values they need.
struct Setting {
  const char* name;
  const char* value;
};
constexpr Setting kSettings[] = {
    {"TimeZone", "UTC"},
    {"DateStyle", "ISO, YMD"},
    {"IntervalStyle", "postgres"},
};

// set_config(name, value, is_local) for each setting, as one SELECT.
absl::Status SetLocal(PGconn* connection,
                      const std::vector<std::string>& values,
                      std::string_view what) {
  std::string sql = "SELECT ";
  std::vector<std::string> params;
  for (size_t i = 0; i < std::size(kSettings); ++i) {
    if (i > 0) StrAppend(&sql, ", ");
    StrAppend(&sql, "set_config($", 2 * i + 1, ", $", 2 * i + 2, ", true)");
    params.push_back(kSettings[i].name);
    params.push_back(values[i]);
  }
  return Query(connection, sql, params, what).status();
}

// The name of the schema version Sluice needs, or why the database lacks it.
// Reads only, and never fails a statement: a failed statement would abort
// the host's transaction.
absl::Status CheckSchemaVersion(PGconn* connection) {
  SLUICE_ASSIGN_OR_RETURN(
      Result exists,
      Query(connection,
            "SELECT to_regclass('sluice.schema_migrations') IS NOT NULL", {},
            "BorrowPostgres: read schema version"));
  int installed = 0;
  if (std::string_view(PQgetvalue(exists.get(), 0, 0)) == "t") {
    SLUICE_ASSIGN_OR_RETURN(
        Result version,
        Query(connection,
              "SELECT coalesce(max(version), 0) FROM sluice.schema_migrations",
              {}, "BorrowPostgres: read schema version"));
    installed = std::atoi(PQgetvalue(version.get(), 0, 0));
  }
  const int latest = LatestPostgresSchemaVersion();
  if (installed == latest) return absl::OkStatus();
  if (installed == 0) {
    return absl::FailedPreconditionError(StrCat(
        "BorrowPostgres: the database has no Sluice schema (this build needs "
        "version ",
        latest, "); run `sluice migrate` (MigratePostgres) first"));
  }
  return absl::FailedPreconditionError(
      StrCat("BorrowPostgres: the database has Sluice schema version ",
             installed, " but this build needs version ", latest,
             installed < latest ? "; run `sluice migrate` (MigratePostgres)"
                                : "; upgrade this host's Sluice"));
}

}  // namespace

absl::Status CheckHostConnection(PGconn* connection) {
  if (PQstatus(connection) != CONNECTION_OK) {
    return absl::FailedPreconditionError(
        "the host's postgres connection is not open (PQstatus is not "
        "CONNECTION_OK)");
  }
  if (PQpipelineStatus(connection) != PQ_PIPELINE_OFF) {
    return absl::FailedPreconditionError(
        "the host's postgres connection is in pipeline mode; leave it "
        "(PQexitPipelineMode) before enqueuing through it");
  }
  switch (PQtransactionStatus(connection)) {
    case PQTRANS_INTRANS:
      break;
    case PQTRANS_IDLE:
      return absl::FailedPreconditionError(
          "the host's postgres connection has no open transaction; run BEGIN "
          "on it first, so Sluice's writes commit with the host's");
    case PQTRANS_INERROR:
      return absl::FailedPreconditionError(
          "the host's postgres transaction has failed (a statement of it "
          "raised an error); roll it back");
    default:
      return absl::FailedPreconditionError(
          "the host's postgres connection is busy with a command; wait for "
          "its results first");
  }
  if (std::string_view(pg_encoding_to_char(PQclientEncoding(connection))) !=
      "UTF8") {
    return absl::FailedPreconditionError(
        "the host's postgres connection does not use client_encoding UTF8; "
        "set it (SET client_encoding = 'UTF8') before borrowing it");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Connection>> BorrowedConnection::Acquire() {
  if (connection_ == nullptr) {
    return absl::FailedPreconditionError(
        "a transaction of Sluice's already runs on the host's postgres "
        "connection");
  }
  PGconn* handle = connection_->handle();
  SLUICE_RETURN_IF_ERROR(CheckHostConnection(handle));
  SLUICE_ASSIGN_OR_RETURN(
      Result current,
      Query(handle,
            "SELECT current_setting('TimeZone'), current_setting('DateStyle'), "
            "current_setting('IntervalStyle')",
            {}, "Begin"));
  std::vector<std::string> saved;
  std::vector<std::string> wanted;
  for (size_t i = 0; i < std::size(kSettings); ++i) {
    saved.emplace_back(PQgetvalue(current.get(), 0, static_cast<int>(i)));
    wanted.emplace_back(kSettings[i].value);
  }
  SLUICE_RETURN_IF_ERROR(SetLocal(handle, wanted, "Begin"));
  saved_settings_ = std::move(saved);
  if (absl::Status entered = connection_->EnterPipeline(); !entered.ok()) {
    SetLocal(handle, saved_settings_, "Begin").IgnoreError();
    return entered;
  }
  return std::move(connection_);
}

void BorrowedConnection::Release(std::unique_ptr<Connection> connection) {
  // The transaction ended (released or rolled back to its savepoint), so
  // nothing is pending and the host's transaction is usable again.
  connection->ExitPipeline().IgnoreError();
  if (PQtransactionStatus(connection->handle()) == PQTRANS_INTRANS) {
    SetLocal(connection->handle(), saved_settings_, "Release").IgnoreError();
  }
  connection_ = std::move(connection);
}

}  // namespace sluice::postgres_internal

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> BorrowPostgres(PGconn* connection) {
  if (connection == nullptr) {
    return absl::InvalidArgumentError(
        "BorrowPostgres: the connection is null; pass the host's open PGconn* "
        "with a transaction begun on it");
  }
  if (absl::Status usable = postgres_internal::CheckHostConnection(connection);
      !usable.ok()) {
    return absl::Status(usable.code(),
                        StrCat("BorrowPostgres: ", usable.message()));
  }
  SLUICE_RETURN_IF_ERROR(postgres_internal::CheckSchemaVersion(connection));
  return std::unique_ptr<Backend>(
      new postgres_internal::BorrowedPostgresBackend(connection));
}

PGconn* PostgresHandle(const NativeConnection& connection) {
  if (connection.backend != "postgres") return nullptr;
  return static_cast<PGconn*>(connection.handle);
}

}  // namespace sluice
