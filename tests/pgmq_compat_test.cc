// The pgmq-compatible SQL (backends/postgres/sql/pgmq_compat.sql) keeps
// pgmq 1.5.1's promises: each test installs it into a fresh database, as a
// role without superuser rights, and checks one function's contract through
// raw libpq.
//
// Needs SLUICE_TEST_POSTGRES_URL (scripts/test.sh starts a throwaway
// cluster and sets it). SLUICE_TEST_PGMQ_SQL may name another install
// script, e.g. the real pgmq's, to check that it passes the same tests.
#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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

// One libpq connection. Statements bind every value as text.
class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects to `url`, or to database `dbname` of the same server.
  static std::unique_ptr<Connection> Open(const std::string& url,
                                          const std::string& dbname = "") {
    const char* keys[] = {"dbname", dbname.empty() ? nullptr : "dbname",
                          nullptr};
    const char* values[] = {url.c_str(), dbname.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (PQstatus(conn) != CONNECTION_OK) {
      ADD_FAILURE() << "cannot connect to " << (dbname.empty() ? url : dbname)
                    << ": " << PQerrorMessage(conn);
      PQfinish(conn);
      return nullptr;
    }
    return std::make_unique<Connection>(conn);
  }

  Result Exec(const std::string& sql,
              const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* res =
        PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                     nullptr, values.data(), nullptr, nullptr, 0);
    Result result;
    ExecStatusType status = PQresultStatus(res);
    result.ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!result.ok) result.error = PQresultErrorMessage(res);
    for (int r = 0; r < PQntuples(res); ++r) {
      Row row;
      for (int c = 0; c < PQnfields(res); ++c) {
        if (PQgetisnull(res, r, c)) {
          row.push_back(std::nullopt);
        } else {
          row.push_back(std::string(PQgetvalue(res, r, c)));
        }
      }
      result.rows.push_back(std::move(row));
    }
    PQclear(res);
    return result;
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
    PGresult* res = PQexec(conn_, sql.c_str());
    Result result;
    ExecStatusType status = PQresultStatus(res);
    result.ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!result.ok) result.error = PQresultErrorMessage(res);
    PQclear(res);
    return result;
  }

  int BackendPid() const { return PQbackendPID(conn_); }

 private:
  PGconn* conn_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string InstallScriptPath() {
  const char* other = std::getenv("SLUICE_TEST_PGMQ_SQL");
  return other != nullptr && *other != '\0' ? other : SLUICE_PGMQ_COMPAT_SQL;
}

// A fresh database per test, owned by a fresh role without superuser
// rights; `db_` acts as that role, and `Second()` opens another session.
class PgmqCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("SLUICE_TEST_POSTGRES_URL");
    if (url == nullptr || *url == '\0') {
      GTEST_SKIP() << "SLUICE_TEST_POSTGRES_URL is not set; scripts/test.sh "
                      "starts a PostgreSQL 15 cluster and sets it";
    }
    url_ = url;
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

TEST_F(PgmqCompatTest, Stricter_Install_RunTwice_IsHarmless) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{\"a\":1}')");
  Result again = Install(*db_);
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "1");
}

TEST_F(PgmqCompatTest, Create_MakesTablesIndexesAndMetaRow) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('jobs')");  // idempotent
  EXPECT_THAT(db_->Must("SELECT column_name || ' ' || data_type || ' ' || "
                        "is_nullable FROM information_schema.columns "
                        "WHERE table_schema = 'pgmq' AND table_name = 'q_jobs' "
                        "ORDER BY ordinal_position")
                  .Column(),
              ElementsAre("msg_id bigint NO", "read_ct integer NO",
                          "enqueued_at timestamp with time zone NO",
                          "vt timestamp with time zone NO", "message jsonb YES",
                          "headers jsonb YES"));
  EXPECT_THAT(db_->Must("SELECT column_name || ' ' || data_type || ' ' || "
                        "is_nullable FROM information_schema.columns "
                        "WHERE table_schema = 'pgmq' AND table_name = 'a_jobs' "
                        "ORDER BY ordinal_position")
                  .Column(),
              ElementsAre("msg_id bigint NO", "read_ct integer NO",
                          "enqueued_at timestamp with time zone NO",
                          "archived_at timestamp with time zone NO",
                          "vt timestamp with time zone NO", "message jsonb YES",
                          "headers jsonb YES"));
  EXPECT_EQ(db_->Must("SELECT is_identity FROM information_schema.columns "
                      "WHERE table_schema = 'pgmq' AND table_name = 'q_jobs' "
                      "AND column_name = 'msg_id'")
                .Value(),
            "YES");
  // Indexed: the live table's vt, the archive's archived_at.
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_indexes WHERE schemaname = "
                      "'pgmq' AND tablename = 'q_jobs' AND indexdef LIKE "
                      "'%(vt)%'")
                .Value(),
            "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_indexes WHERE schemaname = "
                      "'pgmq' AND tablename = 'a_jobs' AND indexdef LIKE "
                      "'%(archived_at)%'")
                .Value(),
            "1");
  Result meta = db_->Must(
      "SELECT queue_name, is_partitioned, is_unlogged, created_at IS NOT NULL "
      "FROM pgmq.meta");
  ASSERT_EQ(meta.rows.size(), 1u);
  EXPECT_THAT(meta.rows[0], ElementsAre("jobs", "f", "f", "t"));
  EXPECT_EQ(db_->Must("SELECT relpersistence FROM pg_class WHERE oid = "
                      "'pgmq.q_jobs'::regclass")
                .Value(),
            "p");
}

