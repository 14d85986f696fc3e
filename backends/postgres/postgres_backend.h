// The Postgres + pgmq backend (sluice/postgres.h is its public face).
//
// Transactions run on pooled libpq connections in pipeline mode, at READ
// COMMITTED, with row locks in the order docs/decisions/0011 sets out;
// messages live in pgmq's queue tables. WatchQueue() wakes workers through
// LISTEN/NOTIFY on a connection of its own (pg_listener.h).
//
// Thread-safety: safe for concurrent use; a Transaction belongs to the
// thread that began it.
#ifndef SLUICE_BACKENDS_POSTGRES_POSTGRES_BACKEND_H_
#define SLUICE_BACKENDS_POSTGRES_POSTGRES_BACKEND_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pg_listener.h"
#include "pg_pool.h"
#include "pg_transaction.h"
#include "sluice/backend.h"
#include "sluice/postgres.h"

namespace sluice {

class PostgresBackend : public Backend {
 public:
  // Checks the schema version, then returns a backend whose connections
  // open lazily. See OpenPostgres().
  static absl::StatusOr<std::unique_ptr<PostgresBackend>> Open(
      const std::string& url, const PostgresOptions& options);
  ~PostgresBackend() override;

  std::string_view name() const override { return "postgres"; }
  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override;
  std::unique_ptr<QueueWatch> WatchQueue(std::string_view queue,
                                         std::function<void()> poke) override;

 private:
  PostgresBackend(const std::string& url, const PostgresOptions& options);

  postgres_internal::ConnectionPool pool_;
  postgres_internal::OpenTransactions open_transactions_;
  postgres_internal::QueueListener listener_;
};

}  // namespace sluice

#endif  // SLUICE_BACKENDS_POSTGRES_POSTGRES_BACKEND_H_
