#include "sqlite_backend.h"

// Placeholder until the SQLite backend lands.
namespace sluice {
struct SqliteBackend::Connection {};
SqliteBackend::SqliteBackend(std::unique_ptr<Connection> c)
    : connection_(std::move(c)) {}
SqliteBackend::~SqliteBackend() = default;
absl::StatusOr<std::unique_ptr<SqliteBackend>> SqliteBackend::Open(
    const std::string&, SqliteOptions) {
  return absl::UnimplementedError("SQLite backend not built yet");
}
absl::StatusOr<std::unique_ptr<Transaction>> SqliteBackend::Begin() {
  return absl::UnimplementedError("SQLite backend not built yet");
}
}  // namespace sluice