TEST_F(PgmqCompatTest, CreateUnlogged_MakesAnUnloggedLiveTable) {
  db_->Must("SELECT pgmq.create_unlogged('fast')");
  EXPECT_EQ(db_->Must("SELECT relpersistence FROM pg_class WHERE oid = "
                      "'pgmq.q_fast'::regclass")
                .Value(),
            "u");
  EXPECT_EQ(db_->Must("SELECT is_unlogged FROM pgmq.meta WHERE queue_name = "
                      "'fast'")
                .Value(),
            "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('fast', '{}')").Value(), "1");
}

TEST_F(PgmqCompatTest, CreateNonPartitioned_IsCreate) {
  db_->Must("SELECT pgmq.create_non_partitioned('plain')");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.list_queues() WHERE "
                      "queue_name = 'plain'")
                .Value(),
            "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('plain', '{}')").Value(), "1");
}

TEST_F(PgmqCompatTest, CreateAndDrop_TakeAnAdvisoryLockUntilCommit) {
  std::unique_ptr<Connection> other = Second();
  ASSERT_NE(other, nullptr);
  const std::string locks =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
      "granted AND pid = $1";
  const std::string pid = std::to_string(other->BackendPid());
  other->Must("BEGIN");
  other->Must("SELECT pgmq.create('locked')");
  EXPECT_NE(db_->Must(locks, {pid}).Value(), "0");
  other->Must("COMMIT");
  EXPECT_EQ(db_->Must(locks, {pid}).Value(), "0");
  other->Must("BEGIN");
  other->Must("SELECT pgmq.drop_queue('locked')");
  EXPECT_NE(db_->Must(locks, {pid}).Value(), "0");
  other->Must("COMMIT");
  EXPECT_EQ(db_->Must(locks, {pid}).Value(), "0");
}

TEST_F(PgmqCompatTest, QueueNames_AreCaseFolded) {
  db_->Must("SELECT pgmq.create('MixedCase')");
  EXPECT_EQ(
      db_->Must("SELECT pgmq.format_table_name('MixedCase', 'q')").Value(),
      "q_mixedcase");
  EXPECT_EQ(
      db_->Must("SELECT to_regclass('pgmq.q_mixedcase') IS NOT NULL").Value(),
      "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('MIXEDCASE', '{}')").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('mixedcase', '{}')").Value(), "2");
  EXPECT_EQ(
      db_->Must("SELECT count(*) FROM pgmq.read('MixedCase', 30, 10)").Value(),
      "2");
  // The meta row keeps the name as it was given.
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"),
              ElementsAre("MixedCase"));
}

TEST_F(PgmqCompatTest,
       QueueNames_TooLongOrWithForbiddenCharacters_AreRejected) {
  const std::string longest(47, 'n');
  db_->Must("SELECT pgmq.create($1)", {longest});
  EXPECT_EQ(db_->Must("SELECT pgmq.send($1, '{}')", {longest}).Value(), "1");
  EXPECT_EQ(
      db_->Must("SELECT queue_length FROM pgmq.metrics($1)", {longest}).Value(),
      "1");

  Result too_long = db_->Exec("SELECT pgmq.create($1)", {longest + "n"});
  EXPECT_FALSE(too_long.ok);
  EXPECT_THAT(too_long.error, HasSubstr("too long"));
  EXPECT_FALSE(
      db_->Exec("SELECT pgmq.validate_queue_name($1)", {longest + "n"}).ok);
  EXPECT_TRUE(db_->Exec("SELECT pgmq.validate_queue_name($1)", {longest}).ok);

  for (const std::string bad : {"a$b", "a;b", "a--b", "a'b"}) {
    Result created = db_->Exec("SELECT pgmq.create($1)", {bad});
    EXPECT_FALSE(created.ok) << bad;
    EXPECT_THAT(created.error, HasSubstr("invalid characters")) << bad;
    EXPECT_FALSE(db_->Exec("SELECT pgmq.format_table_name($1, 'q')", {bad}).ok)
        << bad;
  }
  // Nothing but the valid queue exists.
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.meta").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_tables WHERE schemaname = "
                      "'pgmq' AND tablename <> 'meta'")
                .Value(),
            "2");
}

