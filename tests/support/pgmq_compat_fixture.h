// What the pgmq compatibility tests share (pgmq_compat_queues_test.cc and
// pgmq_compat_messages_test.cc): a connection whose statements bind every
// value as text and report failures as values, and a fixture with a fresh
// database per test, owned by a role without superuser rights.
//
// The tests check that the pgmq-compatible SQL
// (backends/postgres/sql/pgmq_compat.sql) keeps pgmq 1.5.1's promises, one
// function's contract at a time. They need SLUICE_TEST_POSTGRES_URL;
// SLUICE_TEST_PGMQ_SQL may name another install script, e.g. the real
// pgmq's, to check that it passes the same tests.
#ifndef SLUICE_TESTS_SUPPORT_PGMQ_COMPAT_FIXTURE_H_
#define SLUICE_TESTS_SUPPORT_PGMQ_COMPAT_FIXTURE_H_

#include <libpq-fe.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "pg_session.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"

namespace sluice::pgmq_testing {

using Row = std::vector<std::optional<std::string>>;

struct Result {
  bool ok = false;
  std::string error;  // when !ok
  std::vector<Row> rows;

  // The first column of every row, NULL as "NULL".
  std::vector<std::string> Column() const {
    std::vector<std::string> values;
    for (const Row& row : rows) values.push_back(row.at(0).value_or("NULL"));
    return values;
  }
  // The single value of a one-row, one-column result.
  std::string Value() const {
    EXPECT_EQ(rows.size(), 1u) << "expected one row";
    if (rows.empty() || rows[0].empty()) return "<no row>";
    return rows[0][0].value_or("NULL");
  }
};

// One plain connection (pg_session.h). Statements bind every value as text.
class Connection {
 public:
  // Connects to `url`, or to database `dbname` of the same server; fails
  // the test and returns null if it can't.
  static std::unique_ptr<Connection> Open(const std::string& url,
                                          const std::string& dbname = "") {
    absl::StatusOr<postgres_internal::Session> session =
        postgres_internal::Session::Open(
            dbname.empty() ? url : testing::WithDatabase(url, dbname));
    if (!session.ok()) {
      ADD_FAILURE() << "cannot connect: " << session.status();
      return nullptr;
    }
    return std::unique_ptr<Connection>(new Connection(std::move(*session)));
  }

  Result Exec(const std::string& sql,
              const std::vector<std::string>& params = {}) {
    return Outcome(session_.Query(sql, params, "pgmq test"));
  }

  // Runs `sql` and fails the test unless it succeeds.
  Result Must(const std::string& sql,
              const std::vector<std::string>& params = {}) {
    Result result = Exec(sql, params);
    EXPECT_TRUE(result.ok) << sql << "\n" << result.error;
    return result;
  }

  // Runs a script of several statements (simple query protocol).
  Result Script(const std::string& sql) {
    absl::Status status = session_.Execute(sql, "pgmq script");
    return Result{status.ok(), std::string(status.message()), {}};
  }

  int BackendPid() const { return PQbackendPID(session_.get()); }

 private:
  explicit Connection(postgres_internal::Session session)
      : session_(std::move(session)) {}

  static Result Outcome(absl::StatusOr<postgres_internal::Result> result) {
    if (!result.ok()) {
      return Result{false, std::string(result.status().message()), {}};
    }
    return Result{true, "", testing::TextRows(*result)};
  }

  postgres_internal::Session session_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string InstallScriptPath() {
  const char* other = std::getenv("SLUICE_TEST_PGMQ_SQL");
  return other != nullptr && *other != '\0' ? other : SLUICE_PGMQ_COMPAT_SQL;
}

// A fresh database per test, owned by a fresh role without superuser
// rights; `db_` acts as that role, and `Second()` opens another session.
class PgmqCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = testing::PostgresTestUrl();
    if (url_.empty()) GTEST_SKIP() << testing::kPostgresSkipMessage;
    admin_ = Connection::Open(url_);
    ASSERT_NE(admin_, nullptr);
    name_ = "sluice_pgmq_" + std::to_string(getpid()) + "_" +
            std::to_string(
                std::chrono::steady_clock::now().time_since_epoch().count() %
                1000000000);
    admin_->Exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    admin_->Exec("DROP ROLE IF EXISTS " + name_);
    ASSERT_TRUE(admin_
                    ->Must("CREATE ROLE " + name_ +
                           " NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
                    .ok);
    ASSERT_TRUE(admin_->Must("CREATE DATABASE " + name_).ok);
    ASSERT_TRUE(
        admin_->Must("GRANT CREATE ON DATABASE " + name_ + " TO " + name_).ok);
    db_ = Second();
    ASSERT_NE(db_, nullptr);
    Result installed = Install(*db_);
    ASSERT_TRUE(installed.ok) << installed.error;
  }

  void TearDown() override {
    db_.reset();
    if (admin_ != nullptr && !name_.empty()) {
      admin_->Exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
      admin_->Exec("DROP ROLE IF EXISTS " + name_);
    }
  }

  // Another session on the test database, acting as the test role.
  std::unique_ptr<Connection> Second() {
    std::unique_ptr<Connection> conn = Connection::Open(url_, name_);
    if (conn != nullptr) conn->Must("SET ROLE " + name_);
    return conn;
  }

  // Runs the install script in one transaction, as the migration does.
  Result Install(Connection& conn) {
    return conn.Script("BEGIN;\n" + ReadFile(InstallScriptPath()) +
                       "\n;COMMIT;");
  }

  std::vector<std::string> Ids(const std::string& sql,
                               const std::vector<std::string>& params = {}) {
    return db_->Must(sql, params).Column();
  }

  std::string url_;
  std::string name_;
  std::unique_ptr<Connection> admin_;
  std::unique_ptr<Connection> db_;
};

}  // namespace sluice::pgmq_testing

#endif  // SLUICE_TESTS_SUPPORT_PGMQ_COMPAT_FIXTURE_H_
