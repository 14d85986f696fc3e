// Postgres-specific behaviour: migrations, the schema check, the runtime
// role, reconnecting after lost connections, deferred (pipelined) failures,
// exact times whatever the server's settings, and LISTEN/NOTIFY wake-ups.
// Needs SLUICE_TEST_POSTGRES_URL (a superuser URL of a scratch cluster);
// every test skips without it.
#include <unistd.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_queue_sql.h"
#include "pg_session.h"
#include "pg_sql.h"
#include "pg_sql_tasks.h"
#include "sluice/backend.h"
#include "sluice/backends.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/postgres.h"
#include "support/postgres_sql.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

using postgres_internal::Session;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

// `url` connecting as `user` (the test cluster trusts local users).
std::string WithUser(const std::string& url, const std::string& user) {
  return StrCat(url, url.find('?') == std::string::npos ? "?" : "&",
                "user=", user);
}

RunRecord MakeRun(uint64_t n) {
  RunRecord run;
  run.run_id = RunId(0x0190'0000'0000'7000, 0x8000'0000'0000'0000 | n);
  run.flow_slug = "greet";
  run.input = J(R"({"b":1,"a":[false,0,"",null]})");
  run.remaining_steps = 1;
  run.started_at = kT0;
  return run;
}

class PostgresBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }

  std::unique_ptr<TestDatabase> Database(bool migrated = true) {
    absl::StatusOr<std::unique_ptr<TestDatabase>> database =
        TestDatabase::Create(migrated);
    EXPECT_TRUE(database.ok()) << database.status();
    return database.ok() ? std::move(*database) : nullptr;
  }

  std::unique_ptr<Backend> Open(const std::string& url,
                                PostgresOptions options = {}) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        OpenPostgres(url, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  static void Execute(const std::string& url, const std::string& sql) {
    absl::StatusOr<Session> session = Session::Open(url);
    ASSERT_TRUE(session.ok()) << session.status();
    absl::Status status = session->Execute(sql, "test");
    ASSERT_TRUE(status.ok()) << status;
  }

  // Registers and creates the queues `names` on `backend`, committed.
  static void CreateQueues(Backend& backend,
                           std::initializer_list<const char*> names) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend.Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    for (const char* name : names) {
      ASSERT_TRUE((*tx)->CreateQueue({.name = name, .created_at = kT0}).ok())
          << name;
    }
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  static std::vector<RunRecord> Runs(Backend& backend) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend.Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return {};
    absl::StatusOr<std::vector<RunRecord>> runs =
        (*tx)->ListRuns(RunQuery::OfFlow("", 100), Fields::kAll);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? *runs : std::vector<RunRecord>();
  }

  static absl::Status InsertRun(Backend& backend, uint64_t n) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend.Begin();
    if (!tx.ok()) return tx.status();
    std::vector<RunRecord> runs = {MakeRun(n)};
    if (absl::Status s = (*tx)->InsertRuns(runs); !s.ok()) return s;
    return (*tx)->Commit();
  }
};

// --- Migrations and the schema check ---------------------------------------

TEST_F(PostgresBackendTest, Migrate_TwiceAndConcurrently_IsIdempotent) {
  std::unique_ptr<TestDatabase> db = Database(/*migrated=*/false);
  ASSERT_NE(db, nullptr);
  std::vector<absl::Status> results(3);
  std::vector<std::thread> migrators;
  for (absl::Status& result : results) {
    migrators.emplace_back([&] { result = MigratePostgres(db->url()); });
  }
  for (std::thread& migrator : migrators) migrator.join();
  for (const absl::Status& result : results) EXPECT_TRUE(result.ok()) << result;
  ASSERT_TRUE(MigratePostgres(db->url()).ok());

  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(db->url());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());
  absl::StatusOr<Session> session = Session::Open(db->url());
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(*session->QueryText("SELECT count(*) FROM sluice.schema_migrations",
                                {}, "count"),
            StrCat(LatestPostgresSchemaVersion()));
}

