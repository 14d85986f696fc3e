#include "host_transaction_fixture.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "sluice/internal/strings.h"
#include "sluice/postgres.h"
#include "sluice/sqlite.h"
#include "sqlite_backend.h"
#include "support/child_process.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

constexpr char kOrdersTable[] = "CREATE TABLE orders (id TEXT PRIMARY KEY)";

// --- SQLite ------------------------------------------------------------------

absl::Status SqliteExec(sqlite3* db, std::string_view sql) {
  char* error = nullptr;
  int result =
      sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &error);
  absl::Status status = absl::OkStatus();
  if (result != SQLITE_OK) {
    status = absl::InternalError(
        StrCat("sqlite: ", sql, ": ", error ? error : "error"));
  }
  sqlite3_free(error);
  return status;
}

sqlite3* SqliteConnect(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10'000);
  return db;
}

std::string TempPath(std::string_view stem) {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          StrCat("sluice_host_", stem, "_", getpid(), "_", counter++, ".db"))
      .string();
}

class SqliteHostDatabase final : public HostDatabase {
 public:
  SqliteHostDatabase(std::string path, bool owned, bool create_table)
      : path_(std::move(path)), owned_(owned) {
    absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
        SqliteBackend::Open(path_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (backend.ok()) backend_ = *std::move(backend);
    host_ = SqliteConnect(path_);
    observer_ = SqliteConnect(path_);
    if (create_table) {
      EXPECT_TRUE(Exec(kOrdersTable).ok());
    }
  }
  ~SqliteHostDatabase() override {
    sqlite3_close_v2(host_);
    sqlite3_close_v2(observer_);
    if (other_ != nullptr) sqlite3_close_v2(other_);
    backend_.reset();
    if (owned_) {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        std::filesystem::remove(path_ + suffix);
      }
      if (!other_path_.empty()) std::filesystem::remove(other_path_);
    }
  }

  std::string_view kind() const override { return "sqlite"; }
  Backend& backend() override { return *backend_; }
  absl::Status Exec(std::string_view sql) override {
    return SqliteExec(host_, sql);
  }
  int64_t CommittedRows(std::string_view table) override {
    sqlite3_stmt* statement = nullptr;
    std::string sql = StrCat("SELECT count(*) FROM ", table);
    EXPECT_EQ(
        sqlite3_prepare_v2(observer_, sql.c_str(), -1, &statement, nullptr),
        SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(observer_);
    int64_t count = -1;
    if (sqlite3_step(statement) == SQLITE_ROW) {
      count = sqlite3_column_int64(statement, 0);
    }
    sqlite3_finalize(statement);
    return count;
  }
  std::string SluiceTable(std::string_view name) const override {
    return std::string(name);
  }
  std::string MessagesTable(std::string_view queue,
                            bool archived) const override {
    return StrCat(archived ? "archived_messages" : "messages",
                  " WHERE queue_name = '", queue, "'");
  }
  absl::StatusOr<std::unique_ptr<Backend>> Borrow() override {
    return BorrowSqlite(host_);
  }
  absl::StatusOr<std::unique_ptr<Backend>> BorrowNull() override {
    return BorrowSqlite(nullptr);
  }
  NativeWrite InsertOrder(std::string id) override {
    return [id](const NativeConnection& connection) -> absl::Status {
      sqlite3* db = SqliteHandle(connection);
      if (db == nullptr) return absl::InternalError("not an sqlite connection");
      sqlite3_stmt* insert = nullptr;
      sqlite3_prepare_v2(db, "INSERT INTO orders (id) VALUES (?1)", -1, &insert,
                         nullptr);
      sqlite3_bind_text(insert, 1, id.c_str(), -1, SQLITE_TRANSIENT);
      int result = sqlite3_step(insert);
      sqlite3_finalize(insert);
      if (result != SQLITE_DONE) {
        return absl::AbortedError(StrCat("insert order: ", sqlite3_errmsg(db)));
      }
      return absl::OkStatus();
    };
  }
  NativeWrite FailingWrite() override {
    return [](const NativeConnection& connection) {
      return SqliteExec(SqliteHandle(connection),
                        "INSERT INTO no_such_table VALUES (1)");
    };
  }
  absl::StatusOr<std::unique_ptr<Backend>> BorrowWithoutSchema() override {
    other_path_ = TempPath("plain");
    other_ = SqliteConnect(other_path_);
    EXPECT_TRUE(SqliteExec(other_, kOrdersTable).ok());
    EXPECT_TRUE(SqliteExec(other_, "BEGIN IMMEDIATE").ok());
    return BorrowSqlite(other_);
  }
  std::string location() const override { return path_; }
  std::string_view begin_sql() const override { return "BEGIN IMMEDIATE"; }

 private:
  std::string path_;
  bool owned_;
  std::unique_ptr<SqliteBackend> backend_;
  sqlite3* host_ = nullptr;
  sqlite3* observer_ = nullptr;
  std::string other_path_;
  sqlite3* other_ = nullptr;
};

// --- Postgres ----------------------------------------------------------------

absl::Status PgExec(PGconn* connection, std::string_view sql) {
  PGresult* result = PQexec(connection, std::string(sql).c_str());
  ExecStatusType status = PQresultStatus(result);
  PQclear(result);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    return absl::OkStatus();
  }
  return absl::InternalError(
      StrCat("postgres: ", sql, ": ", PQerrorMessage(connection)));
}

