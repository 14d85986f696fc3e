// Flow definitions, validation and startup compilation.
#include "absl/strings/ascii.h"
#include "harness.h"
#include "sluice/internal/strings.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class Definitions : public Conformance {
 protected:
  // A failed deploy must leave no flow and no queue behind.
  void ExpectNothingStored(const std::string& flow_slug) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    auto flows = (*tx)->ListFlows();
    ASSERT_TRUE(flows.ok());
    EXPECT_TRUE(flows->empty());
    auto exists = (*tx)->QueueExists(flow_slug);
    ASSERT_TRUE(exists.ok());
    EXPECT_FALSE(*exists);
  }

  void ExpectRejected(const Flow& flow, std::string_view fragment) {
    absl::StatusOr<DeployOutcome> outcome = engine().Deploy(flow);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(outcome.status().message()),
                HasSubstr(std::string(fragment)));
    ExpectNothingStored(absl::AsciiStrToLower(flow.slug()));
  }
};

Flow TwoSteps(std::string slug) {
  Flow flow(std::move(slug));
  flow.Step("first", Echo()).Step("second", {.depends_on = {"first"}}, Echo());
  return flow;
}

TEST_P(Definitions, InvalidFlowSlug_IsRejectedBeforeAnyWrite) {
  Flow flow("9lives");
  flow.Step("a", Echo());
  ExpectRejected(flow, "flow slug \"9lives\" is invalid");
}

TEST_P(Definitions, ReservedStepSlugRun_IsRejected) {
  Flow flow("reserved");
  flow.Step("run", Echo());
  ExpectRejected(flow, "reserved");
}

TEST_P(Definitions, DuplicateStep_IsRejected) {
  Flow flow("dupes");
  flow.Step("fetch", Echo()).Step("fetch", Echo());
  ExpectRejected(flow, "step \"fetch\" is defined twice");
}

TEST_P(Definitions, DuplicateStepIgnoringCase_IsRejected) {
  Flow flow("dupes_case");
  flow.Step("fetch", Echo()).Step("Fetch", Echo());
  ExpectRejected(flow, "defined twice");
}

TEST_P(Definitions, UnknownDependency_IsRejectedAndNamed) {
  Flow flow("greet_user");
  flow.Step("send", {.depends_on = {"lookup"}}, Echo());
  ExpectRejected(flow,
                 "flow \"greet_user\": step \"send\" depends on unknown "
                 "step \"lookup\"");
}

TEST_P(Definitions, SelfDependency_IsRejected) {
  Flow flow("selfish");
  flow.Step("a", {.depends_on = {"a"}}, Echo());
  ExpectRejected(flow, "depends on itself");
}

TEST_P(Definitions, MapStepWithTwoDependencies_IsRejected) {
  Flow flow("two_sources");
  flow.Step("a", Echo())
      .Step("b", Echo())
      .Map("m", {.depends_on = {"a", "b"}}, Echo());
  ExpectRejected(flow, "map step with 2 dependencies");
}

TEST_P(Definitions, QueueNameOver47Characters_IsRejected) {
  std::string slug(48, 'q');
  Flow flow(slug);
  flow.Step("a", Echo());
  ExpectRejected(flow, "queue names are at most 47");
}

TEST_P(Definitions, InvalidOptions_AreRejected) {
  Flow attempts("bad_attempts");
  attempts.Step("a", {.max_attempts = 0}, Echo());
  ExpectRejected(attempts, "max_attempts 0 is out of range");

  Flow delay("bad_delay");
  delay.Step("a", {.base_delay = absl::Seconds(-1)}, Echo());
  ExpectRejected(delay, "base_delay");

  Flow timeout("bad_timeout", {.timeout = absl::ZeroDuration()});
  timeout.Step("a", Echo());
  ExpectRejected(timeout, "timeout");

  Flow start("bad_start");
  start.Step("a", {.start_delay = absl::InfiniteDuration()}, Echo());
  ExpectRejected(start, "start_delay");
}

TEST_P(Definitions, NonObjectConditionPattern_IsRejected) {
  Flow flow("bad_pattern");
  flow.Step("a", {.if_pattern = J("[1]")}, Echo());
  ExpectRejected(flow, "\"if\" pattern must be a JSON object, not array");
}

TEST_P(Definitions, FlowWithoutSteps_IsRejected) {
  Flow flow("empty");
  ExpectRejected(flow, "has no steps");
}

TEST_P(Definitions, NewFlow_IsCompiled_ThenIdenticalFlowIsVerified) {
  Flow flow = TwoSteps("compile_me");
  absl::StatusOr<DeployOutcome> first = engine().Deploy(flow);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, DeployOutcome::kCompiled);
  absl::StatusOr<DeployOutcome> second =
      engine().Deploy(TwoSteps("compile_me"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, DeployOutcome::kVerified);
}