TEST_F(PostgresBackendTest, Open_OnUnmigratedDatabase_NamesVersionsAndFix) {
  std::unique_ptr<TestDatabase> db = Database(/*migrated=*/false);
  ASSERT_NE(db, nullptr);
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(db->url());
  ASSERT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("version 0"));
  EXPECT_THAT(std::string(backend.status().message()),
              HasSubstr("sluice migrate"));

  ASSERT_TRUE(MigratePostgres(db->url()).ok());
  Execute(db->url(),
          StrCat("DELETE FROM sluice.schema_migrations WHERE version = ",
                 LatestPostgresSchemaVersion()));
  backend = OpenBackend(db->url());
  ASSERT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      std::string(backend.status().message()),
      HasSubstr(StrCat("older than version ", LatestPostgresSchemaVersion())));
}

TEST_F(PostgresBackendTest, CheckSchema_ReportsExactlyWhatWasRemoved) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  Execute(db->url(),
          "DROP TABLE sluice.workers; "
          "DROP FUNCTION sluice.require_found(text, text); "
          "REVOKE UPDATE ON sluice.runs FROM sluice_runtime; "
          "REVOKE USAGE ON SCHEMA pgmq FROM sluice_runtime");
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(db->url());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->ok());
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());
  EXPECT_THAT(report->missing_tables, ElementsAre("sluice.workers"));
  EXPECT_THAT(report->missing_functions,
              ElementsAre("sluice.require_found(text,text)"));
  EXPECT_THAT(report->missing_privileges,
              ElementsAre("sluice_runtime: UPDATE on sluice.runs",
                          "sluice_runtime: USAGE on schema pgmq"));
}

// --- The runtime role --------------------------------------------------------

TEST_F(PostgresBackendTest, RuntimeRole_RunsAFlow_ButCannotChangeTheSchema) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  const std::string role = StrCat("sluice_test_worker_", getpid());
  Execute(db->url(), StrCat("DROP ROLE IF EXISTS ", role, "; CREATE ROLE ",
                            role, " LOGIN; GRANT sluice_runtime TO ", role));
  const std::string worker_url = WithUser(db->url(), role);
  {
    std::unique_ptr<Backend> backend = Open(worker_url);
    ASSERT_NE(backend, nullptr);
    ManualClock clock(kT0);
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Create(*backend, {.clock = &clock});
    ASSERT_TRUE(engine.ok()) << engine.status();
    Flow flow("runtime_flow");
    flow.Step("only", [](const Json& input, TaskContext&) {
      return absl::StatusOr<Json>(input);
    });
    ASSERT_TRUE((*engine)->Deploy(flow).ok());
    absl::StatusOr<RunId> run = (*engine)->StartRun("runtime_flow", J("7"));
    ASSERT_TRUE(run.ok()) << run.status();
    ClaimRequest request{flow.shape().steps[0].queue_name, "w", {}, 10};
    request.served.AddFlow(flow.shape());
    absl::StatusOr<std::vector<ClaimedTask>> claimed =
        (*engine)->Claim(request);
    ASSERT_TRUE(claimed.ok()) << claimed.status();
    ASSERT_EQ(claimed->size(), 1u);
    std::vector<TaskResult> results = {
        TaskResult{(*claimed)[0].key, (*claimed)[0].attempt, J("7")}};
    absl::StatusOr<FinishOutcome> finished = (*engine)->FinishTasks(results);
    ASSERT_TRUE(finished.ok()) << finished.status();
    ASSERT_TRUE((*engine)->ApplyReports(finished->report_ids).ok());
    absl::StatusOr<RunView> view = (*engine)->GetRun(*run);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->run.status, RunStatus::kCompleted);
  }
  absl::StatusOr<Session> session = Session::Open(worker_url);
  ASSERT_TRUE(session.ok()) << session.status();
  for (const char* ddl :
       {"ALTER TABLE sluice.runs ADD COLUMN sneaky integer",
        "DROP TABLE sluice.runs", "CREATE TABLE sluice.extra (x integer)",
        "ALTER TABLE pgmq.q_runtime_flow ADD COLUMN sneaky integer",
        "DROP TABLE pgmq.q_runtime_flow",
        "DROP FUNCTION sluice.create_queue"}) {
    absl::Status status = session->Execute(ddl, "ddl");
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied)
        << ddl << ": " << status;
  }
  session->Execute("SELECT 1", "close").IgnoreError();
  TestDatabase* raw = db.release();
  delete raw;  // drops the database before the role
  absl::StatusOr<Session> admin = Session::Open(PostgresTestUrl());
  ASSERT_TRUE(admin.ok());
  admin->Execute(StrCat("DROP ROLE IF EXISTS ", role), "drop role")
      .IgnoreError();
}

