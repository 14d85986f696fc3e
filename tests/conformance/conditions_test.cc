// Conditions: if / if_not containment patterns, when_unmet policies, and
// how skips flow downstream.
#include "harness.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class Conditions : public Conformance {};

TEST_P(Conditions, MetIfCondition_RunsTheStep) {
  Flow flow("if_met");
  flow.Step("a", {.if_pattern = J(R"({"run":{"plan":"pro"}})")},
            Returns(J("1")));
  Deploy(flow);
  RunId run = Start(flow, J(R"({"plan":"pro","user":1})"));
  EXPECT_EQ(Drive(flow), 1);
  EXPECT_EQ(*View(run).run.output, J(R"({"a":1})"));
}

TEST_P(Conditions, UnmetIfCondition_SkipsByDefault) {
  Flow flow("if_unmet");
  flow.Step("a", {.if_pattern = J(R"({"run":{"plan":"pro"}})")},
            Returns(J("1")))
      .Step("b", Returns(J("2")));
  Deploy(flow);
  RunId run = Start(flow, J(R"({"plan":"free"})"));
  EXPECT_EQ(Drive(flow), 1);
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "a").status, StepStatus::kSkipped);
  EXPECT_EQ(StepOf(view, "a").skip_reason, SkipReason::kConditionUnmet);
  EXPECT_TRUE(StepOf(view, "a").output == std::nullopt);
  EXPECT_EQ(*view.run.output, J(R"({"b":2})"));
  // A skipped step never had tasks.
  for (const TaskRecord& t : view.tasks) EXPECT_NE(t.key.step_index, 0);
}

TEST_P(Conditions, IfNotCondition_SkipsWhenTheInputContainsThePattern) {
  Flow flow("if_not");
  flow.Step("a", {.if_not_pattern = J(R"({"run":{"dry_run":true}})")},
            Returns(J("1")));
  Deploy(flow);
  RunId wet = Start(flow, J(R"({"dry_run":false})"));
  RunId dry = Start(flow, J(R"({"dry_run":true})"));
  Drive(flow);
  EXPECT_EQ(StepOf(View(wet), "a").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(View(dry), "a").status, StepStatus::kSkipped);
}

TEST_P(Conditions, WhenUnmetFail_FailsTheRun) {
  Flow flow("unmet_fail");
  flow.Step("other", Echo())
      .Step("guard",
            {.if_pattern = J(R"({"run":{"ok":true}})"),
             .when_unmet = Policy::kFail},
            Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"({"ok":false})"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(view.run.error, "Condition not met");
  EXPECT_EQ(StepOf(view, "guard").status, StepStatus::kFailed);
  // The root task created before the failure was cancelled with the run.
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kCancelled);
  EXPECT_TRUE(MessageOf(view.tasks[0])->archived);
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(Conditions, WhenUnmetSkipCascade_SkipsEverythingDownstream) {
  Flow flow("unmet_cascade");
  flow.Step("gate",
            {.if_pattern = J(R"({"run":{"go":true}})"),
             .when_unmet = Policy::kSkipCascade},
            Echo())
      .Step("next", {.depends_on = {"gate"}}, Echo())
      .Step("last", {.depends_on = {"next"}}, Echo())
      .Step("free", Returns(J("3")));
  Deploy(flow);
  RunId run = Start(flow, J(R"({"go":false})"));
  EXPECT_EQ(Drive(flow), 1);
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "gate").skip_reason, SkipReason::kConditionUnmet);
  EXPECT_EQ(StepOf(view, "next").skip_reason, SkipReason::kDependencySkipped);
  EXPECT_EQ(StepOf(view, "last").skip_reason, SkipReason::kDependencySkipped);
  EXPECT_EQ(*view.run.output, J(R"({"free":3})"));
}