TEST_P(Definitions, VerifiedAfterRestart_ReadsTheStoredDefinition) {
  Deploy(TwoSteps("restartable"));
  UseEngine(backend());  // a fresh engine has no cached definitions
  absl::StatusOr<DeployOutcome> again =
      engine().Deploy(TwoSteps("restartable"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
}

TEST_P(Definitions, ChangedShape_IsAMismatchNamingEveryDifference) {
  Deploy(TwoSteps("shape"));
  Flow changed("shape");
  changed.Step("first", {.if_pattern = J(R"({"run":{"x":1}})")}, Echo())
      .Map("second", {.depends_on = {"first"}}, Echo())
      .Step("third", Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(changed);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(outcome.status().message());
  EXPECT_THAT(message, HasSubstr("new slug"));
  EXPECT_THAT(message, HasSubstr("3 steps here but 2"));
  EXPECT_THAT(
      message,
      HasSubstr(
          "step 0 (\"first\"): if is {\"run\":{\"x\":1}} here but unset"));
  EXPECT_THAT(message,
              HasSubstr("step 1 (\"second\"): kind is map here but single"));
  EXPECT_THAT(message, HasSubstr("step 2 (\"third\") is new here"));
  // Nothing changed: the stored shape still verifies, and runs still start.
  absl::StatusOr<DeployOutcome> original = engine().Deploy(TwoSteps("shape"));
  ASSERT_TRUE(original.ok()) << original.status();
  EXPECT_EQ(*original, DeployOutcome::kVerified);
}

TEST_P(Definitions, ChangedOption_IsAMismatch) {
  Deploy(TwoSteps("options"));
  Flow changed("options", {.max_attempts = 5});
  changed.Step("first", Echo())
      .Step("second", {.depends_on = {"first"}}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(changed);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("flow option max_attempts is 5 here but 3"));
}

TEST_P(Definitions, DependencyOrderChange_IsAMismatch) {
  Flow a("deps_order");
  a.Step("x", Echo())
      .Step("y", Echo())
      .Step("z", {.depends_on = {"x", "y"}}, Echo());
  Deploy(a);
  Flow b("deps_order");
  b.Step("x", Echo())
      .Step("y", Echo())
      .Step("z", {.depends_on = {"y", "x"}}, Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(b);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("depends_on is [y, x] here but [x, y]"));
}

TEST_P(Definitions, FlowWhoseQueueAnotherFlowOwns_IsRefused) {
  Deploy(TwoSteps("orders"));
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(TwoSteps("Orders"));
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("queue \"orders\" is owned by flow \"orders\""));
}

TEST_P(Definitions, StoredDefinition_RoundTripsEveryField) {
  Flow flow("full", {.max_attempts = 4,
                     .base_delay = absl::Milliseconds(1500),
                     .timeout = absl::Seconds(9)});
  flow.Step("a",
            {.max_attempts = 2,
             .base_delay = absl::Seconds(1),
             .timeout = absl::Seconds(3),
             .start_delay = absl::Seconds(4),
             .if_pattern = J(R"({"run":{"go":true}})"),
             .if_not_pattern = J(R"({"run":{"stop":true}})"),
             .when_unmet = Policy::kSkipCascade,
             .when_exhausted = Policy::kSkip},
            Echo())
      .Map("b", {.depends_on = {"a"}, .when_exhausted = Policy::kFail}, Echo());
  Deploy(flow);
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  auto stored = (*tx)->GetFlow("full");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  absl::StatusOr<FlowShape> shape = FlowShape::FromJson((*stored)->definition);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_TRUE(flow.shape().DifferencesFrom(*shape).empty());
  EXPECT_EQ(shape->steps[0].spec.start_delay, absl::Seconds(4));
  EXPECT_EQ(shape->options.base_delay, absl::Milliseconds(1500));
}

TEST_P(Definitions, StartWorker_FailedDeploy_RegistersNoWorker) {
  Deploy(TwoSteps("fenced"));
  Flow changed("fenced");
  changed.Step("first", Echo());
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(changed);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kFailedPrecondition);
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  auto workers = (*tx)->ListWorkers();
  ASSERT_TRUE(workers.ok());
  EXPECT_TRUE(workers->empty());
}

TEST_P(Definitions, StartWorker_WithoutHandler_IsRejected) {
  Flow flow("no_handler");
  flow.Step("a", StepSpec{});
  absl::StatusOr<std::unique_ptr<Worker>> worker = engine().StartWorker(flow);
  ASSERT_FALSE(worker.ok());
  EXPECT_THAT(std::string(worker.status().message()),
              HasSubstr("has no handler"));
  ExpectNothingStored("no_handler");
}

SLUICE_CONFORMANCE_SUITE(Definitions);

}  // namespace
}  // namespace sluice::testing
