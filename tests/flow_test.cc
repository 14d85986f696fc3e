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

TEST(QueueModes, ModeFollowsTheOptions) {
  Flow plain("Plain");
  plain.Step("a", Noop());
  EXPECT_EQ(plain.shape().queue_mode, QueueMode::kFlow);
  EXPECT_EQ(plain.shape().steps[0].queue_name, "plain");
  Flow shared("s", {.queue = "q"});
  shared.Step("a", Noop());
  EXPECT_EQ(shared.shape().queue_mode, QueueMode::kShared);
  Flow step("Big", {.queue_per_step = true});
  step.Step("Fetch", Noop()).Step("store", Noop());
  EXPECT_EQ(step.shape().queue_mode, QueueMode::kStep);
  EXPECT_EQ(step.shape().steps[0].queue_name, "big__fetch");
  EXPECT_EQ(step.shape().steps[1].queue_name, "big__store");
  Flow mapped("m", {.queue = "rest"});
  mapped.Step("a", Noop()).Step("b", {.queue = "gpu"}, Noop());
  EXPECT_EQ(mapped.shape().queue_mode, QueueMode::kExplicit);
  EXPECT_EQ(mapped.shape().steps[0].queue_name, "rest");
  EXPECT_EQ(mapped.shape().steps[1].queue_name, "gpu");
  const std::pair<const Flow*, QueueMode> cases[] = {
      {&plain, QueueMode::kFlow},
      {&shared, QueueMode::kShared},
      {&step, QueueMode::kStep},
      {&mapped, QueueMode::kExplicit}};
  for (const auto& [flow, mode] : cases) {
    const Flow& f = *flow;
    absl::StatusOr<FlowShape> back = FlowShape::FromJson(f.shape().ToJson());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->queue_mode, mode) << ToString(mode);
    EXPECT_TRUE(f.shape().DifferencesFrom(*back).empty()) << ToString(mode);
  }
}

TEST(QueueModes, StepQueueNames_AtTheBoundary) {
  // lower(flow__step) while it fits 47 characters, else lower(flow__index).
  std::string slug43(43, 'F');
  Flow flow(slug43, {.queue_per_step = true});
  flow.Step("ab", Noop())    // 43 + 2 + 2 = 47
      .Step("abc", Noop());  // 48: index form, 43 + 2 + 1 = 46
  ASSERT_TRUE(flow.Validate().ok()) << flow.Validate();
  std::string lower(43, 'f');
  EXPECT_EQ(flow.shape().steps[0].queue_name, lower + "__ab");
  EXPECT_EQ(flow.shape().steps[1].queue_name, lower + "__1");

  Flow too_long(std::string(46, 'g'), {.queue_per_step = true});
  too_long.Step("a", Noop());  // 46 + 2 + 1 = 49 either way
  absl::Status status = too_long.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("step \"a\" (index 0) has no private queue name that "
                        "fits"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("is 49 characters"));

  // Flow mode's one queue, lower(slug), must fit too.
  Flow long_slug(std::string(60, 'h'));
  long_slug.Step("a", Noop());
  EXPECT_THAT(std::string(long_slug.Validate().message()),
              HasSubstr("queue names are at most 47"));
}

TEST(QueueModes, ExplicitMode_NeedsAQueueForEveryStep) {
  Flow flow("m");
  flow.Step("a", Noop()).Step("b", {.queue = "gpu"}, Noop());
  EXPECT_THAT(std::string(flow.Validate().message()),
              HasSubstr("flow \"m\": step \"a\" names no queue"));
  // A flow slug too long for its own queue is fine when no step uses it.
  Flow long_slug(std::string(60, 'h'));
  long_slug.Step("a", {.queue = "gpu"}, Noop());
  EXPECT_TRUE(long_slug.Validate().ok()) << long_slug.Validate();
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

TEST(RunId, ParsesEitherCaseAndRejectsAnyOneCharacterOutOfPlace) {
  const std::string text = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
  absl::StatusOr<RunId> id = RunId::Parse(text);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->high(), 0x0193a1b2c3d47e5fULL);
  EXPECT_EQ(id->low(), 0x8a9b0c1d2e3f4a5bULL);
  EXPECT_EQ(
      RunId::Parse("0193A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B").value_or(RunId()),
      *id);
  for (size_t i = 0; i < text.size(); ++i) {
    for (char bad : {'g', 'G', '-', ' ', '\0', '\xff'}) {
      if (bad == '-' && text[i] == '-') continue;
      std::string wrong = text;
      wrong[i] = text[i] == '-' ? '0' : bad;
      EXPECT_FALSE(RunId::Parse(wrong).ok()) << i << " " << wrong;
    }
  }
}

TEST(RunId, IncreasesWithinAProcess_EvenPastThe12BitCounter) {
  // More ids than one millisecond's counter holds, made faster than that.
  RunId prev = RunId::Random();
  for (int i = 0; i < 10000; ++i) {
    RunId next = RunId::Random();
    ASSERT_LT(prev, next) << prev.ToString() << " then " << next.ToString();
    ASSERT_EQ(next.ToString()[14], '7') << next.ToString();
    prev = next;
  }
}

}  // namespace
}  // namespace sluice
