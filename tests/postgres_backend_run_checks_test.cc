// Migration 0009: step states, tasks and attempts carry no foreign keys to
// runs (decision 0050). The upgrade drops them and keeps the data, and
// DeleteRuns still leaves nothing behind when another transaction adds a
// run's rows under its lock at the same time. The one-statement task write
// (decision 0052) checks its runs as InsertTasks does, and rows of runs
// the same transaction inserted skip the check (decision 0082). A task
// update that waited for another writes the version that one committed.
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_session.h"
#include "postgres_jobs_fixture.h"
#include "sluice/internal/one_trip_task_writes.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kForeignKeysToRuns[] =
    "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confrelid = "
    "'sluice.runs'::regclass";

TEST(PostgresRunChecksUpgradeTest,
     Version8Database_Migrates_DropsKeysKeepsRows) {
  if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 8).ok());
  SqlSession sql(url);
  EXPECT_EQ(sql.Value(kForeignKeysToRuns), "3");
  sql.Script(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) VALUES "
      "('01900000-0000-7000-8000-000000000001', 'jobs', 'started', 1, '', "
      "now(), '{}'); "
      "INSERT INTO sluice.step_states (run_id, step_index, step_slug, status, "
      "remaining_deps, error, skip_reason) VALUES "
      "('01900000-0000-7000-8000-000000000001', 0, 's', 'created', 0, '', "
      "'')");

  ASSERT_TRUE(MigratePostgres(url).ok());
  EXPECT_EQ(sql.Value(kForeignKeysToRuns), "0");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.step_states"), "1");
}

class PostgresRunChecksTest : public PostgresJobsTest {};

// Counts sessions of this database that wait for a lock, until `want` or a
// deadline passes.
bool WaitForLockWaiters(const std::string& url, int want) {
  SqlSession sql(url);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (sql.Value(
            "SELECT count(*) FROM pg_stat_activity WHERE "
            "wait_event_type = 'Lock' AND datname = current_database()") ==
        std::to_string(want)) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(5));  // between polls of the condition
  }
  return false;
}

TEST_F(PostgresRunChecksTest,
       DeleteRuns_WhileARunHolderAddsATask_WaitsAndDeletesItToo) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());

  // A holds the run, as the engine does when it adds tasks to a run.
  std::unique_ptr<Transaction> holder = Begin();
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder
                  ->GetRuns(std::vector{RunNo(1)}, LockMode::kForUpdate,
                            Fields::kNoPayloads)
                  .ok());
  std::vector<TaskRecord> tasks = {MakeTask(1, 0)};
  ASSERT_TRUE(holder->InsertTasks(std::span(tasks)).ok());

  absl::StatusOr<int> deleted;
  absl::Status committed;
  std::thread deleter([&] {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return;
    deleted = tx->DeleteRuns(std::vector{RunNo(1)});
    committed = tx->Commit();
  });
  const bool waited = WaitForLockWaiters(db_->url(), 1);
  ASSERT_TRUE(holder->Commit().ok());
  deleter.join();
  ASSERT_TRUE(waited) << "DeleteRuns never waited for the run's holder";

  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_TRUE(committed.ok()) << committed;
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.tasks"), "0");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.runs"), "0");
}

// A compare-and-set that waits for another transaction's update of its
// task (a heartbeat's lease extension, a cancel request) must judge and
// write the version that transaction committed, which its own statement's
// snapshot predates (decision 0059).
TEST_F(PostgresRunChecksTest,
       UpdateTasks_AfterWaitingForAnotherUpdateOfTheTask_AppliesToItsResult) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  const TaskRecord queued = MakeTask(1, 0);
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    std::vector<TaskRecord> tasks = {queued};
    ASSERT_TRUE(tx->InsertTasks(std::span(tasks)).ok());
    ASSERT_TRUE(tx->Commit().ok());
  }

  // A holds the task: it rewrites it with the same status and attempts.
  std::unique_ptr<Transaction> holder = Begin();
  ASSERT_NE(holder, nullptr);
  TaskRecord touched = queued;
  touched.worker_id = "holder";
  std::vector<TaskUpdate> touch = {
      {.task = touched, .expected_status = TaskStatus::kQueued}};
  ASSERT_EQ(ValueOf(holder->UpdateTasks(touch)), std::vector<bool>{true});

  TaskRecord started = queued;
  started.status = TaskStatus::kStarted;
  started.attempts = 1;
  started.worker_id = "claimer";
  absl::StatusOr<std::vector<bool>> applied;
  absl::Status committed;
  std::thread claimer([&] {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return;
    std::vector<TaskUpdate> claim = {
        {.task = started, .expected_status = TaskStatus::kQueued}};
    applied = tx->UpdateTasks(claim);
    committed = tx->Commit();
  });
  const bool waited = WaitForLockWaiters(db_->url(), 1);
  ASSERT_TRUE(holder->Commit().ok());
  claimer.join();
  ASSERT_TRUE(waited) << "the update never waited for the task's holder";

  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(*applied, std::vector<bool>{true});
  EXPECT_TRUE(committed.ok()) << committed;
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT status || ' ' || attempts || ' ' || worker_id "
                      "FROM sluice.tasks"),
            "started 1 claimer");
}