TEST_F(PgmqCompatTest, Send_EveryOverload_ReturnsIncreasingIds) {
  db_->Must("SELECT pgmq.create('jobs')");
  std::vector<std::string> ids;
  for (const char* call : {
           "SELECT * FROM pgmq.send('jobs', '{\"n\":1}')",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":2}', 0)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":3}', now())",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":4}', '{\"h\":4}'::jsonb)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":5}', '{\"h\":5}'::jsonb, "
           "0)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":6}', '{\"h\":6}'::jsonb, "
           "now())",
       }) {
    ids.push_back(db_->Must(call).Value());
  }
  EXPECT_THAT(ids, ElementsAre("1", "2", "3", "4", "5", "6"));
  Result rows = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', headers->>'h', "
      "enqueued_at <= clock_timestamp() FROM pgmq.q_jobs ORDER BY msg_id");
  ASSERT_EQ(rows.rows.size(), 6u);
  EXPECT_THAT(rows.rows[0], ElementsAre("1", "0", "1", std::nullopt, "t"));
  EXPECT_THAT(rows.rows[3], ElementsAre("4", "0", "4", "4", "t"));
  EXPECT_THAT(rows.rows[5], ElementsAre("6", "0", "6", "6", "t"));
}

TEST_F(PgmqCompatTest, Send_WithDelay_HidesTheMessageUntilThen) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.send('jobs', '{}', now() + interval '1 hour')");
  db_->Must("SELECT pgmq.send('jobs', '{}', '{}'::jsonb, 3600)");
  db_->Must(
      "SELECT pgmq.send('jobs', '{}', '{}'::jsonb, now() + interval '1 hour')");
  db_->Must("SELECT pgmq.send('jobs', '{}', now() - interval '1 hour')");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("5"));
  // Integer delays count seconds from now.
  EXPECT_EQ(db_->Must("SELECT bool_and(vt - clock_timestamp() BETWEEN "
                      "interval '3590 s' AND interval '3600 s') FROM "
                      "pgmq.q_jobs WHERE msg_id IN (1, 3)")
                .Value(),
            "t");
}

TEST_F(PgmqCompatTest, SendBatch_EveryOverload_KeepsArrayOrder) {
  db_->Must("SELECT pgmq.create('jobs')");
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":1}', '{\"n\":2}', '{\"n\":3}']::jsonb[])"),
              ElementsAre("1", "2", "3"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":4}', '{\"n\":5}']::jsonb[], 3600)"),
              ElementsAre("4", "5"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":6}']::jsonb[], now() + interval '1 hour')"),
              ElementsAre("6"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":7}', '{\"n\":8}']::jsonb[], "
                  "ARRAY['{\"h\":7}', '{\"h\":8}']::jsonb[])"),
              ElementsAre("7", "8"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":9}']::jsonb[], ARRAY['{\"h\":9}']::jsonb[], "
                  "3600)"),
              ElementsAre("9"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":10}']::jsonb[], ARRAY['{\"h\":10}']::jsonb[], "
                  "now() + interval '1 hour')"),
              ElementsAre("10"));
  // Each message kept its own body and header.
  EXPECT_EQ(db_->Must("SELECT bool_and(message->>'n' = msg_id::text AND "
                      "coalesce(headers->>'h', msg_id::text) = msg_id::text) "
                      "FROM pgmq.q_jobs")
                .Value(),
            "t");
  // Only the undelayed ones are visible.
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 100)"),
              ElementsAre("1", "2", "3", "7", "8"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY[]::jsonb[])"),
              IsEmpty());
}

