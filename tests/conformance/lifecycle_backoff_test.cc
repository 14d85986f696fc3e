// Retry backoff kinds, and where a task goes in line when it comes back:
// a retry to the back of its priority, a release or stall requeue keeps its
// place (effect-mq §6).
#include "lifecycle_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LifecycleBackoff : public Lifecycle {
 protected:
  // When the task's message is visible again after a failure now.
  absl::Duration RetryWait(const Flow& flow, const RunId& run) {
    Fail(One(flow), absl::UnavailableError("again"));
    TaskRecord t = TaskOf(run, "work");
    EXPECT_EQ(t.status, TaskStatus::kQueued);
    return MessageOf(t)->message.visible_at - clock().Now();
  }
  void AdvanceTo(const RunId& run) {
    clock().Advance(MessageOf(TaskOf(run, "work"))->message.visible_at -
                    clock().Now());
  }
};

TEST_P(LifecycleBackoff, Exponential_DoublesPerFailedAttempt) {
  Flow flow = OneStep("backoff_exp", 5, absl::Seconds(1));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_EQ(RetryWait(flow, run), absl::Seconds(2));
  AdvanceTo(run);
  EXPECT_EQ(RetryWait(flow, run), absl::Seconds(4));
  AdvanceTo(run);
  EXPECT_EQ(RetryWait(flow, run), absl::Seconds(8));
}

TEST_P(LifecycleBackoff, Fixed_WaitsTheBaseEveryTime) {
  Flow flow =
      OneStep("backoff_fixed", 5, absl::Seconds(3), BackoffKind::kFixed);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(RetryWait(flow, run), absl::Seconds(3)) << "failure " << i + 1;
    AdvanceTo(run);
  }
}

TEST_P(LifecycleBackoff, StepKind_OverridesTheFlowKind) {
  Flow flow("backoff_step", {.max_attempts = 5,
                             .base_delay = absl::Seconds(1),
                             .backoff = BackoffKind::kExponential});
  flow.Step("work", {.backoff = BackoffKind::kFixed}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  EXPECT_EQ(RetryWait(flow, run), absl::Seconds(1));
  AdvanceTo(run);
  EXPECT_EQ(RetryWait(flow, run), absl::Seconds(1));
}

TEST_P(LifecycleBackoff, Kind_IsPartOfTheDeployedShape) {
  Deploy(OneStep("backoff_shape", 3, absl::Seconds(1), BackoffKind::kFixed));
  absl::StatusOr<DeployOutcome> same = engine().Deploy(
      OneStep("backoff_shape", 3, absl::Seconds(1), BackoffKind::kFixed));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, DeployOutcome::kVerified);
  absl::StatusOr<DeployOutcome> changed =
      engine().Deploy(OneStep("backoff_shape", 3, absl::Seconds(1)));
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(changed.status().message()),
              HasSubstr("backoff is exponential here but fixed"));
}

TEST_P(LifecycleBackoff, DefaultKind_StoredWithoutTheKey_StillVerifies) {
  Flow flow = OneStep("backoff_old");
  // A flow stored before backoff kinds existed has no "backoff" key.
  Json stored = flow.shape().ToJson();
  EXPECT_EQ(stored.at("options").as_object().if_contains("backoff"), nullptr);
  Deploy(flow);
  absl::StatusOr<DeployOutcome> again = engine().Deploy(OneStep("backoff_old"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
}

TEST_P(LifecycleBackoff, StoredKindThatIsUnknown_IsReportedCorrupt) {
  Json stored = OneStep("backoff_bad").shape().ToJson();
  stored.as_object()["options"].as_object()["backoff"] = "sometimes";
  absl::StatusOr<FlowShape> shape = FlowShape::FromJson(stored);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("backoff"));
}

TEST_P(LifecycleBackoff, Retry_GoesToTheBackOfTheLine) {
  Flow flow = OneStep("order_retry");
  Deploy(flow);
  RunId first = Start(flow, J("1"));
  RunId second = Start(flow, J("2"));
  RunId third = Start(flow, J("3"));
  std::vector<ClaimedTask> one = Claim(flow, 1);
  ASSERT_EQ(RunsOf(one), std::vector<RunId>{first});
  Fail(one[0], absl::UnavailableError("later"));  // visible now (no delay)
  EXPECT_EQ(RunsOf(Claim(flow, 3)), (std::vector<RunId>{second, third, first}));
}

TEST_P(LifecycleBackoff, StallRequeue_KeepsItsPlace) {
  Flow flow = OneStep("order_stall");
  Deploy(flow);
  RunId first = Start(flow, J("1"));
  ASSERT_EQ(RunsOf(Claim(flow, 1)), std::vector<RunId>{first});
  RunId second = Start(flow, J("2"));
  EXPECT_EQ(RecoverAfterLeases(), 1);
  EXPECT_EQ(RunsOf(Claim(flow, 2)), (std::vector<RunId>{first, second}));
}

TEST_P(LifecycleBackoff, Release_KeepsItsPlace) {
  Flow flow = OneStep("order_release");
  Deploy(flow);
  RunId first = Start(flow, J("1"));
  std::vector<ClaimedTask> claimed = Claim(flow, 1);
  RunId second = Start(flow, J("2"));
  Release(claimed);
  EXPECT_EQ(RunsOf(Claim(flow, 2)), (std::vector<RunId>{first, second}));
}

TEST_P(LifecycleBackoff, ChosenRetryDelay_StillBeatsTheBackoff) {
  Flow flow =
      OneStep("backoff_chosen", 3, absl::Seconds(1), BackoffKind::kFixed);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(One(flow), RetryAfter(absl::Seconds(30), "slow down"));
  EXPECT_EQ(MessageOf(TaskOf(run, "work"))->message.visible_at - clock().Now(),
            absl::Seconds(30));
  EXPECT_THAT(Ledger(run), ElementsAre("retried@1"));
}

SLUICE_CONFORMANCE_SUITE(LifecycleBackoff);

}  // namespace
}  // namespace sluice::testing
