// Delivering signals: the payload becomes the Wait step's output, the run
// goes on, and a second signal changes nothing.
#include "signals_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

TEST_P(Signals, Signal_CompletesTheWait_AndTheRunGoesOn) {
  Flow flow = Approval("signal_basic");
  Deploy(flow);
  RunId run = Start(flow, J("{\"order\":7}"));
  EXPECT_EQ(Drive(flow), 1);  // ask; the wait is parked, finish not started
  TaskRecord parked = TaskOf(run, "approve");
  EXPECT_EQ(parked.status, TaskStatus::kQueued);
  EXPECT_EQ(parked.attempts, 0);
  EXPECT_EQ(StepOf(View(run), "finish").status, StepStatus::kCreated);

  ExpectSignal(run, "approve", J("{\"ok\":true}"), SignalOutcome::kDelivered);
  TaskRecord done = TaskOf(run, "approve");
  EXPECT_EQ(done.status, TaskStatus::kCompleted);
  EXPECT_EQ(done.output, J("{\"ok\":true}"));
  EXPECT_TRUE(done.error.empty());
  EXPECT_FALSE(MessageOf(done).has_value());  // deleted, as on completion
  EXPECT_EQ(StepOf(View(run), "approve").status, StepStatus::kCompleted);
  EXPECT_EQ(PendingReports(), 0);  // applied on the push path

  EXPECT_EQ(Drive(flow), 1);  // finish
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(
      *view.run.output,
      J("{\"finish\":{\"run\":{\"order\":7},\"approve\":{\"ok\":true}}}"));
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:completed@1 by signal",
                                       "finish:completed@1 by test-worker"));
}

TEST_P(Signals, Parked_IsDelayedInCounts_AndNeverClaimed) {
  Flow flow = Approval("signal_parked");
  Deploy(flow);
  Start(flow, J("{}"));
  Drive(flow);
  QueueCounts counts = CountsOf("signal_parked");
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.waiting, 0);
  EXPECT_EQ(counts.active, 0);
  clock().Advance(absl::Hours(24 * 365 * 50));  // no timeout: waits forever
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(CountsOf("signal_parked").delayed, 1);
}

TEST_P(Signals, SecondSignal_ChangesNothing) {
  Flow flow = Approval("signal_twice");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  ExpectSignal(run, "approve", J("\"first\""), SignalOutcome::kDelivered);
  RunView before = View(run);
  ExpectSignal(run, "approve", J("\"second\""),
               SignalOutcome::kAlreadySignalled);
  RunView after = View(run);
  EXPECT_EQ(TaskOf(run, "approve").output, J("\"first\""));
  EXPECT_EQ(after.attempts.size(), before.attempts.size());
  EXPECT_EQ(StepOf(after, "approve").output, J("\"first\""));
  EXPECT_EQ(PendingReports(), 0);
  Drive(flow);
  ASSERT_EQ(View(run).run.status, RunStatus::kCompleted);
  // Once the run has ended, a repeat is an error like any signal to it.
  EXPECT_TRUE(Refused(Send(run, "approve", J("\"third\"")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "already ended (completed)"));
}

TEST_P(Signals, SignalBeforeTheStepIsReached_IsHeld_ThenDelivered) {
  Flow flow = Approval("signal_early");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  // `ask` has not run: the Wait step has no task yet.
  ExpectSignal(run, "approve", J("null"), SignalOutcome::kHeld);
  ExpectSignal(run, "approve", J("\"late\""), SignalOutcome::kAlreadySignalled);
  EXPECT_EQ(StepOf(View(run), "approve").status, StepStatus::kCreated);
  EXPECT_EQ(Drive(flow), 2);  // ask, then finish: the wait never parks
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "approve").output, J("null"));  // null kept exactly
  TaskRecord wait = TaskOf(run, "approve");
  EXPECT_EQ(wait.status, TaskStatus::kCompleted);
  EXPECT_EQ(wait.output, J("null"));
  EXPECT_TRUE(MessageOf(wait)->archived);
  EXPECT_EQ(*view.run.output, J("{\"finish\":{\"run\":{},\"approve\":null}}"));
  EXPECT_THAT(Ledger(run), ElementsAre("ask:completed@1 by test-worker",
                                       "approve:completed@1 by signal",
                                       "finish:completed@1 by test-worker"));
}