TEST_F(PgmqCompatTest, Read_TakesVisibleMessagesInIdOrder) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"n\":1}', '{\"n\":2}', "
      "'{\"n\":3}']::jsonb[])");
  Result first = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', vt - clock_timestamp() BETWEEN "
      "interval '25 s' AND interval '30 s' FROM pgmq.read('jobs', 30, 2)");
  ASSERT_EQ(first.rows.size(), 2u);
  EXPECT_THAT(first.rows[0], ElementsAre("1", "1", "1", "t"));
  EXPECT_THAT(first.rows[1], ElementsAre("2", "1", "2", "t"));
  // The stored row changed the same way.
  EXPECT_EQ(db_->Must("SELECT read_ct || ' ' || (vt > clock_timestamp()) FROM "
                      "pgmq.q_jobs WHERE msg_id = 1")
                .Value(),
            "1 true");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5)"),
              ElementsAre("3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5)"), IsEmpty());

  // Visible again after vt 0; read_ct counts every read.
  db_->Must("SELECT pgmq.set_vt('jobs', 1, 0)");
  Result again =
      db_->Must("SELECT msg_id, read_ct FROM pgmq.read('jobs', 0, 5)");
  ASSERT_EQ(again.rows.size(), 1u);
  EXPECT_THAT(again.rows[0], ElementsAre("1", "2"));
  // A vt of 0 leaves it visible at once.
  EXPECT_THAT(Ids("SELECT read_ct FROM pgmq.read('jobs', 0, 5)"),
              ElementsAre("3"));
}

TEST_F(PgmqCompatTest, Read_SkipsRowsLockedByAnotherConnection) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}']::jsonb[])");
  std::unique_ptr<Connection> other = Second();
  ASSERT_NE(other, nullptr);
  other->Must("BEGIN");
  other->Must("SELECT * FROM pgmq.q_jobs WHERE msg_id = 1 FOR UPDATE");
  db_->Must("SET lock_timeout = '5s'");  // a blocked read fails, not hangs
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2", "3"));
  // A reader in another transaction also skips what `other` read.
  other->Must("COMMIT");
  other->Must("BEGIN");
  db_->Must("SELECT pgmq.set_vt('jobs', 2, 0)");
  EXPECT_THAT(
      other->Must("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").Column(),
      ElementsAre("1"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2"));
  other->Must("ROLLBACK");
  // The rolled-back read left message 1 as it was.
  EXPECT_THAT(Ids("SELECT msg_id || ':' || read_ct FROM pgmq.read('jobs', 30, "
                  "10)"),
              ElementsAre("1:1"));
}

TEST_F(PgmqCompatTest, Read_Conditional_FiltersByJsonContainment) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"k\":\"a\",\"x\":1}', "
      "'{\"k\":\"b\"}', '{\"k\":\"a\"}', '[1,2]']::jsonb[])");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10, "
                  "'{\"k\":\"a\"}')"),
              ElementsAre("1", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10, "
                  "'{\"k\":\"zzz\"}')"),
              IsEmpty());
  // The default '{}' takes everything left, non-objects included.
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2", "4"));
}

TEST_F(PgmqCompatTest, ReadWithPoll_WaitsForAMessageOrTheTimeLimit) {
  db_->Must("SELECT pgmq.create('jobs')");
  auto started = std::chrono::steady_clock::now();
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 1, 1, "
                  "50)"),
              IsEmpty());
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(5));

  db_->Must("SELECT pgmq.send('jobs', '{}', 1)");
  started = std::chrono::steady_clock::now();
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5, 5, "
                  "50)"),
              ElementsAre("1"));
  waited = std::chrono::steady_clock::now() - started;
  EXPECT_LT(waited, std::chrono::seconds(4));
  // Defaults and a conditional.
  db_->Must("SELECT pgmq.send('jobs', '{\"k\":1}')");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5)"),
              ElementsAre("2"));
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"k\":1}', "
      "'{\"k\":2}']::jsonb[])");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5, 1, "
                  "100, '{\"k\":2}')"),
              ElementsAre("4"));
}