class PostgresHostDatabase final : public HostDatabase {
 public:
  PostgresHostDatabase(std::unique_ptr<TestDatabase> database, std::string url,
                       bool create_table)
      : database_(std::move(database)), url_(std::move(url)) {
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (backend.ok()) backend_ = *std::move(backend);
    host_ = PQconnectdb(url_.c_str());
    observer_ = PQconnectdb(url_.c_str());
    EXPECT_EQ(PQstatus(host_), CONNECTION_OK) << PQerrorMessage(host_);
    if (create_table) {
      EXPECT_TRUE(Exec(kOrdersTable).ok());
    }
  }
  ~PostgresHostDatabase() override {
    backend_.reset();
    PQfinish(host_);
    PQfinish(observer_);
    if (other_ != nullptr) PQfinish(other_);
  }

  std::string_view kind() const override { return "postgres"; }
  Backend& backend() override { return *backend_; }
  absl::Status Exec(std::string_view sql) override {
    return PgExec(host_, sql);
  }
  int64_t CommittedRows(std::string_view table) override {
    std::string sql = StrCat("SELECT count(*) FROM ", table);
    PGresult* result = PQexec(observer_, sql.c_str());
    int64_t count = -1;
    if (PQresultStatus(result) == PGRES_TUPLES_OK) {
      count = std::atoll(PQgetvalue(result, 0, 0));
    } else {
      ADD_FAILURE() << sql << ": " << PQerrorMessage(observer_);
    }
    PQclear(result);
    return count;
  }
  std::string SluiceTable(std::string_view name) const override {
    return StrCat("sluice.", name);
  }
  std::string MessagesTable(std::string_view queue,
                            bool archived) const override {
    return StrCat("pgmq.", archived ? "a_" : "q_", queue);
  }
  absl::StatusOr<std::unique_ptr<Backend>> Borrow() override {
    return BorrowPostgres(host_);
  }
  absl::StatusOr<std::unique_ptr<Backend>> BorrowNull() override {
    return BorrowPostgres(nullptr);
  }
  NativeWrite InsertOrder(std::string id) override {
    return [id](const NativeConnection& connection) -> absl::Status {
      PGconn* conn = PostgresHandle(connection);
      if (conn == nullptr) return absl::InternalError("not a postgres one");
      const char* values[] = {id.c_str()};
      PGresult* result =
          PQexecParams(conn, "INSERT INTO orders (id) VALUES ($1)", 1, nullptr,
                       values, nullptr, nullptr, 0);
      ExecStatusType status = PQresultStatus(result);
      PQclear(result);
      if (status != PGRES_COMMAND_OK) {
        return absl::AbortedError(
            StrCat("insert order: ", PQerrorMessage(conn)));
      }
      return absl::OkStatus();
    };
  }
  NativeWrite FailingWrite() override {
    return [](const NativeConnection& connection) {
      return PgExec(PostgresHandle(connection),
                    "INSERT INTO no_such_table VALUES (1)");
    };
  }
  absl::StatusOr<std::unique_ptr<Backend>> BorrowWithoutSchema() override {
    absl::StatusOr<std::unique_ptr<TestDatabase>> plain =
        TestDatabase::Create(/*migrated=*/false);
    if (!plain.ok()) return plain.status();
    plain_ = *std::move(plain);
    other_ = PQconnectdb(plain_->url().c_str());
    EXPECT_TRUE(PgExec(other_, "BEGIN").ok());
    return BorrowPostgres(other_);
  }
  std::string location() const override { return url_; }
  std::string_view begin_sql() const override { return "BEGIN"; }

