// Upgrading to migrations 0007, 0013 and 0015 (fillfactor on the hot
// tables): a database at version 6 with a run migrates, keeps its run, and
// its hot tables leave room on each page for HOT updates; a queue that
// existed at version 14, and one created after, leave room on each page for
// their claimed messages. Upgrading to 0020 (the tasks rewritten with their
// changing columns last) keeps every task's columns and its child links, and
// a backend's connections keep working across it.
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "pg_embedded_sql.h"
#include "pg_session.h"
#include "postgres_jobs_fixture.h"
#include "sluice/internal/status_macros.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

class PostgresPerfUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }
};

std::string FillFactor(const std::string& url, const std::string& table) {
  return SqlSession(url)
      .Value(
          "SELECT coalesce(array_to_string(reloptions, ','), '') FROM "
          "pg_class WHERE oid = '" +
          table + "'::regclass")
      .value_or("<missing>");
}

TEST_F(PostgresPerfUpgradeTest, Version6Database_Migrates_KeepsRuns) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 6).ok());
  EXPECT_EQ(FillFactor(url, "sluice.step_states"), "");
  SqlSession(url).Script(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) VALUES "
      "('01900000-0000-7000-8000-000000000001', 'jobs', 'started', 1, '', "
      "now(), '{}')");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());
  EXPECT_EQ(FillFactor(url, "sluice.runs"), "fillfactor=70");
  EXPECT_EQ(FillFactor(url, "sluice.step_states"), "fillfactor=30");
  EXPECT_EQ(FillFactor(url, "sluice.tasks"), "fillfactor=40");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  std::optional<RunRecord> run = ValueOf(
      (*tx)->GetRuns(std::vector{RunNo(1)}, LockMode::kNone, Fields::kAll))[0];
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, RunStatus::kStarted);
  ASSERT_TRUE((*tx)->Commit().ok());
}

TEST_F(PostgresPerfUpgradeTest, Version14Queue_Migrates_LeavesRoomForClaims) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 14).ok());
  SqlSession(url).Script(
      "INSERT INTO sluice.queues (name, owner_flow, created_at) VALUES "
      "('old_q', '', now()); SELECT sluice.create_queue('old_q')");
  EXPECT_EQ(FillFactor(url, "pgmq.q_old_q"), "");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(FillFactor(url, "pgmq.q_old_q"), "fillfactor=50");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  ASSERT_TRUE(
      (*tx)->CreateQueue({.name = "new_q", .created_at = absl::Now()}).ok());
  ASSERT_TRUE((*tx)->Commit().ok());
  EXPECT_EQ(FillFactor(url, "pgmq.q_new_q"), "fillfactor=50");
  // The archive is written once per message and never updated.
  EXPECT_EQ(FillFactor(url, "pgmq.a_new_q"), "");
}