// One statement sends the messages and inserts the tasks (decision 0052):
// each task takes the id of the message beside it.
TEST_F(PostgresRunChecksTest,
       SendMessagesAndInsertTasks_PairsEachTaskWithItsMessage) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  auto* one_trip = dynamic_cast<internal::OneTripTaskWrites*>(tx.get());
  ASSERT_NE(one_trip, nullptr);
  std::vector<TaskRecord> tasks;
  std::vector<OutgoingMessage> messages;
  for (int i = 0; i < 3; ++i) {
    tasks.push_back(MakeTask(1, i));
    messages.push_back({J(StrCat(R"({"task":)", i, "}")), kJobsT0});
  }
  ASSERT_TRUE(
      one_trip->SendMessagesAndInsertTasks("jobs_q", messages, tasks, kJobsT0)
          .ok());
  ASSERT_TRUE(tx->Commit().ok());
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT string_agg((q.message ->> 'task') || '=' || "
                      "t.task_index, ',' ORDER BY t.task_index) FROM "
                      "sluice.tasks AS t JOIN pgmq.q_jobs_q AS q ON q.msg_id "
                      "= t.message_id"),
            "0=0,1=1,2=2");
}

TEST_F(PostgresRunChecksTest,
       SendMessagesAndInsertTasks_ForAMissingRun_FailsTheCommitSendsNothing) {
  CreateQueue("jobs_q");
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  auto* one_trip = dynamic_cast<internal::OneTripTaskWrites*>(tx.get());
  ASSERT_NE(one_trip, nullptr);
  std::vector<TaskRecord> tasks = {MakeTask(7, 0)};
  std::vector<OutgoingMessage> messages = {{J("{}"), kJobsT0}};
  ASSERT_TRUE(
      one_trip->SendMessagesAndInsertTasks("jobs_q", messages, tasks, kJobsT0)
          .ok());
  absl::Status committed = tx->Commit();
  EXPECT_EQ(committed.code(), absl::StatusCode::kNotFound) << committed;
  EXPECT_THAT(committed.message(), HasSubstr("does not exist"));
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT count(*) FROM pgmq.q_jobs_q"), "0");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.tasks"), "0");
}

// The three inserts that check their runs, each of a row of run `here`,
// which `tx` inserts first. The insert numbered `mixed` (0 tasks, 1 step
// states, 2 tasks with their messages) also names run 1, inserted earlier.
// Returns the commit's status.
constexpr int kNoneMixed = -1;
absl::Status InsertRowsOf(Transaction& tx, uint64_t here, int mixed) {
  std::vector<RunRecord> runs = {MakeRun(here)};
  SLUICE_RETURN_IF_ERROR(tx.InsertRuns(std::span(runs)));
  auto runs_of = [&](int insert) {
    return insert == mixed ? std::vector<uint64_t>{here, 1}
                           : std::vector<uint64_t>{here};
  };
  std::vector<TaskRecord> tasks, sent;
  std::vector<OutgoingMessage> messages;
  std::vector<StepStateRecord> steps;
  for (uint64_t run : runs_of(0)) tasks.push_back(MakeTask(run, 0));
  for (uint64_t run : runs_of(1)) {
    StepStateRecord step;
    step.run_id = RunNo(run);
    step.step_slug = "job";
    steps.push_back(step);
  }
  for (uint64_t run : runs_of(2)) {
    sent.push_back(MakeTask(run, 1));
    messages.push_back({J("{}"), kJobsT0});
  }
  SLUICE_RETURN_IF_ERROR(tx.InsertTasks(std::span(tasks)));
  SLUICE_RETURN_IF_ERROR(tx.InsertStepStates(std::span(steps)));
  auto* one_trip = dynamic_cast<internal::OneTripTaskWrites*>(&tx);
  if (one_trip == nullptr) return absl::InternalError("no one-trip writes");
  SLUICE_RETURN_IF_ERROR(
      one_trip->SendMessagesAndInsertTasks("jobs_q", messages, sent, kJobsT0));
  return tx.Commit();
}

// No other transaction can see a run before its insert commits, so rows of
// runs the same transaction inserted are not checked (decision 0082). With
// the check's function dropped, only such rows still insert; each insert
// whose batch also names a run inserted earlier is checked.
TEST_F(PostgresRunChecksTest, Inserts_OfRunsInsertedHere_SkipTheRunCheck) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  SqlSession sql(db_->url());
  sql.Script("DROP FUNCTION sluice.require_found(text, text)");

  std::unique_ptr<Transaction> fresh = Begin();
  ASSERT_NE(fresh, nullptr);
  absl::Status committed = InsertRowsOf(*fresh, 2, kNoneMixed);
  EXPECT_TRUE(committed.ok()) << committed;
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.tasks"), "2");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.step_states"), "1");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM pgmq.q_jobs_q"), "1");

  for (int mixed : {0, 1, 2}) {
    SCOPED_TRACE(StrCat("insert ", mixed, " names an earlier run"));
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    committed = InsertRowsOf(*tx, 3 + mixed, mixed);
    EXPECT_FALSE(committed.ok());
    EXPECT_THAT(committed.message(), HasSubstr("require_found"));
  }
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.runs"), "2");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.tasks"), "2");
}

}  // namespace
}  // namespace sluice::testing