 private:
  std::unique_ptr<TestDatabase> database_;  // null in a child process
  std::string url_;
  std::unique_ptr<Backend> backend_;
  PGconn* host_ = nullptr;
  PGconn* observer_ = nullptr;
  std::unique_ptr<TestDatabase> plain_;
  PGconn* other_ = nullptr;
};

}  // namespace

std::unique_ptr<HostDatabase> MakeHostDatabase(std::string_view kind,
                                               std::string* skip) {
  if (kind == "sqlite") {
    return std::make_unique<SqliteHostDatabase>(TempPath("db"), /*owned=*/true,
                                                /*create_table=*/true);
  }
  if (PostgresTestUrl().empty()) {
    *skip = kPostgresSkipMessage;
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<TestDatabase>> database =
      TestDatabase::Create();
  if (!database.ok()) {
    *skip = std::string(database.status().message());
    return nullptr;
  }
  std::string url = (*database)->url();
  return std::make_unique<PostgresHostDatabase>(*std::move(database), url,
                                                /*create_table=*/true);
}

std::unique_ptr<HostDatabase> ConnectHostDatabase(std::string_view kind,
                                                  const std::string& location) {
  if (kind == "sqlite") {
    return std::make_unique<SqliteHostDatabase>(location, /*owned=*/false,
                                                /*create_table=*/false);
  }
  return std::make_unique<PostgresHostDatabase>(nullptr, location,
                                                /*create_table=*/false);
}

Json Order(std::string_view id) {
  boost::json::object payload;
  payload["order"] = id;
  return Json(std::move(payload));
}

absl::StatusOr<HostTransaction> BeginHostTransaction(
    HostDatabase& db, Engine& engine, std::unique_ptr<Backend>& borrowed) {
  absl::Status begun = db.Exec(db.begin_sql());
  if (!begun.ok()) return begun;
  absl::StatusOr<std::unique_ptr<Backend>> backend = db.Borrow();
  if (!backend.ok()) return backend.status();
  borrowed = *std::move(backend);
  return engine.WithHostTransaction(*borrowed);
}

Job OrderJob(bool write_order, HostDatabase* db) {
  return Job("order_job", {.queue = "orders_q", .max_attempts = 2},
             [write_order, db](const Json& payload,
                               TaskContext& context) -> absl::StatusOr<Json> {
               std::string order(payload.as_object().at("order").as_string());
               if (write_order)
                 context.WriteOnCompletion(db->InsertOrder(order));
               return Json(payload.as_object().at("order"));
             });
}

void HostTransactionTest::SetUp() {
  std::string skip;
  db_ = MakeHostDatabase(GetParam(), &skip);
  if (db_ == nullptr) GTEST_SKIP() << skip;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(db_->backend());
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine_ = *std::move(engine);
  ASSERT_TRUE(engine_->Deploy(OrderJob(false, db_.get())).ok());
}

void HostTransactionTest::TearDown() {
  borrowed_.reset();
  engine_.reset();
  db_.reset();
}

HostTransactionTest::Totals HostTransactionTest::Snapshot() {
  return Totals{
      .runs = db_->CommittedRows(db_->SluiceTable("runs")),
      .messages = db_->CommittedRows(db_->MessagesTable("orders_q", false)) +
                  db_->CommittedRows(db_->MessagesTable("orders_q", true)),
      .reports = db_->CommittedRows(db_->SluiceTable("outbox")),
      .orders = db_->CommittedRows("orders"),
  };
}

absl::StatusOr<HostTransaction> HostTransactionTest::BeginHost() {
  return BeginHostTransaction(*db_, *engine_, borrowed_);
}

bool HostTransactionTest::AwaitRunEnded(const RunId& run,
                                        absl::Duration timeout) {
  return AwaitCondition(
      [&] {
        absl::StatusOr<RunView> view = engine_->GetRun(run);
        return view.ok() && IsTerminal(view->run.status);
      },
      timeout);
}

}  // namespace sluice::testing