// --- Connections -------------------------------------------------------------

TEST_F(PostgresBackendTest, TerminatedConnections_NextTransactionReconnects) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<Backend> backend = Open(db->url(), {.pool_size = 2});
  ASSERT_NE(backend, nullptr);
  ASSERT_TRUE(InsertRun(*backend, 1).ok());
  const std::string terminate = StrCat(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
      "datname = '",
      db->name(), "' AND pid <> pg_backend_pid()");

  // Idle pool connections killed: the next transaction just works.
  Execute(PostgresTestUrl(), terminate);
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(InsertRun(*backend, 2).ok());

  // Killed mid-transaction: the commit fails as kUnavailable, nothing of it
  // is applied, and the next transaction reconnects.
  {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE((*tx)->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll).ok());
    std::vector<RunRecord> runs = {MakeRun(3)};
    ASSERT_TRUE((*tx)->InsertRuns(runs).ok());
    Execute(PostgresTestUrl(), terminate);
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ((*tx)->Commit().code(), absl::StatusCode::kUnavailable);
  }
  ASSERT_TRUE(InsertRun(*backend, 4).ok());
  std::vector<RunRecord> runs = Runs(*backend);
  std::vector<uint64_t> numbers;
  for (const RunRecord& run : runs) {
    numbers.push_back(run.run_id.low() & 0xff);
  }
  EXPECT_THAT(numbers, ElementsAre(4, 2, 1));
}

// --- Pipelined writes
// ----------------------------------------------------------

TEST_F(PostgresBackendTest,
       DeferredFailures_SurfaceWithTheirCodeAndApplyNothing) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<Backend> backend = Open(db->url());
  ASSERT_NE(backend, nullptr);
  ASSERT_TRUE(InsertRun(*backend, 1).ok());
  {  // A duplicate insert fails at commit with kAlreadyExists.
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<RunRecord> fresh = {MakeRun(2)};
    ASSERT_TRUE((*tx)->InsertRuns(fresh).ok());
    std::vector<RunRecord> again = {MakeRun(1)};
    ASSERT_TRUE((*tx)->InsertRuns(again).ok());
    EXPECT_EQ((*tx)->Commit().code(), absl::StatusCode::kAlreadyExists);
  }
  {  // Updating a missing run fails at the next read with kNotFound.
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<RunRecord> fresh = {MakeRun(3)};
    ASSERT_TRUE((*tx)->InsertRuns(fresh).ok());
    std::vector<RunRecord> missing = {MakeRun(9)};
    ASSERT_TRUE((*tx)->UpdateRuns(missing).ok());
    absl::StatusOr<int64_t> count = (*tx)->CountReports();
    EXPECT_EQ(count.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(count.status().message()),
                HasSubstr(MakeRun(9).run_id.ToString()));
    EXPECT_EQ((*tx)->Commit().code(), absl::StatusCode::kFailedPrecondition);
  }
  {  // ... and at commit when nothing reads after it.
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<RunRecord> fresh = {MakeRun(4)};
    ASSERT_TRUE((*tx)->InsertRuns(fresh).ok());
    std::vector<RunRecord> missing = {MakeRun(9)};
    ASSERT_TRUE((*tx)->UpdateRuns(missing).ok());
    EXPECT_EQ((*tx)->Commit().code(), absl::StatusCode::kNotFound);
  }
  ASSERT_EQ(Runs(*backend).size(), 1u);
}

// --- Values ------------------------------------------------------------------

