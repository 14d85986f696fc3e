// OneTripClaims::ClaimAndCommit on Postgres: a plain read is claimed on the
// server with the engine's lease; a read the engine must judge writes
// nothing; a task another transaction holds is lost, its message hidden
// only briefly. Skips when SLUICE_TEST_POSTGRES_URL is unset.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_jobs_fixture.h"
#include "sluice/internal/one_trip_claims.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Step 0 of flow "jobs", leased from At(10): stall at At(100), hidden until
// At(90).
const internal::ClaimableStep kJobsStep{.flow_slug = "jobs",
                                        .step_index = 0,
                                        .stall_at = At(100),
                                        .visible_until = At(90)};

class PostgresServerClaimTest : public PostgresJobsTest {
 protected:
  // `count` runs of flow "jobs", each with one queued task on "jobs_q" and
  // its message; returns the message ids.
  std::vector<int64_t> QueueTasks(int count) {
    CreateQueue("jobs_q");
    std::vector<RunRecord> runs;
    for (int i = 1; i <= count; ++i) runs.push_back(MakeRun(i));
    EXPECT_TRUE(Insert(runs).ok());
    std::vector<int64_t> ids = Send("jobs_q", std::vector<int>(count, 0));
    for (int i = 0; i < count; ++i) {
      TaskRecord task = MakeTask(i + 1, 0);
      task.message_id = ids[i];
      tasks_.push_back(task);
    }
    EXPECT_TRUE(InTransaction([&](Transaction& tx) {
                  return tx.InsertTasks(std::span(tasks_));
                }).ok());
    return ids;
  }

  absl::StatusOr<internal::ServerClaimed> Claim(
      std::span<const internal::ClaimableStep> steps) {
    std::unique_ptr<Transaction> tx = Begin();
    auto* one_trip = dynamic_cast<internal::OneTripClaims*>(tx.get());
    EXPECT_NE(one_trip, nullptr);
    if (one_trip == nullptr) return absl::InternalError("no capability");
    absl::StatusOr<internal::ServerClaimed> claimed =
        one_trip->ClaimAndCommit({.queue = "jobs_q",
                                  .now = At(10),
                                  .limit = 10,
                                  .worker_id = "w1",
                                  .steps = steps,
                                  .lost_visible_until = At(15),
                                  .read_next_visible = true});
    EXPECT_EQ(tx->Commit().code(), absl::StatusCode::kFailedPrecondition)
        << "the claim ends its transaction";
    return claimed;
  }

  TaskRecord Stored(const TaskRecord& task) {
    std::unique_ptr<Transaction> tx = Begin();
    std::vector<TaskKey> keys = {task.key};
    std::vector<std::optional<TaskRecord>> read =
        ValueOf(tx->GetTasks(keys, Fields::kAll));
    EXPECT_TRUE(read[0].has_value());
    return read[0].value_or(TaskRecord());
  }

  MessageRecord Message(int64_t id) {
    std::unique_ptr<Transaction> tx = Begin();
    std::optional<MessageLocation> location =
        ValueOf(tx->LookupMessage("jobs_q", id));
    EXPECT_TRUE(location.has_value());
    return location ? location->message : MessageRecord();
  }

  std::vector<TaskRecord> tasks_;
};

