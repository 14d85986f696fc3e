// The attempts ledger: one entry per ended attempt, for every outcome, in
// the transaction of the transition that ended it; a worker's completion is
// derived from its task row when the ledger is read (decision 0067).
#include "lifecycle_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class LifecycleLedger : public Lifecycle {};

TEST_P(LifecycleLedger, Completed_OneEntryWithWorkerAndTimes) {
  Flow flow = OneStep("ledger_done");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  absl::Time claimed_at = clock().Now();
  ClaimedTask task = One(flow);
  clock().Advance(absl::Seconds(3));
  Complete(task, J("1"));
  RunView view = View(run);
  ASSERT_EQ(view.attempts.size(), 1u);
  const AttemptRecord& a = view.attempts[0];
  EXPECT_EQ(a.task, task.key);
  EXPECT_EQ(a.attempt, 1);
  EXPECT_EQ(a.worker_id, "test-worker");
  EXPECT_EQ(a.started_at, claimed_at);
  EXPECT_EQ(a.finished_at, clock().Now());
  EXPECT_EQ(a.outcome, AttemptOutcome::kCompleted);
  EXPECT_EQ(a.error, "");
}

TEST_P(LifecycleLedger, RetriedThenCompleted_KeepsTheErrorOfEachFailure) {
  Flow flow = OneStep("ledger_retry");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(One(flow), absl::UnavailableError("flaky once"));
  Complete(One(flow), J("1"));
  RunView view = View(run);
  EXPECT_THAT(Ledger(run), ElementsAre("retried@1", "completed@2"));
  EXPECT_EQ(view.attempts[0].error, "flaky once");
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
}

TEST_P(LifecycleLedger, Completions_DerivedInOrder_NotStored) {
  Flow flow("ledger_derived");
  flow.Map("each", {.max_attempts = 3}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  std::vector<ClaimedTask> first = Claim(flow, 3);
  ASSERT_EQ(first.size(), 3u);
  Complete(first[0], J("1"));
  Fail(first[1], absl::UnavailableError("flaky"));
  Complete(first[2], J("3"));
  clock().Advance(absl::Hours(1));  // past the retry's backoff
  Complete(One(flow), J("2"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  std::vector<std::string> entries;
  for (const AttemptRecord& a : view.attempts) {
    entries.push_back(
        StrCat(a.task.task_index, ":", ToString(a.outcome), "@", a.attempt));
  }
  EXPECT_THAT(entries, ElementsAre("0:completed@1", "1:retried@1",
                                   "1:completed@2", "2:completed@1"));
  // Stored: only the retry; each completion is its task row.
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  absl::StatusOr<std::vector<AttemptRecord>> stored = (*tx)->ListAttempts(run);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].outcome, AttemptOutcome::kRetried);
}

TEST_P(LifecycleLedger, AttemptsRunOut_LastEntryIsFailed) {
  Flow flow = OneStep("ledger_fail", /*max_attempts=*/2);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(One(flow), absl::InternalError("boom 1"));
  Fail(One(flow), absl::InternalError("boom 2"));
  RunView view = View(run);
  EXPECT_THAT(Ledger(run), ElementsAre("retried@1", "failed@2"));
  EXPECT_EQ(view.attempts[1].error, "boom 2");
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
}

TEST_P(LifecycleLedger, NonRetryable_FailsAtTheFirstAttempt) {
  Flow flow = OneStep("ledger_final");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(One(flow), NonRetryable("bad input"));
  EXPECT_THAT(Ledger(run), ElementsAre("failed@1"));
  EXPECT_EQ(View(run).attempts[0].error, "bad input");
}

TEST_P(LifecycleLedger, TypeViolation_IsAFailedAttempt) {
  Flow flow("ledger_type");
  flow.Step("list", Returns(J("{}")))
      .Map("each", {.depends_on = {"list"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Complete(One(flow), J("{\"not\":\"an array\"}"));
  RunView view = View(run);
  EXPECT_THAT(Ledger(run), ElementsAre("failed@1"));
  EXPECT_THAT(view.attempts[0].error, HasSubstr("TYPE_VIOLATION"));
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
}

TEST_P(LifecycleLedger, Stalled_ThenCompletedByTheNextAttempt) {
  Flow flow = OneStep("ledger_stall");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  Complete(One(flow), J("1"));
  EXPECT_THAT(Ledger(run), ElementsAre("stalled@1", "completed@2"));
}

TEST_P(LifecycleLedger, StallBudgetExhausted_FailsWithTheReasonInTheLedger) {
  EngineOptions options = DefaultOptions();
  options.stall_budget = 1;
  UseEngine(backend(), options);
  Flow flow = OneStep("ledger_stall_budget", /*max_attempts=*/10);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  ASSERT_EQ(Claim(flow).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  RunView view = View(run);
  EXPECT_THAT(Ledger(run), ElementsAre("stalled@1", "failed@2"));
  EXPECT_THAT(view.attempts[1].error, HasSubstr("over the stall budget of 1"));
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kFailed);
}

TEST_P(LifecycleLedger, StalledOnTheLastAttempt_FailsWithTheReason) {
  Flow flow = OneStep("ledger_stall_last", /*max_attempts=*/1);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  RunView view = View(run);
  EXPECT_THAT(Ledger(run), ElementsAre("failed@1"));
  EXPECT_THAT(view.attempts[0].error, HasSubstr("during attempt 1 of 1"));
}

TEST_P(LifecycleLedger, ImmediateCancel_EndsStartedAttemptsOnly) {
  Flow flow("ledger_cancel");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  ClaimedTask started = Claim(flow, 1)[0];
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  RunView view = View(run);
  ASSERT_EQ(view.attempts.size(), 1u);  // the queued task had no attempt
  EXPECT_EQ(view.attempts[0].task, started.key);
  EXPECT_EQ(view.attempts[0].outcome, AttemptOutcome::kCancelled);
  // Its late result is stale and adds nothing.
  EXPECT_EQ(Complete(started, J("1")).dispositions[0],
            ResultDisposition::kStale);
  EXPECT_EQ(View(run).attempts.size(), 1u);
}

TEST_P(LifecycleLedger, FailedRunCancelsSiblings_TheirAttemptsAreCancelled) {
  Flow flow("ledger_siblings", {.max_attempts = 1});
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> tasks = Claim(flow);
  ASSERT_EQ(tasks.size(), 2u);
  Fail(tasks[0], absl::InternalError("no"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(Ledger(run),
              ::testing::UnorderedElementsAre("failed@1", "cancelled@1"));
}

TEST_P(LifecycleLedger, NoAttemptYet_EmptyLedger) {
  Flow flow = OneStep("ledger_empty");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_THAT(View(run).attempts, IsEmpty());
}

TEST_P(LifecycleLedger, ResultForAMissingTask_IsNotFoundNotStale) {
  Flow flow = OneStep("ledger_missing");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  FinishOutcome outcome =
      FinishOnly({TaskResult{TaskKey{RunId::Random(), 0, 0}, 1, J("1")},
                  TaskResult{task.key, task.attempt + 1, J("1")}});
  EXPECT_THAT(outcome.dispositions, ElementsAre(ResultDisposition::kNotFound,
                                                ResultDisposition::kStale));
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kStarted);
  EXPECT_THAT(View(run).attempts, IsEmpty());
}

SLUICE_CONFORMANCE_SUITE(LifecycleLedger);

}  // namespace
}  // namespace sluice::testing
