// Events: delivered after commit, causes before effects.
#include "harness.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

class Events : public Conformance {
 protected:
  void SetUp() override {
    Conformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend to watch
    engine().Subscribe([this](const Event& e) {
      std::string name(ToString(e.kind));
      if (!e.step_slug.empty()) name += "(" + e.step_slug + ")";
      seen_.push_back(name);
      events_.push_back(e);
    });
  }
  std::vector<std::string> seen_;
  std::vector<Event> events_;
};

TEST_P(Events, SuccessfulRun_CausesComeBeforeEffects) {
  Flow flow("evented");
  flow.Step("a", Returns(J("[1,2]")))
      .Map("b", {.depends_on = {"a"}}, Echo())
      .Step("c", {.depends_on = {"b"}}, Echo());
  Deploy(flow);
  Start(flow, J("{}"));
  Drive(flow);
  EXPECT_THAT(seen_, ElementsAre("run:started", "step:started(a)",
                                 "step:completed(a)", "step:started(b)",
                                 "step:completed(b)", "step:started(c)",
                                 "step:completed(c)", "run:completed"));
  EXPECT_EQ(*events_[4].value, J("[1,2]"));  // the aggregated map output
  EXPECT_EQ(*events_[0].value, J("{}"));     // the run input
}

TEST_P(Events, EmptyMap_EmitsOnlyStepCompleted) {
  Flow flow("empty_events");
  flow.Map("each", Echo());
  Deploy(flow);
  Start(flow, J("[]"));
  EXPECT_THAT(seen_, ElementsAre("run:started", "step:completed(each)",
                                 "run:completed"));
}

// StartRun lends the caller's input to the new run (decision 0061): the
// event, the stored run and the map's tasks all read it.
TEST_P(Events, RootMap_StartedEventAndStoredRunCarryTheCallersInput) {
  Flow flow("lent_events");
  flow.Map("each", Echo());
  Deploy(flow);
  const Json input = J(R"([1,{"a":[2]}])");
  RunId id = Start(flow, input);
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(*events_[0].value, input);
  EXPECT_EQ(View(id).run.input, input);
  Drive(flow);
  EXPECT_EQ(View(id).run.output, J(R"({"each":[1,{"a":[2]}]})"));
}

TEST_P(Events, ConditionFailure_StepFailedBeforeRunFailed) {
  Flow flow("fail_events");
  flow.Step(
      "guard",
      {.if_pattern = J(R"({"run":{"ok":true}})"), .when_unmet = Policy::kFail},
      Echo());
  Deploy(flow);
  Start(flow, J("{}"));
  EXPECT_THAT(seen_,
              ElementsAre("run:started", "step:failed(guard)", "run:failed"));
  EXPECT_EQ(events_[2].error, "Condition not met");
}

TEST_P(Events, HandlerSkip_EmitsOneStepSkipped_EvenWhenReplayed) {
  Flow flow("skip_events");
  flow.Map("each", {.max_attempts = 1, .when_exhausted = Policy::kSkip},
           Echo());
  Deploy(flow);
  Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  Fail(claimed[0], absl::InternalError("x"));
  Fail(claimed[1], absl::InternalError("y"));  // late: the step was skipped
  EXPECT_THAT(seen_, ElementsAre("run:started", "step:started(each)",
                                 "step:skipped(each)", "run:completed"));
  EXPECT_EQ(events_[2].skip_reason, SkipReason::kHandlerFailed);
  EXPECT_EQ(events_[2].error, "x");
}

TEST_P(Events, SuccessfulRun_HasNoFailureEvents_AndCancelEmitsRunCancelled) {
  Flow flow("cancel_events");
  flow.Step("a", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(engine().CancelRun(run).ok());
  EXPECT_THAT(seen_,
              ElementsAre("run:started", "step:started(a)", "run:cancelled"));
}

TEST_P(Events, FailedTransaction_PublishesNothing) {
  Flow flow("no_events_on_error");
  flow.Map("each", Echo());
  Deploy(flow);
  EXPECT_FALSE(engine().StartRun("no_events_on_error", J("{}")).ok());
  EXPECT_TRUE(seen_.empty());
}

TEST_P(Events, Unsubscribe_StopsDelivery) {
  Flow flow("unsubscribe");
  flow.Step("a", Echo());
  Deploy(flow);
  int count = 0;
  int id = engine().Subscribe([&count](const Event&) { ++count; });
  Start(flow, J("{}"));
  EXPECT_EQ(count, 2);
  engine().Unsubscribe(id);
  Start(flow, J("{}"));
  EXPECT_EQ(count, 2);
}

SLUICE_CONFORMANCE_SUITE(Events);

}  // namespace
}  // namespace sluice::testing
