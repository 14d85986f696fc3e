// Wait timeouts: the first claim on the queue after the timeout applies the
// policy (fail, or complete with the timeout output); no handler runs.
#include "signals_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_P(Signals, TimeoutFail_FailsTheStepAndTheRun) {
  Flow flow = Approval("timeout_fail", {.timeout = absl::Hours(1)});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Minutes(59));
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kQueued);
  clock().Advance(absl::Minutes(1));
  EXPECT_THAT(Claim(flow), IsEmpty());  // applied the policy; handed out none
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(view.run.error, "timed out waiting for a signal after 1h");
  TaskRecord wait = TaskOf(run, "approve");
  EXPECT_EQ(wait.status, TaskStatus::kFailed);
  EXPECT_EQ(wait.attempts, 1);
  EXPECT_TRUE(MessageOf(wait)->archived);
  EXPECT_EQ(StepOf(view, "finish").status, StepStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:failed@1 by test-worker"));
  EXPECT_EQ(PendingReports(), 0);
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "already ended (failed)"));
}

TEST_P(Signals, TimeoutFail_WhenExhaustedSkip_RunGoesOnWithout) {
  Flow flow =
      Approval("timeout_skip", {.timeout = absl::Minutes(5)},
               {.depends_on = {"ask"}, .when_exhausted = Policy::kSkip});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Minutes(5));
  EXPECT_TRUE(Claim(flow).empty());  // applies the timeout
  EXPECT_EQ(Drive(flow), 1);         // finish, without approve
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "approve").status, StepStatus::kSkipped);
  EXPECT_EQ(*view.run.output, J("{\"finish\":{\"run\":{}}}"));
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "already ended (completed)"));
}

TEST_P(Signals, TimeoutComplete_UsesTheTimeoutOutput) {
  Flow flow = Approval("timeout_default",
                       {.timeout = absl::Hours(2),
                        .on_timeout = WaitTimeoutPolicy::kComplete,
                        .timeout_output = J("{\"approved\":false}")},
                       {.depends_on = {"ask"}});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Hours(2));
  EXPECT_TRUE(Claim(flow).empty());  // applies the timeout
  EXPECT_EQ(Drive(flow), 1);         // finish, fed the timeout output
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output,
            J("{\"finish\":{\"run\":{},\"approve\":{\"approved\":false}}}"));
  TaskRecord wait = TaskOf(run, "approve");
  EXPECT_EQ(wait.status, TaskStatus::kCompleted);
  EXPECT_THAT(wait.error,
              HasSubstr("completed with the step's timeout output"));
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:completed@1 by test-worker",
                                       "finish:completed@1 by test-worker"));
}

TEST_P(Signals, TimeoutComplete_LateSignalIsRefused) {
  Flow flow("timeout_late");
  flow.Wait("approve", {.timeout = absl::Seconds(30),
                        .on_timeout = WaitTimeoutPolicy::kComplete,
                        .timeout_output = J("0")})
      .Wait("other");  // keeps the run going
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  clock().Advance(absl::Seconds(30));
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(StepOf(View(run), "approve").output, J("0"));
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "timed out waiting for a signal after 30s"));
  EXPECT_EQ(StepOf(View(run), "approve").output, J("0"));
}

TEST_P(Signals, SignalBeforeTheTimeout_TimeoutNeverFires) {
  Flow flow = Approval("timeout_beaten", {.timeout = absl::Hours(1)});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Minutes(30));
  ExpectSignal(run, "approve", J("\"yes\""), SignalOutcome::kDelivered);
  clock().Advance(absl::Hours(2));
  EXPECT_EQ(Drive(flow), 1);  // finish only
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
  EXPECT_EQ(TaskOf(run, "approve").attempts, 1);
}

TEST_P(Signals, TimeoutCountsFromWhenTheStepStarts) {
  Flow flow = Approval("timeout_from_start", {.timeout = absl::Hours(1)});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  clock().Advance(absl::Minutes(50));
  Drive(flow);  // ask runs 50 minutes after the run started
  clock().Advance(absl::Minutes(50));
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kQueued);
  clock().Advance(absl::Minutes(10));
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kFailed);
}

TEST_P(Signals, TimeoutFires_ForAWorkerThatServesOtherSteps) {
  Flow flow = Approval("timeout_any_worker", {.timeout = absl::Minutes(1)});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Minutes(1));
  ClaimRequest request;
  request.queue = "timeout_any_worker";
  request.worker_id = "finish-only";
  request.served.Add("timeout_any_worker", 2);  // only `finish`
  absl::StatusOr<std::vector<ClaimedTask>> claimed = engine().Claim(request);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_THAT(*claimed, IsEmpty());
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:failed@1 by finish-only"));
}

TEST_P(Signals, RetryRun_AfterATimeout_WaitsAgain) {
  Flow flow = Approval("timeout_retry", {.timeout = absl::Hours(1)});
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  clock().Advance(absl::Hours(1));
  Claim(flow);
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  ASSERT_TRUE(engine().RetryRun(run).ok());
  EXPECT_TRUE(Claim(flow).empty());  // parked again, for a fresh hour
  EXPECT_EQ(CountsOf("timeout_retry").delayed, 1);
  ExpectSignal(run, "approve", J("\"ok\""), SignalOutcome::kDelivered);
  EXPECT_EQ(Drive(flow), 1);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:failed@1 by test-worker",
                                       "approve:completed@2 by signal",
                                       "finish:completed@1 by test-worker"));
}

}  // namespace
}  // namespace sluice::testing