TEST_F(PgmqCompatTest, Pop_ReturnsAndDeletesTheFirstVisibleMessage) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":1}', 3600)");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":2}')");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":3}')");
  Result popped =
      db_->Must("SELECT msg_id, message->>'n' FROM pgmq.pop('jobs')");
  ASSERT_EQ(popped.rows.size(), 1u);
  EXPECT_THAT(popped.rows[0], ElementsAre("2", "2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs ORDER BY msg_id"),
              ElementsAre("1", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.pop('jobs')"), ElementsAre("3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.pop('jobs')"), IsEmpty());
}

TEST_F(PgmqCompatTest, SetVt_MovesOneMessagesVisibility) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}']::jsonb[])");
  Result hidden = db_->Must(
      "SELECT msg_id, read_ct, vt - clock_timestamp() BETWEEN interval '590 s' "
      "AND interval '600 s' FROM pgmq.set_vt('jobs', 1, 600)");
  ASSERT_EQ(hidden.rows.size(), 1u);
  EXPECT_THAT(hidden.rows[0], ElementsAre("1", "0", "t"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2"));
  db_->Must("SELECT pgmq.set_vt('jobs', 1, 0)");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("1"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.set_vt('jobs', 999, 0)"), IsEmpty());
}

TEST_F(PgmqCompatTest, Archive_MovesRowsToTheArchiveTable) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"n\":1}', '{\"n\":2}', "
      "'{\"n\":3}', '{\"n\":4}']::jsonb[], ARRAY['{\"h\":1}', "
      "'{\"h\":2}', '{\"h\":3}', '{\"h\":4}']::jsonb[])");
  db_->Must("SELECT pgmq.read('jobs', 30, 1)");  // message 1: read_ct 1
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "f");
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 999::bigint)").Value(), "f");
  std::vector<std::string> moved =
      Ids("SELECT * FROM pgmq.archive('jobs', ARRAY[2, 3, 999]::bigint[])");
  std::sort(moved.begin(), moved.end());
  EXPECT_THAT(moved, ElementsAre("2", "3"));

  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs"), ElementsAre("4"));
  Result archived = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', headers->>'h', "
      "archived_at >= enqueued_at FROM pgmq.a_jobs ORDER BY msg_id");
  ASSERT_EQ(archived.rows.size(), 3u);
  EXPECT_THAT(archived.rows[0], ElementsAre("1", "1", "1", "1", "t"));
  EXPECT_THAT(archived.rows[1], ElementsAre("2", "0", "2", "2", "t"));
  EXPECT_THAT(archived.rows[2], ElementsAre("3", "0", "3", "3", "t"));
  // Archiving keeps ids unique per queue: new messages get new ids.
  EXPECT_EQ(db_->Must("SELECT pgmq.send('jobs', '{}')").Value(), "5");
}

TEST_F(PgmqCompatTest, Delete_RemovesMessages) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}', "
      "'{}']::jsonb[])");
  EXPECT_EQ(db_->Must("SELECT pgmq.delete('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.delete('jobs', 1::bigint)").Value(), "f");
  std::vector<std::string> deleted =
      Ids("SELECT * FROM pgmq.delete('jobs', ARRAY[2, 3, 999]::bigint[])");
  std::sort(deleted.begin(), deleted.end());
  EXPECT_THAT(deleted, ElementsAre("2", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs"), ElementsAre("4"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "0");
}

TEST_F(PgmqCompatTest, PurgeQueue_DeletesEveryLiveMessage) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}']::jsonb[])");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.archive('jobs', 1::bigint)");
  EXPECT_EQ(db_->Must("SELECT pgmq.purge_queue('jobs')").Value(), "3");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "0");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.purge_queue('jobs')").Value(), "0");
}

TEST_F(PgmqCompatTest, Metrics_CountLiveVisibleAndTotalMessages) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('idle')");
  Result empty = db_->Must(
      "SELECT queue_name, queue_length, newest_msg_age_sec, "
      "oldest_msg_age_sec, total_messages, scrape_time IS NOT NULL, "
      "queue_visible_length FROM pgmq.metrics('idle')");
  ASSERT_EQ(empty.rows.size(), 1u);
  EXPECT_THAT(empty.rows[0], ElementsAre("idle", "0", std::nullopt,
                                         std::nullopt, "0", "t", "0"));

  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}', "
      "'{}']::jsonb[])");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.read('jobs', 30, 1)");
  db_->Must("SELECT pgmq.delete('jobs', 2::bigint)");
  db_->Must("SELECT pgmq.archive('jobs', 3::bigint)");
  // Live: 1 (read, hidden), 4, 5 (delayed); visible: 4. Sent: 5.
  Result metrics = db_->Must(
      "SELECT queue_name, queue_length, queue_visible_length, total_messages, "
      "oldest_msg_age_sec >= 0, newest_msg_age_sec <= oldest_msg_age_sec "
      "FROM pgmq.metrics('jobs')");
  ASSERT_EQ(metrics.rows.size(), 1u);
  EXPECT_THAT(metrics.rows[0], ElementsAre("jobs", "3", "1", "5", "t", "t"));

  Result all = db_->Must(
      "SELECT queue_name, queue_length, total_messages FROM pgmq.metrics_all() "
      "ORDER BY queue_name");
  ASSERT_EQ(all.rows.size(), 2u);
  EXPECT_THAT(all.rows[0], ElementsAre("idle", "0", "0"));
  EXPECT_THAT(all.rows[1], ElementsAre("jobs", "3", "5"));
}

