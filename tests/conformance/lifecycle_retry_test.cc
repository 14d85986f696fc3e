// Releasing claimed tasks without using an attempt, and RetryRun: a failed
// or cancelled run resumes with a fresh budget for what did not complete.
#include "lifecycle_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LifecycleRetry : public Lifecycle {
 protected:
  absl::Status Retry(const RunId& run) { return engine().RetryRun(run); }
};

TEST_P(LifecycleRetry, Release_KeepsTheBudgetAndFencesTheOldClaim) {
  Flow flow = OneStep("release_budget", /*max_attempts=*/2);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> first = Claim(flow);
  Release(first);
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(t.status, TaskStatus::kQueued);
  EXPECT_EQ(t.attempts, 1);
  EXPECT_EQ(t.budget_start, 1);
  EXPECT_LE(MessageOf(t)->message.visible_at, clock().Now());
  // The released claim's late result is stale.
  EXPECT_THAT(
      FinishOnly({{first[0].key, first[0].attempt, J("1")}}).dispositions,
      ElementsAre(ResultDisposition::kStale));
  // Two attempts remain: one retry, then the final failure.
  ClaimedTask second = One(flow);
  EXPECT_EQ(second.attempt, 2);
  EXPECT_EQ(second.max_attempts, 3);  // the attempt number the budget ends at
  Fail(second, absl::UnavailableError("once"));
  Fail(One(flow), absl::UnavailableError("twice"));
  EXPECT_THAT(Ledger(run), ElementsAre("released@1", "retried@2", "failed@3"));
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
}

TEST_P(LifecycleRetry, Release_OfACancelRequestedTask_CancelsIt) {
  Flow flow = OneStep("release_cancelled");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_TRUE(engine().CancelRun(run).ok());
  Release(claimed);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kCancelled);
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
}

