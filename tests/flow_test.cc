#include "sluice/flow.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/errors.h"
#include "sluice/ids.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

Handler Noop() {
  return
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; };
}

TEST(ValidateSlug, AcceptsIdentifiersAndRejectsTheRest) {
  EXPECT_TRUE(ValidateSlug("greet_user", "flow").ok());
  EXPECT_TRUE(ValidateSlug("_private2", "flow").ok());
  EXPECT_FALSE(ValidateSlug("", "flow").ok());
  EXPECT_FALSE(ValidateSlug("2fast", "flow").ok());
  EXPECT_FALSE(ValidateSlug("has-dash", "flow").ok());
  EXPECT_FALSE(ValidateSlug("run", "flow").ok());
  EXPECT_FALSE(ValidateSlug(std::string(129, 'a'), "flow").ok());
  EXPECT_TRUE(ValidateSlug(std::string(128, 'a'), "flow").ok());
}

TEST(Flow, FirstErrorWins_AndNamesFlowAndStep) {
  Flow flow("f");
  flow.Step("a", {.depends_on = {"zzz"}}, Noop()).Step("a", Noop());
  absl::Status status = flow.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("flow \"f\": step \"a\" depends on unknown step \"zzz\""));
}

TEST(Flow, ValidFlow_PassesAndKeepsDefinitionOrder) {
  Flow flow("f", {.max_attempts = 2});
  flow.Step("a", Noop()).Map("b", {.depends_on = {"a"}}, Noop());
  ASSERT_TRUE(flow.Validate().ok());
  ASSERT_EQ(flow.shape().steps.size(), 2u);
  EXPECT_EQ(flow.shape().steps[1].kind, StepKind::kMap);
  EXPECT_EQ(flow.shape().steps[1].queue_name, "f");
  EXPECT_EQ(flow.shape().StepIndex("b"), 1);
  EXPECT_EQ(flow.shape().StepIndex("c"), -1);
}

TEST(FlowShape, JsonRoundTrip_IsLossless) {
  Flow flow("round_trip", {.max_attempts = 7,
                           .base_delay = absl::Microseconds(1500),
                           .timeout = absl::Minutes(2)});
  flow.Step("a",
            {.start_delay = absl::Seconds(3),
             .if_pattern = Json{{"run", {{"k", nullptr}}}},
             .when_unmet = Policy::kFail},
            Noop())
      .Map("b",
           {.depends_on = {"a"},
            .max_attempts = 1,
            .when_exhausted = Policy::kSkipCascade},
           Noop());
  absl::StatusOr<FlowShape> back = FlowShape::FromJson(flow.shape().ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(flow.shape().DifferencesFrom(*back).empty());
  EXPECT_EQ(back->steps[0].spec.if_pattern,
            flow.shape().steps[0].spec.if_pattern);
}

TEST(FlowShape, CorruptStoredDefinition_IsAnInternalError) {
  absl::StatusOr<FlowShape> shape = FlowShape::FromJson(Json{{"slug", 5}});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInternal);
}

TEST(Errors, RetryAfterCarriesItsDelay_NonRetryableIsMarked) {
  absl::Status retry = RetryAfter(absl::Seconds(30), "later");
  EXPECT_EQ(RetryDelayOf(retry), absl::Seconds(30));
  EXPECT_FALSE(IsNonRetryable(retry));
  absl::Status fatal = NonRetryable("never");
  EXPECT_TRUE(IsNonRetryable(fatal));
  EXPECT_EQ(RetryDelayOf(fatal), std::nullopt);
  EXPECT_EQ(RetryDelayOf(RetryAfter(absl::InfiniteDuration(), "x")),
            absl::InfiniteDuration());
}

TEST(Errors, ValidateRetryDelay_RejectsNegativeInfiniteAndTooLong) {
  EXPECT_TRUE(ValidateRetryDelay(absl::ZeroDuration()).ok());
  EXPECT_TRUE(ValidateRetryDelay(kMaxRetryDelay).ok());
  EXPECT_FALSE(ValidateRetryDelay(-absl::Seconds(1)).ok());
  EXPECT_FALSE(ValidateRetryDelay(absl::InfiniteDuration()).ok());
  EXPECT_FALSE(ValidateRetryDelay(kMaxRetryDelay + absl::Seconds(1)).ok());
}

TEST(RunId, ParsesItsOwnTextAndRejectsOtherText) {
  RunId id = RunId::Random();
  absl::StatusOr<RunId> back = RunId::Parse(id.ToString());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, id);
  EXPECT_EQ(id.ToString().size(), 36u);
  EXPECT_EQ(id.ToString()[14], '7');  // version 7: time-ordered
  EXPECT_EQ(NewWorkerId().size(), 15u);
  EXPECT_FALSE(RunId::Parse("not-a-uuid").ok());
  EXPECT_FALSE(RunId::Parse("0123456789abcdef0123456789abcdef0123").ok());
  EXPECT_NE(RunId::Random(), RunId::Random());
}

}  // namespace
}  // namespace sluice
