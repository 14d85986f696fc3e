// A backend on a host's own libpq connection (BorrowPostgres in
// sluice/postgres.h): its transactions are savepoints in the host's open
// transaction.
//
// While one of its transactions runs, the connection is in pipeline mode and
// its session reads times as Sluice does (TimeZone UTC, ISO dates), set with
// set_config(..., is_local) and put back as the host had them when the
// transaction ends. Statements are sent unprepared, so nothing stays in the
// host's session.
//
// Not thread-safe: used by the thread that owns the host's connection.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_BORROWED_H_
#define SLUICE_BACKENDS_POSTGRES_PG_BORROWED_H_

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pg_pool.h"
#include "pg_transaction.h"
#include "sluice/backend.h"

namespace sluice::postgres_internal {

// The host's connection as the one connection of a source.
class BorrowedConnection final : public ConnectionSource {
 public:
  explicit BorrowedConnection(PGconn* connection)
      : connection_(Connection::Borrow(connection)) {}

  // kFailedPrecondition if the host's connection is not idle in an open
  // transaction, or a transaction of Sluice's holds it already.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire() override;
  void Release(std::unique_ptr<Connection> connection) override;
  bool borrowed() const override { return true; }

 private:
  std::unique_ptr<Connection> connection_;   // null while a transaction runs
  std::vector<std::string> saved_settings_;  // the host's, to put back
};

class BorrowedPostgresBackend final : public Backend {
 public:
  explicit BorrowedPostgresBackend(PGconn* connection)
      : connection_(connection) {}

  std::string_view name() const override { return "postgres"; }
  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override {
    return PostgresTransaction::Begin(connection_, open_transactions_);
  }

 private:
  BorrowedConnection connection_;
  OpenTransactions open_transactions_;
};

// Why the host's connection can't hold a transaction of Sluice's now (not
// open, in pipeline mode, no transaction open, an aborted or busy one);
// OK if it can.
absl::Status CheckHostConnection(PGconn* connection);

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_BORROWED_H_
