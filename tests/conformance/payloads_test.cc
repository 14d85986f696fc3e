// Payloads no backend can store and read back are refused on the way in, so
// one bad value never blocks a queue.
#include <limits>

#include "harness.h"
#include "sluice/errors.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class Payloads : public Conformance {};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInfinity = std::numeric_limits<double>::infinity();

Flow TwoSteps(std::string slug) {
  Flow flow(std::move(slug), {.max_attempts = 3});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  return flow;
}

void ExpectRefused(const absl::Status& status, std::string_view needle) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(needle));
}

TEST_P(Payloads, RunInputThatCannotBeStored_IsRefusedAndNothingIsStored) {
  Flow flow = TwoSteps("bad_input");
  Deploy(flow);
  ExpectRefused(engine().StartRun("bad_input", Json{{"a", kInfinity}}).status(),
                "run input holds a number that is not finite");
  ExpectRefused(engine().StartRun("bad_input", Json{{"a", kNaN}}).status(),
                "at $.a");
  ExpectRefused(
      engine().StartRun("bad_input", Json{{"s", "bad \xff byte"}}).status(),
      "not valid UTF-8");
  std::vector<Json> batch = {J("{}"), Json{{"x", {1, kNaN}}}};
  ExpectRefused(engine().StartRuns("bad_input", batch).status(),
                "run input 1 holds a number that is not finite (JSON has no "
                "Infinity or NaN) at $.x[1]");
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_TRUE(runs->empty());
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(Payloads, HandlerOutputThatCannotBeStored_FailsOnlyThatTask) {
  Flow flow = TwoSteps("bad_output");
  Deploy(flow);
  RunId bad = Start(flow, J(R"({"n":1})"));
  RunId good = Start(flow, J(R"({"n":2})"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 2u);
  const ClaimedTask& bad_task =
      claimed[0].key.run_id == bad ? claimed[0] : claimed[1];
  const ClaimedTask& good_task =
      claimed[0].key.run_id == bad ? claimed[1] : claimed[0];
  FinishOutcome outcome =
      Finish({{bad_task.key, bad_task.attempt, Json{{"ratio", kNaN}}},
              {good_task.key, good_task.attempt, J(R"({"n":2})")}});
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kFailed);
  EXPECT_EQ(outcome.dispositions[1], ResultDisposition::kCompleted);
  // Not retried although attempts remain: the same handler would return the
  // same value.
  TaskRecord task = TaskOf(bad, "a");
  EXPECT_EQ(task.status, TaskStatus::kFailed);
  EXPECT_EQ(task.attempts, 1);
  EXPECT_THAT(task.error,
              HasSubstr("handler output holds a number that is not finite "
                        "(JSON has no Infinity or NaN) at $.ratio"));
  EXPECT_EQ(View(bad).run.status, RunStatus::kFailed);
  // Everything stays readable, and the other run goes on.
  EXPECT_EQ(Drive(flow), 1);
  EXPECT_EQ(View(good).run.status, RunStatus::kCompleted);
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->size(), 2u);
  absl::StatusOr<int> stale = engine().ApplyStaleReports(100);
  EXPECT_TRUE(stale.ok()) << stale.status();
}

TEST_P(Payloads, HandlerErrorTextThatIsNotUtf8_IsStoredRepaired) {
  Flow flow("bad_error_text");
  flow.Step("a", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(Claim(flow)[0], NonRetryable("bad \xff\xfe byte"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(view.run.error, "bad \xef\xbf\xbd\xef\xbf\xbd byte");
  EXPECT_EQ(TaskOf(run, "a").error, view.run.error);
}

TEST_P(Payloads, ConditionPatternThatCannotBeStored_IsRefusedAtDefinition) {
  Flow flow("bad_pattern");
  flow.Step("a", {.if_pattern = Json{{"x", kInfinity}}}, Echo());
  absl::StatusOr<DeployOutcome> deployed = engine().Deploy(flow);
  ExpectRefused(deployed.status(),
                "step \"a\": the \"if\" pattern holds a number that is not "
                "finite (JSON has no Infinity or NaN) at $.x");
}

SLUICE_CONFORMANCE_SUITE(Payloads);

}  // namespace
}  // namespace sluice::testing
