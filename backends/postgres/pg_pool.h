// The backend's transaction connections: at most `size` open at once,
// opened lazily, reused while healthy. A connection the server closed
// (restart, pg_terminate_backend) is noticed when it is next taken, or when
// a statement fails on it, and is replaced: the next Begin() reconnects.
//
// Waiters are served first come, first served: a released connection (or
// the slot of a closed one) goes to the longest waiter, not to whichever
// thread takes the mutex next, so a caller's wait is bounded by the
// callers ahead of it (an absl::Mutex lets an arriving thread pass those
// already waiting).
//
// Thread-safe.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_POOL_H_
#define SLUICE_BACKENDS_POSTGRES_PG_POOL_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "sluice/postgres.h"

namespace sluice::postgres_internal {

// Where a transaction takes its connection from and gives it back to: the
// pool, or a host's borrowed connection (pg_borrowed.h).
class ConnectionSource {
 public:
  virtual ~ConnectionSource() = default;
  virtual absl::StatusOr<std::unique_ptr<Connection>> Acquire() = 0;
  virtual void Release(std::unique_ptr<Connection> connection) = 0;
  // Whether transactions are savepoints in the host's transaction.
  virtual bool borrowed() const { return false; }
};

class ConnectionPool final : public ConnectionSource {
 public:
  ConnectionPool(std::string url, const PostgresOptions& options)
      : url_(std::move(url)),
        options_(options),
        size_(options.pool_size < 1 ? 1 : options.pool_size),
        acquire_timeout_(options.acquire_timeout) {}

  // A healthy connection with nothing pending: an idle one, or a new one
  // while fewer than `size` are open. Waits up to the acquire timeout for
  // one to be released; kUnavailable after that or if connecting fails.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire() override;
  // Takes a connection back; a broken one is closed instead.
  void Release(std::unique_ptr<Connection> connection) override;

  // Callers waiting in Acquire now.
  int waiting() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A caller waiting in Acquire: handed a connection, or leave to open one
  // in a slot another gave up.
  struct Waiter {
    std::unique_ptr<Connection> connection;
    bool served = false;
  };

  // Takes an idle connection or a free slot (nullptr: open one), or waits
  // its turn for either.
  absl::StatusOr<std::unique_ptr<Connection>> Take();
  // A connection's slot is free again (it was closed, or never opened):
  // the longest waiter may open one in it.
  void FreeSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string url_;
  const PostgresOptions options_;
  const int size_;
  const absl::Duration acquire_timeout_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;                 // idle plus taken
  std::deque<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_POOL_H_