TEST_F(PostgresBackendTest,
       TimesAndJson_RoundTripExactly_WhateverTheSessionSettings) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  Execute(db->url(), StrCat("ALTER DATABASE ", db->name(),
                            " SET TimeZone = 'America/St_Johns'; ALTER "
                            "DATABASE ",
                            db->name(), " SET DateStyle = 'SQL, DMY'"));
  std::unique_ptr<Backend> backend = Open(db->url());
  ASSERT_NE(backend, nullptr);
  RunRecord run = MakeRun(1);
  run.started_at = absl::FromUnixMicros(1'800'000'000'123'457);
  run.finished_at = absl::FromUnixMicros(-86'400'000'001);  // before 1970
  run.output = J(R"({"z":1,"a":{"y":2.5,"b":[]},"e":1e300})");
  {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<RunRecord> runs = {run};
    ASSERT_TRUE((*tx)->InsertRuns(runs).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  std::vector<RunRecord> runs = Runs(*backend);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].started_at, run.started_at);
  EXPECT_EQ(runs[0].finished_at, run.finished_at);
  EXPECT_EQ(SerializeJson(runs[0].input), SerializeJson(run.input));
  EXPECT_EQ(SerializeJson(*runs[0].output), SerializeJson(*run.output));
}

// --- Query plans -------------------------------------------------------------

// Hot statements use their indexes even when the statistics were gathered
// on empty tables (the trap DESIGN.md describes): each session plans with
// the parameters at hand (plan_cache_mode = force_custom_plan), the planner
// sizes tables by their current pages, and batch lookups are written so
// their keys are index conditions (pg_sql.h).
TEST_F(PostgresBackendTest,
       HotStatements_UseIndexes_AfterAnalyzeOnEmptyTables) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  {
    std::unique_ptr<Backend> backend = Open(db->url());
    ASSERT_NE(backend, nullptr);
    CreateQueues(*backend, {"plans"});
  }
  // Statistics say "empty"; then the tables grow with no ANALYZE after.
  Execute(db->url(),
          "ANALYZE; "
          "INSERT INTO sluice.runs (run_id, flow_slug, status, "
          "remaining_steps, error, started_at, input) SELECT "
          "gen_random_uuid(), 'plans', 'started', 1, '', now(), '{}' FROM "
          "generate_series(1, 20000); "
          "INSERT INTO sluice.step_states (run_id, step_index, step_slug, "
          "status, remaining_deps, error, skip_reason) SELECT run_id, 0, "
          "'each', 'started', 0, '', '' FROM sluice.runs; "
          "INSERT INTO sluice.tasks (run_id, step_index, task_index, "
          "flow_slug, status, attempts, error, queue_name, message_id, "
          "queued_at, stall_at, requeued_count, worker_id, input) SELECT "
          "run_id, 0, i, 'plans', CASE WHEN i = 0 THEN 'started' ELSE "
          "'completed' END, 1, '', 'plans', row_number() OVER (), now(), "
          "now(), 0, '', '1' FROM sluice.runs, generate_series(0, 2) AS i; "
          "INSERT INTO pgmq.q_plans (vt, message) SELECT now() + "
          "interval '1 hour', '{}' FROM generate_series(1, 20000)");
  absl::StatusOr<Session> admin = Session::Open(db->url());
  ASSERT_TRUE(admin.ok());
  absl::StatusOr<std::string> run =
      admin->QueryText("SELECT run_id FROM sluice.runs LIMIT 1", {}, "run");
  ASSERT_TRUE(run.ok());
  const std::string runs_array = StrCat("{", *run, "}");
  const postgres_internal::QueueSql queue("plans");
  const std::vector<std::string> plan_queues = {"plans"};
  const std::string stalled_sql =
      postgres_internal::FindStalledSql(plan_queues, Fields::kAll);
  struct Statement {
    std::string_view sql;
    std::vector<std::string> params;
  };
  const std::vector<Statement> statements = {
      {postgres_internal::sql::kGetRunsAll.view(), {runs_array}},
      {postgres_internal::sql::kGetStepStatesAll.view(), {runs_array}},
      {postgres_internal::sql::kGetTasksAll.view(), {runs_array, "{0}", "{7}"}},
      {postgres_internal::sql::kGetTasksByMessageAll.view(),
       {"plans", "{1,2,3}"}},
      {postgres_internal::sql::kUnfinishedOfRunAll.view(), {*run}},
      {postgres_internal::sql::kUnfinishedOfStepAll.view(), {*run, "0"}},
      {stalled_sql, {"2030-01-01 00:00:00+00", "2030-01-01 00:00:02+00", "10"}},
      {postgres_internal::sql::kGetTaskOutputs.view(), {runs_array, "{0}"}},
      {postgres_internal::sql::kUpdateTasks.view(),
       {runs_array, "{0}", "{0}", "{started}", "{2}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}", "{0}", "{w}", "{NULL}", "{started}", "{1}", "{0}",
        "{f}", "{1}", "{f}"}},
      {postgres_internal::sql::kUpdateTasksSkipLocked.view(),
       {runs_array, "{0}", "{0}", "{started}", "{2}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}", "{0}", "{w}", "{NULL}", "{started}", "{1}", "{0}",
        "{f}", "{1}", "{f}"}},
      {postgres_internal::sql::kAddRunRemainingSteps, {runs_array, "{-1}"}},
      {postgres_internal::sql::kAddStepCounters,
       {runs_array, "{0}", "{-1}", "{0}"}},
      {postgres_internal::sql::kUpdateRunsAndCounters,
       {runs_array, "{started}", "{\"\"}", "{NULL}", "{NULL}", "{f}", "{0}"}},
      {postgres_internal::sql::kUpdateStepStatesAndCounters,
       {runs_array, "{0}", "{started}", "{NULL}", "{\"\"}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}", "{0}", "{0}"}},
      {queue.set_visibility, {"{5}", "{2030-01-01 00:00:00+00}", "{t}"}},
      {queue.read_all,
       {"2030-01-01 00:00:00+00", "2030-01-01 00:01:00+00", "10", "plans"}},
      {queue.read_with_tasks_all,
       {"2030-01-01 00:00:00+00", "2030-01-01 00:01:00+00", "10", "plans"}},
      {queue.lookup, {"5"}},
      {postgres_internal::sql::kCountRuns, {"another_flow"}},
  };
  absl::StatusOr<Session> session = Session::Open(db->url());
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(
      session->Execute("SET plan_cache_mode = force_custom_plan", "set").ok());
  for (const Statement& statement : statements) {
    const std::string text =
        PlanText(*session, statement.sql, statement.params);
    for (const char* table : {"runs", "step_states", "tasks", "q_plans"}) {
      EXPECT_THAT(text,
                  ::testing::Not(HasSubstr(StrCat("Seq Scan on ", table))))
          << statement.sql << "\n"
          << text;
    }
  }
}