TEST_P(LifecycleRetry, Release_StaleLeases_AreSkipped) {
  Flow flow = OneStep("release_stale");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  Complete(task, J("1"));
  Release({task});
  ClaimedTask unknown = task;
  unknown.key.run_id = RunId::Random();
  Release({unknown});
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kCompleted);
  EXPECT_THAT(Ledger(run), ElementsAre("completed@1"));
  EXPECT_EQ(engine().ReleaseTasks(std::vector<Lease>{{task.key, 0}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(LifecycleRetry, FailedJob_RunsAgainWithAFreshBudget) {
  Flow flow = OneStep("retry_failed", /*max_attempts=*/2);
  Deploy(flow);
  RunId run = Start(flow, J("{\"n\":1}"));
  Fail(One(flow), absl::InternalError("a"));
  Fail(One(flow), absl::InternalError("b"));
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  ASSERT_TRUE(Retry(run).ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kStarted);
  EXPECT_FALSE(view.run.finished_at.has_value());
  EXPECT_EQ(view.run.error, "");
  TaskRecord t = TaskOf(run, "work");
  EXPECT_EQ(t.status, TaskStatus::kQueued);
  EXPECT_EQ(t.budget_start, 2);
  EXPECT_EQ(t.error, "");
  // Two fresh attempts: 3 and 4.
  ClaimedTask again = One(flow);
  EXPECT_EQ(again.attempt, 3);
  EXPECT_EQ(again.input, J("{\"run\":{\"n\":1}}"));
  Fail(again, absl::InternalError("c"));
  Complete(One(flow), J("\"ok\""));
  view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_THAT(Ledger(run),
              ElementsAre("retried@1", "failed@2", "retried@3", "completed@4"));
}

TEST_P(LifecycleRetry, CancelledJob_RunsAgain) {
  Flow flow = OneStep("retry_cancelled");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(engine().CancelRun(run).ok());
  ASSERT_TRUE(Retry(run).ok());
  Complete(One(flow), J("1"));
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(LifecycleRetry, Flow_CompletedStepsKeepTheirOutputs) {
  Flow flow("retry_chain", {.max_attempts = 1});
  flow.Step("a", Echo())
      .Step("b", {.depends_on = {"a"}}, Echo())
      .Step("c", {.depends_on = {"b"}}, Returns(J("\"c\"")));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Complete(One(flow), J("\"from a\""));
  ClaimedTask b = One(flow);
  Fail(b, absl::InternalError("b broke"));
  RunView failed = View(run);
  ASSERT_EQ(failed.run.status, RunStatus::kFailed);
  EXPECT_EQ(StepOf(failed, "c").status, StepStatus::kCancelled);
  ASSERT_TRUE(Retry(run).ok());
  RunView reopened = View(run);
  EXPECT_EQ(StepOf(reopened, "a").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(reopened, "b").status, StepStatus::kStarted);
  EXPECT_EQ(StepOf(reopened, "c").status, StepStatus::kCreated);
  ClaimedTask b_again = One(flow);
  EXPECT_EQ(b_again.step_slug, "b");
  EXPECT_EQ(b_again.input, J("{\"run\":{},\"a\":\"from a\"}"));
  Complete(b_again, J("\"b\""));
  EXPECT_EQ(Drive(flow), 1);  // c
  RunView done = View(run);
  EXPECT_EQ(done.run.status, RunStatus::kCompleted);
  EXPECT_EQ(done.run.output, J("{\"c\":\"c\"}"));
  EXPECT_EQ(StepOf(done, "a").output, J("\"from a\""));
}

TEST_P(LifecycleRetry, Map_OnlyTasksThatDidNotCompleteRunAgain) {
  Flow flow("retry_map", {.max_attempts = 1});
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[10,20,30]"));
  std::vector<ClaimedTask> tasks = Claim(flow);
  ASSERT_EQ(tasks.size(), 3u);
  Complete(tasks[0], J("10"));
  Fail(tasks[1], absl::InternalError("no"));  // fails the run; [2] cancelled
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  ASSERT_TRUE(Retry(run).ok());
  EXPECT_EQ(StepOf(View(run), "each").remaining_tasks, 2);
  std::vector<ClaimedTask> again = Claim(flow);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].key.task_index, 1);
  EXPECT_EQ(again[1].key.task_index, 2);
  Complete(again[0], J("21"));
  Complete(again[1], J("31"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "each").output, J("[10,21,31]"));
}

TEST_P(LifecycleRetry, CancelRequestedFlow_ResumesTheStepsItNeverStarted) {
  Flow flow("retry_after_request");
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Returns(J("2")));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask a = One(flow);
  ASSERT_TRUE(engine().CancelRun(run).ok());
  Complete(a, J("1"));
  ASSERT_EQ(View(run).run.status, RunStatus::kCancelled);
  ASSERT_TRUE(Retry(run).ok());
  EXPECT_FALSE(View(run).run.cancel_requested);
  EXPECT_EQ(Drive(flow), 1);  // only b
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(LifecycleRetry, StallBudget_IsFreshAfterRetry) {
  EngineOptions options = DefaultOptions();
  options.stall_budget = 0;
  UseEngine(backend(), options);
  Flow flow = OneStep("retry_stalls", /*max_attempts=*/5);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  ASSERT_TRUE(Retry(run).ok());
  EXPECT_EQ(TaskOf(run, "work").requeued_count, 0);
  Complete(One(flow), J("1"));
  EXPECT_THAT(Ledger(run), ElementsAre("failed@1", "completed@2"));
}

TEST_P(LifecycleRetry, NotRetryable_FailedPrecondition_Unknown_NotFound) {
  Flow flow = OneStep("retry_refused");
  Deploy(flow);
  RunId running = Start(flow, J("1"));
  absl::Status started = Retry(running);
  EXPECT_EQ(started.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(started.message()), HasSubstr("is started"));
  Complete(One(flow), J("1"));
  EXPECT_EQ(Retry(running).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(View(running).run.status, RunStatus::kCompleted);
  EXPECT_EQ(Retry(RunId::Random()).code(), absl::StatusCode::kNotFound);
}

SLUICE_CONFORMANCE_SUITE(LifecycleRetry);

}  // namespace
}  // namespace sluice::testing
