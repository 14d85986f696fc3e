// Signals that can't be delivered: each is a clear error that changes
// nothing.
#include "signals_fixture.h"

namespace sluice::testing {
namespace {

class SignalErrors : public Signals {
 protected:
  // Everything a failed signal must leave as it was.
  struct Snapshot {
    RunView view;
    int64_t reports = 0;
  };
  Snapshot Take(const RunId& run) { return {View(run), PendingReports()}; }
  void ExpectUnchanged(const Snapshot& before, const RunId& run) {
    Snapshot after = Take(run);
    EXPECT_EQ(after.view.run.status, before.view.run.status);
    EXPECT_EQ(after.view.attempts.size(), before.view.attempts.size());
    EXPECT_EQ(after.reports, before.reports);
    ASSERT_EQ(after.view.tasks.size(), before.view.tasks.size());
    for (size_t i = 0; i < after.view.tasks.size(); ++i) {
      EXPECT_EQ(after.view.tasks[i].status, before.view.tasks[i].status);
      EXPECT_EQ(after.view.tasks[i].output, before.view.tasks[i].output);
    }
    for (size_t i = 0; i < after.view.steps.size(); ++i) {
      EXPECT_EQ(after.view.steps[i].status, before.view.steps[i].status);
      EXPECT_EQ(after.view.steps[i].output, before.view.steps[i].output);
    }
  }
};

TEST_P(SignalErrors, UnknownRun_IsNotFound) {
  Flow flow = Approval("signal_unknown_run");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  Snapshot before = Take(run);
  RunId unknown = RunId::Random();
  EXPECT_TRUE(Refused(Send(unknown, "approve", J("1")).status(),
                      absl::StatusCode::kNotFound,
                      StrCat("run ", unknown.ToString(), " does not exist")));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, EndedRun_IsFailedPrecondition) {
  Flow flow = Approval("signal_ended_run");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  ExpectSignal(run, "approve", J("1"), SignalOutcome::kDelivered);
  Drive(flow);
  ASSERT_EQ(View(run).run.status, RunStatus::kCompleted);
  Snapshot before = Take(run);
  EXPECT_TRUE(Refused(Send(run, "approve", J("2")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "already ended (completed)"));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, CancelledRunParkedOnAWait_RefusesSignals) {
  Flow flow = Approval("signal_cancelled");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  ASSERT_TRUE(engine().CancelRun(run).ok());  // nothing started: ends now
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  TaskRecord wait = TaskOf(run, "approve");
  EXPECT_EQ(wait.status, TaskStatus::kCancelled);
  EXPECT_TRUE(MessageOf(wait)->archived);
  EXPECT_EQ(CountsOf("signal_cancelled").delayed, 0);
  Snapshot before = Take(run);
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "already ended (cancelled)"));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, CancelRequestedRun_RefusesSignals) {
  Flow flow("signal_cancel_requested");
  flow.Step("work", Echo()).Wait("approve");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> started = Claim(flow);
  ASSERT_EQ(started.size(), 1u);  // `work` is started; the wait is parked
  ASSERT_TRUE(engine().CancelRun(run).ok());
  ASSERT_TRUE(View(run).run.cancel_requested);
  EXPECT_EQ(TaskOf(run, "approve").status, TaskStatus::kCancelled);
  Snapshot before = Take(run);
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "is being cancelled"));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, UnknownStep_IsNotFound) {
  Flow flow = Approval("signal_unknown_step");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  Snapshot before = Take(run);
  EXPECT_TRUE(Refused(Send(run, "approved", J("1")).status(),
                      absl::StatusCode::kNotFound,
                      "flow \"signal_unknown_step\" has no step \"approved\""));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, StepThatIsNotAWait_IsInvalidArgument) {
  Flow flow = Approval("signal_not_wait");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Snapshot before = Take(run);
  // `ask` is queued: a signal must not complete it in its handler's place.
  EXPECT_TRUE(Refused(Send(run, "ask", J("1")).status(),
                      absl::StatusCode::kInvalidArgument,
                      "is a single step, not a Wait step"));
  ExpectUnchanged(before, run);
  EXPECT_EQ(Drive(flow), 1);
}

TEST_P(SignalErrors, BadInput_IsRefusedBeforeTheStore) {
  Flow flow = Approval("signal_bad_input");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  Snapshot before = Take(run);
  EXPECT_TRUE(Refused(Send(RunId(), "approve", J("1")).status(),
                      absl::StatusCode::kInvalidArgument, "run id is nil"));
  EXPECT_TRUE(Refused(Send(run, "no such-slug", J("1")).status(),
                      absl::StatusCode::kInvalidArgument, "Signal: step"));
  Json too_big(std::string(kMaxPayloadBytes + 1, 'x'));
  EXPECT_TRUE(Refused(Send(run, "approve", too_big).status(),
                      absl::StatusCode::kInvalidArgument, "Signal: payload"));
  ExpectUnchanged(before, run);
}

TEST_P(SignalErrors, DeletedRun_IsNotFound) {
  Flow flow = Approval("signal_deleted");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(engine().CancelRun(run).ok());
  ASSERT_TRUE(engine().DeleteRun(run).ok());
  EXPECT_EQ(Send(run, "approve", J("1")).status().code(),
            absl::StatusCode::kNotFound);
}

SLUICE_CONFORMANCE_SUITE(SignalErrors);

}  // namespace
}  // namespace sluice::testing
