#include "postgres_backend.h"

#include <utility>

#include "pg_session.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

// kFailedPrecondition unless the database has exactly this build's schema.
absl::Status CheckSchemaVersion(const std::string& url,
                                const PostgresOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(postgres_internal::Session session,
                          postgres_internal::Session::Open(url, options));
  SLUICE_ASSIGN_OR_RETURN(int installed,
                          postgres_internal::InstalledSchemaVersion(session));
  const int latest = LatestPostgresSchemaVersion();
  if (installed == latest) return absl::OkStatus();
  if (installed == 0) {
    return absl::FailedPreconditionError(StrCat(
        "the postgres database has no Sluice schema (version 0; this build "
        "needs version ",
        latest,
        "); run `sluice migrate` (MigratePostgres) with the database "
        "owner's URL first"));
  }
  if (installed < latest) {
    return absl::FailedPreconditionError(StrCat(
        "the postgres database has Sluice schema version ", installed,
        ", older than version ", latest,
        " that this build needs; run `sluice migrate` (MigratePostgres) with "
        "the database owner's URL"));
  }
  return absl::FailedPreconditionError(
      StrCat("the postgres database has Sluice schema version ", installed,
             ", newer than version ", latest,
             " that this build supports; upgrade this host's Sluice"));
}

}  // namespace

PostgresBackend::PostgresBackend(const std::string& url,
                                 const PostgresOptions& options)
    : pool_(url, options), listener_(url, options) {}

PostgresBackend::~PostgresBackend() = default;

absl::StatusOr<std::unique_ptr<PostgresBackend>> PostgresBackend::Open(
    const std::string& url, const PostgresOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckSchemaVersion(url, options));
  return std::unique_ptr<PostgresBackend>(new PostgresBackend(url, options));
}

absl::StatusOr<std::unique_ptr<Transaction>> PostgresBackend::Begin() {
  return postgres_internal::PostgresTransaction::Begin(pool_,
                                                       open_transactions_);
}

std::unique_ptr<QueueWatch> PostgresBackend::WatchQueue(
    std::string_view queue, std::function<void()> poke) {
  return listener_.Watch(queue, std::move(poke));
}

absl::StatusOr<std::unique_ptr<Backend>> OpenPostgres(
    const std::string& url, const PostgresOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<PostgresBackend> backend,
                          PostgresBackend::Open(url, options));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace sluice