TEST_P(Conditions, PlainSkip_LetsDependentsRunWithoutTheSkippedOutput) {
  Flow flow("skip_then_run");
  flow.Step("maybe", {.if_pattern = J(R"({"run":{"x":1}})")}, Returns(J("1")))
      .Step("always", {.depends_on = {"maybe"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"({"x":2})"));
  EXPECT_EQ(Drive(flow), 1);
  EXPECT_EQ(*TaskOf(run, "always").output, J(R"({"run":{"x":2}})"));
}

TEST_P(Conditions, ConditionOnADependencyOutput) {
  Flow flow("on_output");
  flow.Step("check",
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              return boost::json::object{
                  {"valid", in.at("run").at("n").as_int64() > 0}};
            })
      .Step("use",
            {.depends_on = {"check"},
             .if_pattern = J(R"({"check":{"valid":true}})")},
            Returns(J("\"used\"")));
  Deploy(flow);
  RunId good = Start(flow, J(R"({"n":5})"));
  RunId bad = Start(flow, J(R"({"n":-5})"));
  Drive(flow);
  EXPECT_EQ(StepOf(View(good), "use").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(View(bad), "use").status, StepStatus::kSkipped);
}

TEST_P(Conditions, IfNotOnAnAbsentKey_RunsOnlyWhenTheDependencyWasSkipped) {
  // if_not {dep: {}} is the idiom for "only if dep was skipped": a skipped
  // dependency's key is absent from the input.
  Flow flow("fallback");
  flow.Step("primary", {.if_pattern = J(R"({"run":{"use_primary":true}})")},
            Returns(J(R"({"value":"primary"})")))
      .Step(
          "fallback",
          {.depends_on = {"primary"}, .if_not_pattern = J(R"({"primary":{}})")},
          Returns(J("\"fallback\"")));
  Deploy(flow);
  RunId with_primary = Start(flow, J(R"({"use_primary":true})"));
  RunId without = Start(flow, J(R"({"use_primary":false})"));
  Drive(flow);
  EXPECT_EQ(StepOf(View(without), "fallback").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(View(with_primary), "primary").status,
            StepStatus::kCompleted);
  EXPECT_EQ(StepOf(View(with_primary), "fallback").status,
            StepStatus::kSkipped);
}

TEST_P(Conditions, MapWhoseSourceWasSkipped_GetsNoTasksAndAnEmptyOutput) {
  Flow flow("skipped_source");
  flow.Step("list", {.if_pattern = J(R"({"run":{"list":true}})")},
            Returns(J("[1,2]")))
      .Map("each", {.depends_on = {"list"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J(R"({"list":false})"));
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "each").initial_tasks, 0);
  EXPECT_EQ(*StepOf(view, "each").output, J("[]"));
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"each":[]})"));
}

TEST_P(Conditions, AllStepsSkipped_CompletesTheRunWithAnEmptyOutput) {
  Flow flow("all_skipped");
  flow.Step("a", {.if_pattern = J(R"({"run":{"never":1}})")}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J("{}"));
}

TEST_P(Conditions, MapStepCondition_IsTestedAgainstTheRunInput) {
  Flow flow("map_condition");
  flow.Map("each", {.if_pattern = J(R"({"run":[2]})")}, Echo());
  Deploy(flow);
  RunId has_two = Start(flow, J("[1,2,3]"));
  RunId no_two = Start(flow, J("[1,3]"));
  Drive(flow);
  EXPECT_EQ(StepOf(View(has_two), "each").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(View(no_two), "each").status, StepStatus::kSkipped);
}

TEST_P(Conditions, ConditionFailure_AfterAStepCompletes_CancelsItsSiblings) {
  Flow flow("late_guard");
  flow.Step("first", Returns(J(R"({"ok":false})")))
      .Map("slow", Echo())
      .Step("guard",
            {.depends_on = {"first"},
             .if_pattern = J(R"({"first":{"ok":true}})"),
             .when_unmet = Policy::kFail},
            Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 3u);
  for (const ClaimedTask& t : claimed) {
    if (t.step_slug == "first") Complete(t, J(R"({"ok":false})"));
  }
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("Condition not met"));
  EXPECT_EQ(TaskOf(run, "slow", 0).status, TaskStatus::kCancelled);
  EXPECT_EQ(TaskOf(run, "slow", 1).status, TaskStatus::kCancelled);
}

SLUICE_CONFORMANCE_SUITE(Conditions);

}  // namespace
}  // namespace sluice::testing
