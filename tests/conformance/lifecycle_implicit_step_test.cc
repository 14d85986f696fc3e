// A one-step flow's step state is not stored while its run's row says it
// (started, completed): GetRun derives it, and every other state is stored
// (decision 0069). Two steps store both states from the start.
#include "lifecycle_fixture.h"
#include "sluice/internal/implicit_steps.h"

namespace sluice::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

class LifecycleImplicitStep : public Lifecycle {
 protected:
  // The step states the backend holds for `run`.
  std::vector<StepStateRecord> Stored(const RunId& run) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return {};
    absl::StatusOr<std::vector<std::vector<StepStateRecord>>> states =
        (*tx)->GetStepStates(std::span(&run, 1), Fields::kAll);
    EXPECT_TRUE(states.ok()) << states.status();
    return states.ok() ? (*states)[0] : std::vector<StepStateRecord>();
  }
};

TEST_P(LifecycleImplicitStep, OneStepRun_StateDerivedWhileStartedAndCompleted) {
  Flow flow = OneStep("implicit_done");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_THAT(Stored(run), IsEmpty());
  RunView started = View(run);
  ASSERT_THAT(started.steps, SizeIs(1));
  EXPECT_EQ(started.steps[0].step_slug, "work");
  EXPECT_EQ(started.steps[0].status, StepStatus::kStarted);
  EXPECT_EQ(started.steps[0].initial_tasks, 1);
  EXPECT_EQ(started.steps[0].remaining_tasks, 1);
  EXPECT_EQ(started.steps[0].started_at, started.run.started_at);

  clock().Advance(absl::Seconds(2));
  Complete(One(flow), J("7"));
  EXPECT_THAT(Stored(run), IsEmpty());
  RunView done = View(run);
  ASSERT_THAT(done.steps, SizeIs(1));
  EXPECT_EQ(done.run.status, RunStatus::kCompleted);
  EXPECT_EQ(done.steps[0].status, StepStatus::kCompleted);
  EXPECT_EQ(done.steps[0].remaining_tasks, 0);
  EXPECT_EQ(done.steps[0].output, J("7"));
  EXPECT_EQ(done.steps[0].started_at, done.run.started_at);
  EXPECT_EQ(done.steps[0].finished_at, done.run.finished_at);
}

TEST_P(LifecycleImplicitStep, Failed_StoresItsState_RetryCompletesIt) {
  Flow flow = OneStep("implicit_retry", /*max_attempts=*/1);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(One(flow), absl::InternalError("boom"));
  std::vector<StepStateRecord> failed = Stored(run);
  ASSERT_THAT(failed, SizeIs(1));
  EXPECT_EQ(failed[0].status, StepStatus::kFailed);
  EXPECT_EQ(failed[0].error, View(run).run.error);

  ASSERT_TRUE(engine().RetryRun(run).ok());
  Complete(One(flow), J("8"));
  // Stored once, it stays stored and follows the run.
  std::vector<StepStateRecord> completed = Stored(run);
  ASSERT_THAT(completed, SizeIs(1));
  EXPECT_EQ(completed[0].status, StepStatus::kCompleted);
  EXPECT_EQ(completed[0].output, J("8"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  ASSERT_THAT(view.steps, SizeIs(1));
  EXPECT_EQ(view.steps[0].status, StepStatus::kCompleted);
}

TEST_P(LifecycleImplicitStep, Cancelled_StoresItsState) {
  Flow flow = OneStep("implicit_cancel");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(engine().CancelRun(run).ok());
  std::vector<StepStateRecord> stored = Stored(run);
  ASSERT_THAT(stored, SizeIs(1));
  EXPECT_EQ(stored[0].status, StepStatus::kCancelled);
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
}

TEST_P(LifecycleImplicitStep, TwoSteps_EveryStateStored) {
  Flow flow("implicit_two");
  flow.Step("first", Echo()).Step("second", {.depends_on = {"first"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_THAT(Stored(run), SizeIs(2));
  EXPECT_FALSE(internal::HasImplicitStep(flow.shape()));
}

SLUICE_CONFORMANCE_SUITE(LifecycleImplicitStep);

}  // namespace
}  // namespace sluice::testing