TEST_F(PgmqCompatTest, ListQueues_ReturnsTheMetaRows) {
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"), IsEmpty());
  db_->Must("SELECT pgmq.create('b_queue')");
  db_->Must("SELECT pgmq.create_unlogged('a_queue')");
  Result queues = db_->Must(
      "SELECT queue_name, is_partitioned, is_unlogged, created_at <= now() "
      "FROM pgmq.list_queues() ORDER BY queue_name");
  ASSERT_EQ(queues.rows.size(), 2u);
  EXPECT_THAT(queues.rows[0], ElementsAre("a_queue", "f", "t", "t"));
  EXPECT_THAT(queues.rows[1], ElementsAre("b_queue", "f", "f", "t"));
}

TEST_F(PgmqCompatTest, DropQueue_RemovesBothTablesAndTheMetaRow) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('kept')");
  db_->Must("SELECT pgmq.send('jobs', '{}')");
  db_->Must("SELECT pgmq.archive('jobs', 1::bigint)");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT to_regclass('pgmq.q_jobs') IS NULL AND "
                      "to_regclass('pgmq.a_jobs') IS NULL")
                .Value(),
            "t");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.meta"), ElementsAre("kept"));
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "f");
  EXPECT_FALSE(db_->Exec("SELECT pgmq.send('jobs', '{}')").ok);

  // Created again, the queue starts empty with fresh ids.
  db_->Must("SELECT pgmq.create('jobs')");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('jobs', '{}')").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "0");
}

// sluice.create_queue (SECURITY DEFINER) calls pgmq.create with
// search_path = pg_catalog, pg_temp.
TEST_F(PgmqCompatTest, Functions_WorkWithARestrictedSearchPath) {
  db_->Must("SET search_path = pg_catalog, pg_temp");
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create_unlogged('fast')");
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"k\":1}', '{\"k\":2}']::jsonb[], 0)"),
              ElementsAre("1", "2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5, "
                  "'{\"k\":2}')"),
              ElementsAre("2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.set_vt('jobs', 2, 0)"),
              ElementsAre("2"));
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(
      db_->Must("SELECT total_messages FROM pgmq.metrics('jobs')").Value(),
      "2");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.metrics_all()").Value(), "2");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "t");
}

TEST_F(PgmqCompatTest, Functions_OnAMissingQueue_FailNamingTheTable) {
  Result sent = db_->Exec("SELECT pgmq.send('ghost', '{}')");
  EXPECT_FALSE(sent.ok);
  EXPECT_THAT(sent.error, HasSubstr("q_ghost"));
  EXPECT_FALSE(db_->Exec("SELECT pgmq.read('ghost', 30, 1)").ok);
  EXPECT_FALSE(db_->Exec("SELECT pgmq.metrics('ghost')").ok);
}

// Where Sluice's SQL is stricter than pgmq 1.5.1 (docs/pgmq.md lists the
// differences); the real pgmq fails these.

TEST_F(PgmqCompatTest, Stricter_CaseVariantsOfOneName_ShareOneMetaRow) {
  db_->Must("SELECT pgmq.create('MixedCase')");
  db_->Must("SELECT pgmq.create('MIXEDCASE')");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"),
              ElementsAre("MixedCase"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.metrics_all()").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('mixedcase')").Value(), "t");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"), IsEmpty());
}

TEST_F(PgmqCompatTest, Stricter_EmptyQueueName_IsRejected) {
  Result created = db_->Exec("SELECT pgmq.create('')");
  EXPECT_FALSE(created.ok);
  EXPECT_THAT(created.error, HasSubstr("must not be empty"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.meta").Value(), "0");
}

TEST_F(PgmqCompatTest, Stricter_SendBatch_HeadersOfAnotherLength_AreRejected) {
  db_->Must("SELECT pgmq.create('jobs')");
  Result sent = db_->Exec(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}']::jsonb[], "
      "ARRAY['{}']::jsonb[])");
  EXPECT_FALSE(sent.ok);
  EXPECT_THAT(sent.error, HasSubstr("one header per message"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "0");
}

}  // namespace
