// Per-item overrides of max attempts, timeout and backoff (EnqueueOptions,
// kept in TaskRecord.options) win over the job's, step's and flow's, in
// every place that computes them: claim, heartbeat, results, stall recovery.
#include "lifecycle_fixture.h"
#include "sluice/job.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LifecycleOverrides : public Lifecycle {
 protected:
  // A job on its own queue whose handler echoes; 3 attempts, 1 s exponential
  // backoff and a 10 s timeout unless an item says otherwise.
  static Job Echoing(std::string name) {
    std::string queue = name;
    return Job(std::move(name),
               {.queue = queue,
                .max_attempts = 3,
                .backoff = {BackoffKind::kExponential, absl::Seconds(1)},
                .timeout = absl::Seconds(10)},
               Echo());
  }

  RunId Enqueue(const Job& job, const EnqueueOptions& options) {
    absl::StatusOr<DeployOutcome> deployed = engine().Deploy(job);
    EXPECT_TRUE(deployed.ok()) << deployed.status();
    absl::StatusOr<EnqueueResult> result =
        engine().Enqueue(job, J("{}"), options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->run_id : RunId();
  }
};

TEST_P(LifecycleOverrides, MaxAttempts_OfTheItemWins) {
  Job job = Echoing("override_attempts");
  RunId run = Enqueue(job, {.max_attempts = 1});
  ClaimedTask task = One(job.flow());
  EXPECT_EQ(task.max_attempts, 1);
  Fail(task, absl::UnavailableError("once is enough"));
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
  EXPECT_THAT(Ledger(run), ElementsAre("failed@1"));
}

TEST_P(LifecycleOverrides, Backoff_OfTheItemWins) {
  Job job = Echoing("override_backoff");
  RunId run =
      Enqueue(job, {.backoff = Backoff{BackoffKind::kFixed, absl::Seconds(9)}});
  Fail(One(job.flow()), absl::UnavailableError("later"));
  EXPECT_EQ(MessageOf(TaskOf(run, "job"))->message.visible_at - clock().Now(),
            absl::Seconds(9));
  clock().Advance(absl::Seconds(9));
  Fail(One(job.flow()), absl::UnavailableError("later again"));
  EXPECT_EQ(MessageOf(TaskOf(run, "job"))->message.visible_at - clock().Now(),
            absl::Seconds(9));
}

TEST_P(LifecycleOverrides, Timeout_OfTheItemSetsClaimHeartbeatAndStall) {
  Job job = Echoing("override_timeout");
  RunId run = Enqueue(job, {.timeout = absl::Seconds(100)});
  ClaimedTask task = One(job.flow());
  EXPECT_EQ(task.deadline, clock().Now() + absl::Seconds(100));
  TaskRecord claimed = TaskOf(run, "job");
  EXPECT_EQ(claimed.stall_at, clock().Now() + absl::Seconds(130));
  EXPECT_EQ(MessageOf(claimed)->message.visible_at,
            clock().Now() + absl::Seconds(102));
  clock().Advance(absl::Seconds(50));
  EXPECT_THAT(Extend({task}), ElementsAre(LeaseState::kOwned));
  EXPECT_EQ(TaskOf(run, "job").stall_at, clock().Now() + absl::Seconds(130));
  // The job's own 10 s timeout would have let stall recovery take it by now.
  clock().Advance(absl::Seconds(60));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 0);
  clock().Advance(absl::Seconds(71));
  recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(*recovered, 1);
  EXPECT_THAT(Ledger(run), ElementsAre("stalled@1"));
}

TEST_P(LifecycleOverrides, MaxAttempts_CountsAgainstStallRecoveryToo) {
  Job job = Echoing("override_stall_attempts");
  RunId run = Enqueue(job, {.max_attempts = 1});
  ASSERT_EQ(Claim(job.flow()).size(), 1u);
  EXPECT_EQ(RecoverAfterLeases(), 1);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.attempts[0].error, HasSubstr("during attempt 1 of 1"));
}

TEST_P(LifecycleOverrides, NoOverride_TheJobsSettingsApply) {
  Job job = Echoing("override_none");
  RunId run = Enqueue(job, {});
  ClaimedTask task = One(job.flow());
  EXPECT_EQ(task.max_attempts, 3);
  EXPECT_EQ(task.deadline, clock().Now() + absl::Seconds(10));
  Fail(task, absl::UnavailableError("again"));
  EXPECT_EQ(MessageOf(TaskOf(run, "job"))->message.visible_at - clock().Now(),
            absl::Seconds(2));
}

TEST_P(LifecycleOverrides, FlowRun_OverridesApplyToEveryStep) {
  Flow flow("override_flow", {.max_attempts = 5});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> started =
      engine().StartRun("override_flow", J("{}"), {.max_attempts = 1});
  ASSERT_TRUE(started.ok()) << started.status();
  Complete(One(flow), J("1"));
  ClaimedTask b = One(flow);
  EXPECT_EQ(b.step_slug, "b");
  EXPECT_EQ(b.max_attempts, 1);
  Fail(b, absl::UnavailableError("no second try"));
  EXPECT_EQ(View(started->run_id).run.status, RunStatus::kFailed);
}

SLUICE_CONFORMANCE_SUITE(LifecycleOverrides);

}  // namespace
}  // namespace sluice::testing
