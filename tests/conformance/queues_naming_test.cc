// Queue modes and names: step mode's private queue per step at the 47/48
// character boundary, a whole flow refused when a step's name can't fit,
// explicit step -> queue maps, and the stored form of each mode.
#include "absl/strings/ascii.h"
#include "queues_fixture.h"
#include "sluice/job.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class QueueNames : public QueuesConformance {};

TEST_P(QueueNames, StepMode_NameOf47Characters_IsFlowDoubleUnderscoreStep) {
  // 40 + "__" + 5 = 47: fits.
  std::string slug = SlugOfLength("StepFits", 40);
  Flow flow(slug, {.queue_per_step = true});
  flow.Step("Abcde", Echo()).Step("b", {.depends_on = {"Abcde"}}, Echo());
  ASSERT_TRUE(flow.Validate().ok()) << flow.Validate();
  std::string lower = absl::AsciiStrToLower(slug);
  std::string first = StrCat(lower, "__abcde");
  ASSERT_EQ(first.size(), 47u);
  EXPECT_EQ(flow.shape().queue_mode, QueueMode::kStep);
  EXPECT_EQ(flow.shape().steps[0].queue_name, first);
  EXPECT_EQ(flow.shape().steps[1].queue_name, StrCat(lower, "__b"));
  Deploy(flow);
  std::optional<QueueRecord> entry = Registered(first);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->owner_flow, slug);  // private to the concrete flow
  ASSERT_TRUE(Registered(StrCat(lower, "__b")).has_value());
  EXPECT_EQ(Registered(StrCat(lower, "__b"))->owner_flow, slug);
  // The flow-mode queue lower(slug) is not created in step mode.
  EXPECT_FALSE(Registered(lower).has_value());
}

TEST_P(QueueNames, StepMode_NameOf48Characters_FallsBackToTheStepIndex) {
  std::string slug = SlugOfLength("stepfalls", 40);
  Flow flow(slug, {.queue_per_step = true});
  flow.Step("a", Echo())
      .Step("abcdef", {.depends_on = {"a"}}, Echo());  // 40 + 2 + 6 = 48
  ASSERT_TRUE(flow.Validate().ok()) << flow.Validate();
  EXPECT_EQ(flow.shape().steps[0].queue_name, StrCat(slug, "__a"));
  EXPECT_EQ(flow.shape().steps[1].queue_name, StrCat(slug, "__1"));
  Deploy(flow);
  EXPECT_THAT(RegisteredNames(),
              ElementsAre(StrCat(slug, "__1"), StrCat(slug, "__a")));
  // A run's tasks go to those queues, and complete there.
  RunId run = Start(flow, J("7"));
  EXPECT_THAT(DriveEveryQueue(flow),
              ElementsAre(StrCat(slug, "__a"), StrCat(slug, "__1")));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(TaskOf(run, "abcdef").queue_name, StrCat(slug, "__1"));
}

TEST_P(QueueNames, StepMode_IndexFormTooLong_RejectsTheWholeFlowUnchanged) {
  // 44 + "__" + 1 = 47 fits for one-letter steps at indexes 0..9; index 10
  // ("kk", 48) falls back to "__10", 48 too: nothing fits.
  std::string slug = SlugOfLength("toolong", 44);
  Flow flow(slug, {.queue_per_step = true});
  for (char c = 'a'; c <= 'j'; ++c) flow.Step(std::string(1, c), Echo());
  flow.Step("kk", Echo());
  absl::Status invalid = flow.Validate();
  ASSERT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("step \"kk\""));
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("(index 10)"));
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("is 48 characters"));
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("at most 47"));

  absl::StatusOr<DeployOutcome> deployed = engine().Deploy(flow);
  EXPECT_EQ(deployed.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(WorkerSpec().Serve(flow, {"a"}), Fast());
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kInvalidArgument);
  // Not even the steps whose names fit got a queue.
  EXPECT_THAT(RegisteredNames(), IsEmpty());
  EXPECT_FALSE(FlowStored(slug));
}

TEST_P(QueueNames, StepMode_StoredShapeKeepsModeAndQueues_ChangesAreNamed) {
  Flow flow("steps_stored", {.queue_per_step = true});
  flow.Step("fetch", Echo()).Step("save", {.depends_on = {"fetch"}}, Echo());
  Deploy(flow);
  FlowShape stored = StoredShape("steps_stored");
  EXPECT_EQ(stored.queue_mode, QueueMode::kStep);
  EXPECT_TRUE(stored.options.queue_per_step);
  EXPECT_EQ(stored.steps[0].queue_name, "steps_stored__fetch");
  EXPECT_EQ(stored.steps[1].queue_name, "steps_stored__save");
  EXPECT_THAT(flow.shape().DifferencesFrom(stored), IsEmpty());
  EXPECT_EQ(*engine().Deploy(flow), DeployOutcome::kVerified);

  // The same steps on the flow's one queue are a different shape.
  Flow one_queue("steps_stored");
  one_queue.Step("fetch", Echo())
      .Step("save", {.depends_on = {"fetch"}}, Echo());
  absl::StatusOr<DeployOutcome> changed = engine().Deploy(one_queue);
  ASSERT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(changed.status().message());
  EXPECT_THAT(message, HasSubstr("queue mode is flow here but step"));
  EXPECT_THAT(message, HasSubstr("queue is steps_stored here but "
                                 "steps_stored__fetch"));
  EXPECT_FALSE(Registered("steps_stored").has_value());
}

