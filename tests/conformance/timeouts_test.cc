// Leases: one effective timeout for claim, heartbeat and stall recovery.
#include "harness.h"
#include "result_recorder.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Timeouts : public Conformance {};

// Default grace periods: claim 2 s, recovery 30 s.
Flow Timed(std::string slug, absl::Duration flow_timeout,
           std::optional<absl::Duration> step_timeout = std::nullopt,
           int max_attempts = 5) {
  Flow flow(std::move(slug), {.max_attempts = max_attempts,
                              .base_delay = absl::ZeroDuration(),
                              .timeout = flow_timeout});
  flow.Step("work", {.timeout = step_timeout}, Echo());
  return flow;
}

TEST_P(Timeouts, Heartbeat_ExtendsVisibilityAndTheStallDeadline) {
  Flow flow = Timed("heartbeat", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = Claim(flow)[0];
  clock().Advance(absl::Seconds(8));
  absl::StatusOr<std::vector<LeaseState>> owned =
      engine().ExtendLeases(std::vector<Lease>{{task.key, task.attempt}});
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ((*owned)[0], LeaseState::kOwned);
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(MessageOf(t)->message.visible_at,
            clock().Now() + absl::Seconds(12));
  EXPECT_EQ(t.stall_at, clock().Now() + absl::Seconds(40));
  // Past the original deadline, nothing can take it.
  clock().Advance(absl::Seconds(35));
  EXPECT_TRUE(Claim(flow).empty());
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 0);
}

TEST_P(Timeouts, ExtendLeases_ReportsTasksTheAttemptNoLongerOwns) {
  Flow flow = Timed("lost_lease", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = Claim(flow)[0];
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  absl::StatusOr<std::vector<LeaseState>> owned =
      engine().ExtendLeases(std::vector<Lease>{
          {task.key, task.attempt}, {TaskKey{RunId::Random(), 0, 0}, 1}});
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ((*owned)[0], LeaseState::kLost);
  EXPECT_EQ((*owned)[1], LeaseState::kLost);
}

TEST_P(Timeouts, StalledTask_IsRequeuedAfterTimeoutPlusGrace_NotBefore) {
  Flow flow = Timed("stall", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  clock().Advance(absl::Seconds(40));  // exactly at the deadline: not yet
  absl::StatusOr<int> early = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(*early, 0);
  clock().Advance(absl::Seconds(1));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 1);
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(t.status, TaskStatus::kQueued);
  EXPECT_EQ(t.requeued_count, 1);
  EXPECT_EQ(t.attempts, 1);  // the next claim consumes the next attempt
  EXPECT_LE(MessageOf(t)->message.visible_at, clock().Now());
  std::vector<ClaimedTask> again = Claim(flow);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 2);
  Complete(again[0], J("1"));
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

// Claims that read the message of a task still started hide it again, the
// last one past the stall time; stall recovery still finds the task (the
// lease rule of lease.h, which the Postgres backend's search relies on).
TEST_P(Timeouts, StalledTask_ReadAgainByClaims_IsStillRecovered) {
  Flow flow = Timed("reread", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  const absl::Time claimed_at = clock().Now();
  ASSERT_EQ(Claim(flow).size(), 1u);
  clock().Advance(absl::Seconds(13));  // visible again (10 s + 2 s)
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(MessageOf(TaskOf(run, "work"))->message.visible_at,
            claimed_at + absl::Seconds(40));
  clock().Advance(absl::Seconds(28));  // stalled, and visible again
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(MessageOf(TaskOf(run, "work"))->message.visible_at,
            clock().Now() + absl::Seconds(2));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 1);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kQueued);
  std::vector<ClaimedTask> again = Claim(flow);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt, 2);
}

TEST_P(Timeouts, StallRecovery_UsesTheStepTimeoutNotTheFlowTimeout) {
  Flow flow = Timed("step_stall", absl::Seconds(600), absl::Seconds(5));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  clock().Advance(absl::Seconds(36));  // 5 s + 30 s grace, and a bit
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 1);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kQueued);
}