// Stall recovery reads every registered queue's table: one dropped by hand
// (not through Sluice) is left out instead of failing the whole sweep.
TEST_F(PostgresBackendTest, FindStalledTasks_SkipsAQueueWhoseTableIsGone) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<Backend> backend = Open(db->url());
  ASSERT_NE(backend, nullptr);
  CreateQueues(*backend, {"kept", "gone"});
  Execute(db->url(), "DROP TABLE pgmq.q_gone");
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend->Begin();
  ASSERT_TRUE(tx.ok());
  absl::StatusOr<std::vector<TaskRecord>> stalled = (*tx)->FindStalledTasks(
      {.now = kT0, .messages_visible_by = kT0, .limit = 10}, Fields::kAll);
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  EXPECT_THAT(*stalled, IsEmpty());
}

// --- Wake-ups ----------------------------------------------------------------

TEST_F(PostgresBackendTest, WatchQueue_IsPokedWhenAVisibleMessageCommits) {
  std::unique_ptr<TestDatabase> db = Database();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<Backend> backend = Open(db->url());
  ASSERT_NE(backend, nullptr);
  CreateQueues(*backend, {"wake"});
  std::atomic<int> pokes{0};
  std::unique_ptr<QueueWatch> watch =
      backend->WatchQueue("wake", [&pokes] { ++pokes; });
  ASSERT_NE(watch, nullptr);
  // The first poke comes once LISTEN is in place.
  for (int i = 0; i < 100 && pokes.load() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GT(pokes.load(), 0);
  const int before = pokes.load();

  // Another backend (another process, as far as Postgres knows) sends.
  std::unique_ptr<Backend> sender = Open(db->url());
  ASSERT_NE(sender, nullptr);
  absl::StatusOr<std::unique_ptr<Transaction>> tx = sender->Begin();
  ASSERT_TRUE(tx.ok());
  std::vector<OutgoingMessage> messages = {{J("1"), kT0}};
  ASSERT_TRUE((*tx)->SendMessages("wake", messages, kT0).ok());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(pokes.load(), before) << "poked before the commit";
  ASSERT_TRUE((*tx)->Commit().ok());
  for (int i = 0; i < 250 && pokes.load() == before; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(pokes.load(), before);
  watch.reset();
}

}  // namespace
}  // namespace sluice::testing