TEST_P(QueueNames, ExplicitMode_MapsStepsOntoSharedQueues_RestOnFlowQueue) {
  Flow flow("explicit_map", {.queue = "batch"});
  flow.Step("load", Echo())
      .Step("render", {.depends_on = {"load"}, .queue = "gpu"}, Echo())
      .Step("mail", {.depends_on = {"render"}, .queue = "mail"}, Echo());
  ASSERT_TRUE(flow.Validate().ok()) << flow.Validate();
  EXPECT_EQ(flow.shape().queue_mode, QueueMode::kExplicit);
  Deploy(flow);
  EXPECT_THAT(RegisteredNames(), ElementsAre("batch", "gpu", "mail"));
  for (const char* queue : {"batch", "gpu", "mail"}) {
    ASSERT_TRUE(Registered(queue).has_value()) << queue;
    EXPECT_EQ(Registered(queue)->owner_flow, "") << queue;  // shared
  }
  FlowShape stored = StoredShape("explicit_map");
  EXPECT_EQ(stored.queue_mode, QueueMode::kExplicit);
  EXPECT_EQ(stored.steps[0].queue_name, "batch");
  EXPECT_EQ(stored.steps[1].queue_name, "gpu");
  EXPECT_THAT(flow.shape().DifferencesFrom(stored), IsEmpty());

  // Moving a step to another queue is a difference naming the step.
  Flow moved("explicit_map", {.queue = "batch"});
  moved.Step("load", Echo())
      .Step("render", {.depends_on = {"load"}, .queue = "gpu2"}, Echo())
      .Step("mail", {.depends_on = {"render"}, .queue = "mail"}, Echo());
  absl::StatusOr<DeployOutcome> changed = engine().Deploy(moved);
  ASSERT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(changed.status().message()),
              HasSubstr("step 1 (\"render\"): queue is gpu2 here but gpu"));
  EXPECT_FALSE(Registered("gpu2").has_value());
}

TEST_P(QueueNames, ExplicitMode_UnmappedStepWithoutFlowQueue_IsRefused) {
  Flow flow("explicit_gap");
  flow.Step("load", Echo())
      .Step("render", {.depends_on = {"load"}, .queue = "gpu"}, Echo());
  absl::Status invalid = flow.Validate();
  ASSERT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(invalid.message()),
              HasSubstr("step \"load\" names no queue"));
  EXPECT_EQ(engine().Deploy(flow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(RegisteredNames(), IsEmpty());

  Flow both("explicit_both", {.queue_per_step = true});
  both.Step("a", {.queue = "gpu"}, Echo());
  EXPECT_THAT(std::string(both.Validate().message()),
              HasSubstr("queue_per_step gives every step a private queue"));
  Flow bad_name("explicit_bad", {.queue = "ok"});
  bad_name.Step("a", {.queue = "Not-Valid"}, Echo());
  EXPECT_THAT(std::string(bad_name.Validate().message()),
              HasSubstr("flow \"explicit_bad\": step \"a\": queue name"));
}

TEST_P(QueueNames, SharedMode_KeepsItsStoredFormAndStillVerifies) {
  Flow flow("shared_form", {.queue = "common"});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  EXPECT_EQ(flow.shape().queue_mode, QueueMode::kShared);
  Deploy(flow);
  // The form stored before step and explicit modes existed.
  Json json = flow.shape().ToJson();
  const boost::json::object& root = json.as_object();
  EXPECT_EQ(root.at("queue_mode"), J("\"shared\""));
  EXPECT_EQ(root.at("options").as_object().at("queue"), J("\"common\""));
  EXPECT_FALSE(root.at("options").as_object().contains("queue_per_step"));
  FlowShape stored = StoredShape("shared_form");
  EXPECT_EQ(stored.queue_mode, QueueMode::kShared);
  EXPECT_EQ(stored.options.queue, "common");
  EXPECT_EQ(*engine().Deploy(flow), DeployOutcome::kVerified);
  ASSERT_TRUE(Registered("common").has_value());
  EXPECT_EQ(Registered("common")->owner_flow, "");
  RunId run = Start(flow, J("1"));
  EXPECT_EQ(Drive(flow), 2);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

SLUICE_CONFORMANCE_SUITE(QueueNames);

}  // namespace
}  // namespace sluice::testing