TEST_P(Timeouts, TaskOverItsStallBudget_FailsThroughWhenExhausted) {
  Flow flow = Timed("stall_budget", absl::Seconds(10), std::nullopt, 100);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  for (int stall = 0; stall < 3; ++stall) {
    ASSERT_EQ(Claim(flow).size(), 1u) << stall;
    clock().Advance(absl::Seconds(41));
    ASSERT_EQ(*engine().RecoverStalledTasks(100), 1);
  }
  ASSERT_EQ(Claim(flow).size(), 1u);
  clock().Advance(absl::Seconds(41));
  ASSERT_EQ(*engine().RecoverStalledTasks(100), 1);
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(t.status, TaskStatus::kFailed);
  EXPECT_THAT(t.error, HasSubstr("over the stall budget of 3"));
  EXPECT_TRUE(MessageOf(t)->archived);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
}

TEST_P(Timeouts, StallDuringTheLastAttempt_FailsTheTask) {
  Flow flow("last_attempt", {.max_attempts = 1, .timeout = absl::Seconds(10)});
  flow.Step("work", {.when_exhausted = Policy::kSkip}, Echo())
      .Step("after", {.depends_on = {"work"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  clock().Advance(absl::Seconds(41));
  ASSERT_EQ(*engine().RecoverStalledTasks(100), 1);
  RunView view = View(run);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kFailed);
  EXPECT_THAT(TaskOf(run, "work").error, HasSubstr("attempt 1 of 1"));
  EXPECT_EQ(StepOf(view, "work").status, StepStatus::kSkipped);
  EXPECT_EQ(StepOf(view, "after").status, StepStatus::kStarted);
}

TEST_P(Timeouts, LateResultAfterStallRecovery_IsStaleAndKeepsTheMessage) {
  Flow flow = Timed("late_after_stall", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask first = Claim(flow)[0];
  clock().Advance(absl::Seconds(41));
  ASSERT_EQ(*engine().RecoverStalledTasks(100), 1);
  EXPECT_EQ(Complete(first, J("\"late\"")).dispositions[0],
            ResultDisposition::kStale);
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(t.status, TaskStatus::kQueued);
  EXPECT_FALSE(MessageOf(t)->archived);  // the next attempt still needs it
  EXPECT_EQ(Claim(flow).size(), 1u);
}

TEST_P(Timeouts, RecoveryLimits_AreValidated) {
  EXPECT_EQ(engine().RecoverStalledTasks(0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().ApplyStaleReports(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(Timeouts, BothAttemptsOfATaskInOneBatch_TheOlderIsStaleTheBatchStored) {
  // A worker whose lease lapsed can claim the task again and hold both
  // attempts' results in one batch.
  Flow flow = Timed("two_attempts", absl::Seconds(10));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  RunId other = Start(flow, J("{}"));
  std::vector<ClaimedTask> first = Claim(flow);
  ASSERT_EQ(first.size(), 2u);
  const ClaimedTask& lapsed = first[0].key.run_id == run ? first[0] : first[1];
  clock().Advance(absl::Seconds(41));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(*recovered, 2);
  std::vector<ClaimedTask> again = Claim(flow);
  ASSERT_EQ(again.size(), 2u);
  const ClaimedTask& retaken = again[0].key.run_id == run ? again[0] : again[1];
  ASSERT_EQ(retaken.attempt, 2);
  const ClaimedTask& other_now =
      again[0].key.run_id == run ? again[1] : again[0];

  RecordedResults recorded =
      RecordResults(engine(),
                    {{lapsed.key, 1, J(R"("late")")},
                     {retaken.key, 2, J(R"("fresh")")},
                     {other_now.key, other_now.attempt, J(R"("other")")}},
                    "w1");
  EXPECT_TRUE(recorded.retry.empty());
  EXPECT_TRUE(recorded.dropped.empty());
  ASSERT_EQ(recorded.recorded.size(), 3u);
  for (const RecordedResults::Recorded& r : recorded.recorded) {
    EXPECT_FALSE(r.replaced);
    EXPECT_EQ(r.disposition, r.attempt == 1 ? ResultDisposition::kStale
                                            : ResultDisposition::kCompleted)
        << r.attempt;
  }
  EXPECT_EQ(*TaskOf(run, "work").output, J(R"("fresh")"));
  EXPECT_EQ(View(other).run.status, RunStatus::kCompleted);
  // Stored as one batch, not one result at a time.
  for (const std::string& line : LogLines()) {
    EXPECT_THAT(line, Not(HasSubstr("one at a time"))) << line;
  }
}

SLUICE_CONFORMANCE_SUITE(Timeouts);

}  // namespace
}  // namespace sluice::testing