TEST_F(PostgresPerfUpgradeTest, Version19Tasks_Migrate_KeepColumnsAndLinks) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 19).ok());
  const std::string run = "'" + RunNo(1).ToString() + "'";
  SqlSession(url).Script(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) VALUES (" +
      run +
      ", 'jobs', 'started', 1, '', now(), '{}'); "
      "INSERT INTO sluice.tasks (run_id, step_index, task_index, flow_slug, "
      "status, attempts, error, queue_name, message_id, queued_at, "
      "started_at, finished_at, stall_at, requeued_count, worker_id, input, "
      "output, budget_start, cancel_requested, options) VALUES (" +
      run +
      ", 0, 3, 'jobs', 'waiting', 2, 'boom', 'jobs_q', 7, "
      "'2026-01-01T00:00:01Z', '2026-01-01T00:00:02Z', "
      "'2026-01-01T00:00:03Z', '2026-01-01T00:00:04Z', 5, 'w1', '{\"in\":1}', "
      "'{\"out\":2}', 1, true, '{\"timeout_ms\":9}'); "
      "INSERT INTO sluice.child_links (parent_run_id, parent_step, "
      "parent_task, child_index, child_store, child_run_id, status, error, "
      "cascaded, pending_since, spec) VALUES (" +
      run + ", 0, 3, 0, '', '" + RunNo(2).ToString() +
      "', 'pending', '', false, now(), '{}')");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(FillFactor(url, "sluice.tasks"), "fillfactor=40");
  SqlSession session(url);
  EXPECT_EQ(session
                .Value("SELECT string_agg(attname, ',' ORDER BY attnum) FROM "
                       "pg_attribute WHERE attrelid = 'sluice.tasks'::regclass "
                       "AND attnum > 10 AND NOT attisdropped")
                .value_or(""),
            "input,cancel_requested,worker_id,attempts,started_at,status,"
            "stall_at,finished_at,error,output");
  EXPECT_EQ(session
                .Value("SELECT concat_ws('|', flow_slug, queue_name, "
                       "message_id, requeued_count, budget_start, options, "
                       "input, cancel_requested, worker_id, attempts, "
                       "extract(epoch FROM started_at), status, "
                       "extract(epoch FROM stall_at), "
                       "extract(epoch FROM finished_at), error, output) "
                       "FROM sluice.tasks")
                .value_or(""),
            "jobs|jobs_q|7|5|1|{\"timeout_ms\":9}|{\"in\":1}|t|w1|2|"
            "1767225602.000000|waiting|1767225604.000000|1767225603.000000|"
            "boom|{\"out\":2}");
  EXPECT_EQ(session
                .Value("SELECT has_table_privilege('sluice_runtime', "
                       "'sluice.tasks', 'SELECT, INSERT, UPDATE, DELETE')")
                .value_or(""),
            "t");
  // The child link still names its parent task, through a foreign key
  // rebuilt on the new table.
  EXPECT_EQ(session
                .Value("SELECT count(*) FROM sluice.child_links AS l JOIN "
                       "sluice.tasks AS t ON t.run_id = l.parent_run_id "
                       "AND t.task_index = l.parent_task")
                .value_or(""),
            "1");
  EXPECT_EQ(session
                .Value("SELECT count(*) FROM pg_constraint WHERE confrelid = "
                       "'sluice.tasks'::regclass AND contype = 'f'")
                .value_or(""),
            "1");
}

// Starts the task with message `message_id` (queued, never attempted).
absl::Status StartTask(Transaction& tx, int64_t message_id) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<TaskRecord>> read,
      tx.GetTasksByMessage("jobs_q", {&message_id, 1}, Fields::kAll));
  if (read.size() != 1 || !read[0].has_value()) {
    return absl::NotFoundError("no task");
  }
  TaskUpdate start{.task = *read[0],
                   .expected_status = TaskStatus::kQueued,
                   .expected_attempts = 0};
  start.task.status = TaskStatus::kStarted;
  start.task.attempts = 1;
  start.task.started_at = At(1);
  start.task.worker_id = "w1";
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          tx.UpdateTasks({&start, 1}));
  return applied[0] ? absl::OkStatus() : absl::AbortedError("not applied");
}

// The rewrite replaces sluice.tasks under connections that have already
// run statements on the old table: they plan them again on the new one,
// whose columns they name.
TEST_F(PostgresJobsTest, TasksRewrite_KeepsOpenConnectionsWorking) {
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<TaskRecord> tasks = {MakeTask(1, 0), MakeTask(1, 1)};
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return StartTask(tx, tasks[0].message_id);
              }).ok());

  const postgres_internal::EmbeddedMigration& rewrite =
      postgres_internal::kEmbeddedMigrations[19];
  ASSERT_EQ(rewrite.version, 20);
  Execute(rewrite.sql);

  EXPECT_TRUE(InTransaction([&](Transaction& tx) {
                return StartTask(tx, tasks[1].message_id);
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  std::vector<TaskRecord> listed = ValueOf(tx->ListTasks(RunNo(1)));
  ASSERT_EQ(listed.size(), 2u);
  for (const TaskRecord& task : listed) {
    EXPECT_EQ(task.status, TaskStatus::kStarted);
    EXPECT_EQ(task.worker_id, "w1");
    EXPECT_EQ(task.input, J("1"));
  }
  EXPECT_TRUE(tx->Commit().ok());
}

}  // namespace
}  // namespace sluice::testing