TEST_F(PostgresServerClaimTest, PlainRead_ClaimsEachTask_WithItsStepsLease) {
  std::vector<int64_t> ids = QueueTasks(2);

  internal::ServerClaimed claimed = ValueOf(Claim({&kJobsStep, 1}));

  ASSERT_TRUE(claimed.plain);
  EXPECT_THAT(claimed.message_ids, ElementsAreArray(ids));
  EXPECT_THAT(claimed.claimed, ElementsAre(true, true));
  ASSERT_EQ(claimed.tasks.size(), 2u);
  // As read, before the claim: the engine builds the handler's view.
  EXPECT_EQ(claimed.tasks[0].key, tasks_[0].key);
  EXPECT_EQ(claimed.tasks[0].status, TaskStatus::kQueued);
  EXPECT_EQ(claimed.tasks[0].attempts, 0);
  EXPECT_EQ(claimed.tasks[1].input, J("1"));
  // The claim hid the messages until At(90), the earliest one visible next.
  EXPECT_EQ(claimed.next_visible_at, At(90));
  for (size_t i = 0; i < ids.size(); ++i) {
    TaskRecord task = Stored(tasks_[i]);
    EXPECT_EQ(task.status, TaskStatus::kStarted);
    EXPECT_EQ(task.attempts, 1);
    EXPECT_EQ(task.started_at, At(10));
    EXPECT_EQ(task.stall_at, At(100));
    EXPECT_EQ(task.worker_id, "w1");
    MessageRecord message = Message(ids[i]);
    EXPECT_EQ(message.visible_at, At(90));
    EXPECT_EQ(message.read_count, 1);
  }
}

TEST_F(PostgresServerClaimTest, ReadTheEngineMustJudge_WritesNothing) {
  std::vector<int64_t> ids = QueueTasks(2);
  struct Case {
    std::string what;
    std::string sql;  // applied to the second task
    internal::ClaimableStep step = kJobsStep;
  };
  const std::vector<Case> cases = {
      {"a started task (a duplicate)", "status = 'started', attempts = 1"},
      {"a timeout override", R"(options = '{"timeout_ms": 5000}')"},
      {"a step not offered", "", {.flow_slug = "other", .step_index = 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (!c.sql.empty()) {
      Execute(StrCat("UPDATE sluice.tasks SET ", c.sql,
                     " WHERE message_id = ", ids[1]));
    }
    const TaskRecord before = Stored(tasks_[0]);

    internal::ServerClaimed claimed = ValueOf(Claim({&c.step, 1}));

    EXPECT_FALSE(claimed.plain);
    EXPECT_TRUE(claimed.message_ids.empty());
    TaskRecord after = Stored(tasks_[0]);
    EXPECT_EQ(after.status, TaskStatus::kQueued);
    EXPECT_EQ(after.attempts, before.attempts);
    for (int64_t id : ids) {
      MessageRecord message = Message(id);
      EXPECT_EQ(message.visible_at, kJobsT0);
      EXPECT_EQ(message.read_count, 0);
    }
    Execute(
        "UPDATE sluice.tasks SET status = 'queued', attempts = 0, options = "
        "NULL");
  }
}

TEST_F(PostgresServerClaimTest, TaskAnotherTransactionHolds_IsLostBriefly) {
  std::vector<int64_t> ids = QueueTasks(2);
  // Another transaction, on another thread, holds the first task's row (a
  // finish, say) until the claim is done; then it rolls back.
  absl::Notification held, release;
  std::thread holder([&] {
    std::unique_ptr<Transaction> tx = Begin();
    std::vector<TaskUpdate> hold = {{.task = tasks_[0],
                                     .expected_status = TaskStatus::kQueued,
                                     .expected_attempts = 0}};
    EXPECT_THAT(ValueOf(tx->UpdateTasks(std::span(hold))), ElementsAre(true));
    held.Notify();
    release.WaitForNotification();
  });
  held.WaitForNotification();

  internal::ServerClaimed claimed = ValueOf(Claim({&kJobsStep, 1}));

  release.Notify();
  holder.join();
  ASSERT_TRUE(claimed.plain);
  EXPECT_THAT(claimed.claimed, ElementsAre(false, true));
  EXPECT_EQ(Stored(tasks_[0]).status, TaskStatus::kQueued);
  EXPECT_EQ(Message(ids[0]).visible_at, At(15));
  EXPECT_EQ(Stored(tasks_[1]).status, TaskStatus::kStarted);
  EXPECT_EQ(Message(ids[1]).visible_at, At(90));
}

}  // namespace
}  // namespace sluice::testing
