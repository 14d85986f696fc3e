#include "memory_backend.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "sluice/redact_url.h"
#include "sqlite_backend.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> OpenBackend(std::string_view url) {
  if (url == "memory:" || url == "memory") {
    return std::unique_ptr<Backend>(std::make_unique<MemoryBackend>());
  }
  if (url.starts_with("sqlite:")) {
    absl::StatusOr<SqliteUrl> parsed = ParseSqliteUrl(url.substr(7));
    if (!parsed.ok()) return parsed.status();
    absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
        SqliteBackend::Open(parsed->path, parsed->options);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<Backend>(std::move(*backend));
  }
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    return OpenPostgres(std::string(url));
  }
  return absl::InvalidArgumentError(StrCat(
      "backend URL \"", RedactUrl(url),
      "\" is not recognized; use memory:, sqlite:PATH or postgres://..."));
}

}  // namespace sluice