TEST_P(Signals, RootWait_SignalledAtOnce_RunCompletes) {
  Flow flow("signal_root");
  flow.Wait("approve");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ExpectSignal(run, "approve", J("[1,2]"), SignalOutcome::kDelivered);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J("{\"approve\":[1,2]}"));
}

// a -> {b (Wait), c} -> d: the wait holds back only what depends on it.
TEST_P(Signals, WaitInTheMiddleOfADag_HoldsBackOnlyItsDependents) {
  Flow flow("signal_dag");
  flow.Step("a", Returns(J("1")))
      .Wait("b", {.depends_on = {"a"}}, {})
      .Step("c", {.depends_on = {"a"}}, Returns(J("3")))
      .Step("d", {.depends_on = {"b", "c"}}, Echo())
      .Step("e", {.depends_on = {"c"}}, Returns(J("5")));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_EQ(Drive(flow), 3);  // a, c, e
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "e").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "b").status, StepStatus::kStarted);
  EXPECT_EQ(StepOf(view, "d").status, StepStatus::kCreated);
  ExpectSignal(run, "b", J("{\"b\":2}"), SignalOutcome::kDelivered);
  EXPECT_EQ(Drive(flow), 1);  // d
  view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output,
            J("{\"d\":{\"run\":{},\"b\":{\"b\":2},\"c\":3},\"e\":5}"));
}

TEST_P(Signals, WaitFeedingAMap_MapsOverThePayload) {
  Flow flow("signal_map");
  flow.Wait("files").Map("each", {.depends_on = {"files"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  absl::StatusOr<SignalOutcome> refused = Send(run, "files", J("{}"));
  EXPECT_TRUE(Refused(refused.status(), absl::StatusCode::kInvalidArgument,
                      "must be a JSON array, not object"));
  EXPECT_EQ(TaskOf(run, "files").status, TaskStatus::kQueued);
  ExpectSignal(run, "files", J("[\"x\",\"y\"]"), SignalOutcome::kDelivered);
  EXPECT_EQ(Drive(flow), 2);
  EXPECT_EQ(*View(run).run.output, J("{\"each\":[\"x\",\"y\"]}"));
}

TEST_P(Signals, ConditionUnmet_SkipsTheWait_AndDropsAHeldSignal) {
  Flow flow("signal_skip");
  flow.Step("ask", Returns(J("{\"needed\":false}")))
      .Wait("approve",
            {.depends_on = {"ask"},
             .if_pattern = J("{\"ask\":{\"needed\":true}}")},
            {})
      .Step("finish", {.depends_on = {"ask", "approve"}}, Echo())
      .Wait("hold");  // keeps the run going
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ExpectSignal(run, "approve", J("\"held\""), SignalOutcome::kHeld);
  EXPECT_EQ(Drive(flow), 2);  // ask, finish
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "approve").status, StepStatus::kSkipped);
  EXPECT_FALSE(StepOf(view, "approve").output.has_value());
  EXPECT_EQ(StepOf(view, "finish").output,
            J("{\"run\":{},\"ask\":{\"needed\":false}}"));
  EXPECT_TRUE(Refused(Send(run, "approve", J("1")).status(),
                      absl::StatusCode::kFailedPrecondition,
                      "is skipped and has no task"));
  ExpectSignal(run, "hold", J("1"), SignalOutcome::kDelivered);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(Signals, Events_ShowTheWaitStepCompleting) {
  Flow flow = Approval("signal_events");
  Deploy(flow);
  std::vector<std::string> seen;
  absl::Mutex mu;
  engine().Subscribe([&](const Event& e) {
    absl::MutexLock lock(&mu);
    if (e.step_slug == "approve") seen.push_back(std::string(ToString(e.kind)));
  });
  RunId run = Start(flow, J("{}"));
  Drive(flow);
  ExpectSignal(run, "approve", J("1"), SignalOutcome::kDelivered);
  absl::MutexLock lock(&mu);
  EXPECT_THAT(seen, ElementsAre("step:started", "step:completed"));
}

SLUICE_CONFORMANCE_SUITE(Signals);

}  // namespace
}  // namespace sluice::testing
