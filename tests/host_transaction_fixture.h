// What the host-transaction tests share: a host database with its own table
// (`orders`) beside Sluice's schema, on a real SQLite file or a real Postgres
// database, reached three ways: the host's own connection (which the tests
// BEGIN and borrow), an observer connection that sees only committed rows,
// and the engine's own backend.
#ifndef SLUICE_TESTS_HOST_TRANSACTION_FIXTURE_H_
#define SLUICE_TESTS_HOST_TRANSACTION_FIXTURE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/host_transaction.h"
#include "sluice/job.h"

namespace sluice::testing {

// One database and one host connection to it.
class HostDatabase {
 public:
  virtual ~HostDatabase() = default;

  // "sqlite" or "postgres".
  virtual std::string_view kind() const = 0;
  // The engine's own backend on the database.
  virtual Backend& backend() = 0;
  // Runs `sql` on the host's connection.
  virtual absl::Status Exec(std::string_view sql) = 0;
  // Rows of `table` as an observer sees them (committed only).
  virtual int64_t CommittedRows(std::string_view table) = 0;
  // The name of Sluice's table `name` ("runs", "outbox"), schema-qualified
  // where needed, and of a queue's live or archived messages table.
  virtual std::string SluiceTable(std::string_view name) const = 0;
  virtual std::string MessagesTable(std::string_view queue,
                                    bool archived) const = 0;
  // Borrows the host's connection (BorrowSqlite / BorrowPostgres).
  virtual absl::StatusOr<std::unique_ptr<Backend>> Borrow() = 0;
  // Borrows a null connection.
  virtual absl::StatusOr<std::unique_ptr<Backend>> BorrowNull() = 0;
  // A completion write that inserts `id` into `orders` on the native
  // connection it is given.
  virtual NativeWrite InsertOrder(std::string id) = 0;
  // A completion write whose statement fails (a table that doesn't exist).
  virtual NativeWrite FailingWrite() = 0;
  // A database of the same kind without Sluice's schema, and a borrow of a
  // connection to it with a transaction open.
  virtual absl::StatusOr<std::unique_ptr<Backend>> BorrowWithoutSchema() = 0;
  // The arguments a child process needs to reach the database (see
  // RunHostChild in host_transaction_crash_test.cc).
  virtual std::string location() const = 0;
  // "BEGIN IMMEDIATE" or "BEGIN".
  virtual std::string_view begin_sql() const = 0;
};

// "sqlite" or "postgres"; nullptr (with the skip reason in `skip`) when the
// database can't be had (Postgres without SLUICE_TEST_POSTGRES_URL).
std::unique_ptr<HostDatabase> MakeHostDatabase(std::string_view kind,
                                               std::string* skip);

// A host's connection to the database at `location` (as location() gave),
// for a child process.
std::unique_ptr<HostDatabase> ConnectHostDatabase(std::string_view kind,
                                                  const std::string& location);

// The payload every test enqueues: {"order": id}.
Json Order(std::string_view id);

// Begins a transaction on `db`'s host connection, borrows the connection
// into `borrowed` (which must outlive the result) and returns the engine's
// handle on that transaction.
absl::StatusOr<HostTransaction> BeginHostTransaction(
    HostDatabase& db, Engine& engine, std::unique_ptr<Backend>& borrowed);

// The job every test enqueues: it copies its payload's "order" into its
// output; `write_order` makes it also insert that order with its completion.
Job OrderJob(bool write_order, HostDatabase* db);

// Engine, database and job for one backend kind (the test's parameter).
class HostTransactionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // What the engine's backend holds, for "nothing changed" checks.
  struct Totals {
    int64_t runs = 0;
    int64_t messages = 0;  // live and archived, of the job's queue
    int64_t reports = 0;
    int64_t orders = 0;
    bool operator==(const Totals&) const = default;
  };
  Totals Snapshot();
  // Waits until the run ended (true) or `timeout` passed.
  bool AwaitRunEnded(const RunId& run, absl::Duration timeout);
  // BeginHostTransaction on this test's database and engine.
  absl::StatusOr<HostTransaction> BeginHost();

  std::unique_ptr<HostDatabase> db_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Backend> borrowed_;  // BeginHost's
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_HOST_TRANSACTION_FIXTURE_H_
