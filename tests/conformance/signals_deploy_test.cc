// Wait steps in the stored definition: they round-trip, deployment compares
// them, and bad Wait definitions are refused before any store access.
#include "signals_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SignalDeploy : public Signals {
 protected:
  absl::Status DeployStatus(const Flow& flow) {
    return engine().Deploy(flow).status();
  }
  // The stored definition of `slug`, read back.
  FlowShape Stored(std::string_view slug) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    absl::StatusOr<std::optional<FlowRecord>> record = (*tx)->GetFlow(slug);
    EXPECT_TRUE(record.ok() && record->has_value());
    absl::StatusOr<FlowShape> shape =
        FlowShape::FromJson((*record)->definition);
    EXPECT_TRUE(shape.ok()) << shape.status();
    return shape.ok() ? *shape : FlowShape();
  }
};

TEST_P(SignalDeploy, WaitStep_IsStored_AndVerifiesUnchanged) {
  Flow flow =
      Approval("deploy_wait", {.timeout = absl::Minutes(90),
                               .on_timeout = WaitTimeoutPolicy::kComplete,
                               .timeout_output = J("{\"approved\":false}")});
  Deploy(flow);
  FlowShape stored = Stored("deploy_wait");
  ASSERT_EQ(stored.steps.size(), 3u);
  EXPECT_EQ(stored.steps[1].kind, StepKind::kWait);
  EXPECT_EQ(stored.steps[1].wait, flow.shape().steps[1].wait);
  EXPECT_THAT(stored.DifferencesFrom(flow.shape()), ::testing::IsEmpty());
  absl::StatusOr<DeployOutcome> again = engine().Deploy(flow);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
}

TEST_P(SignalDeploy, ChangedWait_IsAMismatchNamingEachDifference) {
  Deploy(Approval("deploy_wait_changed", {.timeout = absl::Hours(1)}));
  Flow changed = Approval("deploy_wait_changed",
                          {.timeout = absl::Hours(2),
                           .on_timeout = WaitTimeoutPolicy::kComplete,
                           .timeout_output = J("1")});
  absl::Status status = DeployStatus(changed);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("step 1 (\"approve\"): wait timeout is 2h here but 1h "
                        "in the stored flow"));
  EXPECT_THAT(status.message(),
              HasSubstr("wait on_timeout is complete here but fail"));
  EXPECT_THAT(status.message(),
              HasSubstr("wait timeout_output is 1 here but null"));
}

TEST_P(SignalDeploy, WaitInsteadOfAStep_IsAKindMismatch) {
  Flow single("deploy_wait_kind");
  single.Step("ask", Returns(J("1")))
      .Step("approve", {.depends_on = {"ask"}}, Echo());
  Deploy(single);
  Flow waiting("deploy_wait_kind");
  waiting.Step("ask", Returns(J("1")))
      .Wait("approve", {.depends_on = {"ask"}}, {});
  absl::Status status = DeployStatus(waiting);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("step 1 (\"approve\"): kind is wait here but single "
                        "in the stored flow"));
}

TEST_P(SignalDeploy, BadWaitDefinitions_AreRefusedUpFront) {
  struct Case {
    Flow flow;
    std::string problem;
  };
  std::vector<Case> cases;
  cases.push_back({Flow("bad_wait_attempts"),
                   "is a Wait step: StepSpec::max_attempts has no meaning"});
  cases.back().flow.Wait("w", {.max_attempts = 2}, {});
  cases.push_back(
      {Flow("bad_wait_timeout_option"), "StepSpec::timeout has no meaning"});
  cases.back().flow.Wait("w", {.timeout = absl::Seconds(3)}, {});
  cases.push_back({Flow("bad_wait_complete"),
                   "on_timeout is kComplete but no WaitSpec::timeout"});
  cases.back().flow.Wait("w", {.on_timeout = WaitTimeoutPolicy::kComplete});
  cases.push_back({Flow("bad_wait_output"),
                   "timeout_output is set but on_timeout is kFail"});
  cases.back().flow.Wait(
      "w", {.timeout = absl::Seconds(1), .timeout_output = J("1")});
  cases.push_back({Flow("bad_wait_duration"), "WaitSpec::timeout 0 is out"});
  cases.back().flow.Wait("w", {.timeout = absl::ZeroDuration()});
  cases.push_back({Flow("bad_wait_map"),
                   "feeds map step \"each\", so its WaitSpec::timeout_output "
                   "must be a JSON array, not object"});
  cases.back()
      .flow
      .Wait("w", {.timeout = absl::Seconds(1),
                  .on_timeout = WaitTimeoutPolicy::kComplete,
                  .timeout_output = J("{}")})
      .Map("each", {.depends_on = {"w"}}, Echo());
  for (const Case& c : cases) {
    absl::Status status = DeployStatus(c.flow);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << c.flow.slug() << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(c.problem)) << c.flow.slug();
  }
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  absl::StatusOr<std::vector<FlowRecord>> flows = (*tx)->ListFlows();
  ASSERT_TRUE(flows.ok());
  EXPECT_TRUE(flows->empty());
}

TEST_P(SignalDeploy, WaitOnItsOwnStepQueue_ServedByAWorkerWithoutHandlers) {
  Flow flow("deploy_wait_step_queue", {.queue_per_step = true});
  flow.Step("ask", Returns(J("1")))
      .Wait("approve", {.depends_on = {"ask"}}, {.timeout = absl::Minutes(1)});
  Deploy(flow);
  EXPECT_EQ(flow.shape().steps[1].queue_name,
            "deploy_wait_step_queue__approve");
  absl::StatusOr<std::unique_ptr<Worker>> worker = engine().StartWorker(
      WorkerSpec().Serve(flow, {"approve"}), {.poll_interval = absl::Hours(1)});
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE((*worker)->Stop().ok());
  EXPECT_TRUE(flow.ValidateForWorker().ok());
}

SLUICE_CONFORMANCE_SUITE(SignalDeploy);

}  // namespace
}  // namespace sluice::testing
