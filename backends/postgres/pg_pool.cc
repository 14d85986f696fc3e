#include "pg_pool.h"

#include <algorithm>
#include <utility>

#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

absl::StatusOr<std::unique_ptr<Connection>> ConnectionPool::Take() {
  absl::MutexLock lock(&mu_);
  // Only when nobody waits: an arrival does not pass those in the queue.
  if (waiters_.empty()) {
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
    if (open_ < size_) {
      ++open_;
      return nullptr;
    }
  }
  Waiter waiter;
  waiters_.push_back(&waiter);
  if (!mu_.AwaitWithTimeout(absl::Condition(&waiter.served),
                            acquire_timeout_)) {
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &waiter));
    return absl::UnavailableError(
        StrCat("postgres: all ", size_, " pool connections stayed busy for ",
               absl::FormatDuration(acquire_timeout_),
               "; raise PostgresOptions::pool_size or retry later"));
  }
  // A slot handed over keeps open_ as it was: it counts this caller's.
  return std::move(waiter.connection);
}

absl::StatusOr<std::unique_ptr<Connection>> ConnectionPool::Acquire() {
  while (true) {
    absl::StatusOr<std::unique_ptr<Connection>> taken = Take();
    if (!taken.ok()) return taken.status();
    std::unique_ptr<Connection> connection = *std::move(taken);
    if (connection == nullptr) {
      absl::StatusOr<std::unique_ptr<Connection>> opened =
          Connection::Open(url_, options_);
      if (!opened.ok()) {
        absl::MutexLock lock(&mu_);
        FreeSlot();
      }
      return opened;
    }
    if (connection->CheckAlive()) return connection;
    // Gone while idle: close it and take another (or a new one).
    connection.reset();
    absl::MutexLock lock(&mu_);
    FreeSlot();
  }
}

int ConnectionPool::waiting() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

void ConnectionPool::FreeSlot() {
  if (waiters_.empty()) {
    --open_;
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->served = true;
}

void ConnectionPool::Release(std::unique_ptr<Connection> connection) {
  const bool keep = !connection->broken();
  if (!keep) connection.reset();
  absl::MutexLock lock(&mu_);
  if (!keep) return FreeSlot();
  if (waiters_.empty()) {
    idle_.push_back(std::move(connection));
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->connection = std::move(connection);
  next->served = true;
}

}  // namespace sluice::postgres_internal
