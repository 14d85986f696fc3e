#include "pg_pool.h"

#include <utility>

#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

absl::StatusOr<std::unique_ptr<Connection>> ConnectionPool::Acquire() {
  while (true) {
    std::unique_ptr<Connection> connection;
    {
      absl::MutexLock lock(&mu_);
      auto available = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !idle_.empty() || open_ < size_;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&available),
                                acquire_timeout_)) {
        return absl::UnavailableError(StrCat(
            "postgres: all ", size_, " pool connections stayed busy for ",
            absl::FormatDuration(acquire_timeout_),
            "; raise PostgresOptions::pool_size or retry later"));
      }
      if (idle_.empty()) {
        ++open_;
      } else {
        connection = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (connection == nullptr) {
      absl::StatusOr<std::unique_ptr<Connection>> opened =
          Connection::Open(url_, options_);
      if (!opened.ok()) {
        absl::MutexLock lock(&mu_);
        --open_;
      }
      return opened;
    }
    if (connection->CheckAlive()) return connection;
    // Gone while idle: close it and take another (or a new one).
    connection.reset();
    absl::MutexLock lock(&mu_);
    --open_;
  }
}

void ConnectionPool::Release(std::unique_ptr<Connection> connection) {
  const bool keep = !connection->broken();
  if (!keep) connection.reset();
  absl::MutexLock lock(&mu_);
  if (keep) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
}

}  // namespace sluice::postgres_internal
