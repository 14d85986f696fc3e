// Unit tests of the engine's internal parts.
#include <thread>

#include "compiled_flow.h"
#include "event_publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lease.h"
#include "queue_name.h"
#include "queue_signals.h"
#include "server_claim_backoff.h"
#include "sluice/internal/implicit_steps.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;

Handler Noop() {
  return
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; };
}

std::shared_ptr<const CompiledFlow> Compile(const Flow& flow) {
  absl::StatusOr<std::shared_ptr<const CompiledFlow>> c =
      CompiledFlow::Compile(flow.shape());
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(CompiledFlow, DerivesDependentsLeavesAndEffectiveOptions) {
  Flow flow("derived", {.max_attempts = 4, .timeout = absl::Seconds(60)});
  flow.Step("a", Noop())
      .Map("b", {.depends_on = {"a"}, .timeout = absl::Seconds(5)}, Noop())
      .Step("c", {.depends_on = {"a", "b"}}, Noop())
      .Map("root_map", Noop());
  auto c = Compile(flow);
  EXPECT_THAT(c->step(0).dependents, ElementsAre(1, 2));
  EXPECT_TRUE(c->step(0).feeds_map);
  EXPECT_FALSE(c->step(0).is_leaf);
  EXPECT_TRUE(c->step(2).is_leaf);
  EXPECT_EQ(c->step(1).timeout, absl::Seconds(5));
  EXPECT_EQ(c->step(2).timeout, absl::Seconds(60));
  EXPECT_EQ(c->step(2).max_attempts, 4);
  EXPECT_EQ(c->root_map_step(), 3);
  EXPECT_THAT(c->queues(), ElementsAre("derived"));
}

TEST(Lease, ClaimHeartbeatAndRecoveryShareOneTimeout) {
  Flow flow("lease");
  flow.Step("a", {.timeout = absl::Seconds(10)}, Noop());
  auto c = Compile(flow);
  EngineOptions options;
  absl::Time now = absl::FromUnixSeconds(1000);
  LeaseTimes lease = ComputeLease(c->step(0).timeout, now, options);
  EXPECT_EQ(lease.deadline, now + absl::Seconds(10));
  EXPECT_EQ(lease.visible_until, now + absl::Seconds(12));
  EXPECT_EQ(lease.stall_at, now + absl::Seconds(40));
}

TEST(BackoffDelay, DoublesPerAttemptAndIsCapped) {
  Flow flow("backoff");
  flow.Step("a", {.base_delay = absl::Seconds(2)}, Noop())
      .Step("b", {.base_delay = absl::ZeroDuration()}, Noop());
  auto c = Compile(flow);
  EXPECT_EQ(BackoffDelay(c->step(0), 0), absl::Seconds(2));
  EXPECT_EQ(BackoffDelay(c->step(0), 1), absl::Seconds(4));
  EXPECT_EQ(BackoffDelay(c->step(0), 3), absl::Seconds(16));
  EXPECT_EQ(BackoffDelay(c->step(0), 1000), kMaxRetryDelay);
  EXPECT_EQ(BackoffDelay(c->step(1), 5), absl::ZeroDuration());
}

TEST(QueueName, FlowModeIsLowercaseSlug_AndNamesAreValidated) {
  EXPECT_EQ(queue_name::ForFlow("Greet_User"), "greet_user");
  EXPECT_TRUE(queue_name::Validate(std::string(47, 'a')).ok());
  EXPECT_FALSE(queue_name::Validate(std::string(48, 'a')).ok());
  EXPECT_FALSE(queue_name::Validate("Upper").ok());
  EXPECT_FALSE(queue_name::Validate("semi;colon").ok());
  EXPECT_FALSE(queue_name::Validate("").ok());
}

TEST(EventPublisher, DeliversBatchesInCommitOrder_WhenCommitsOverlap) {
  EventPublisher publisher;
  std::vector<std::string> seen;
  publisher.Subscribe([&](const Event& e) { seen.push_back(e.step_slug); });
  Event cause;
  cause.step_slug = "cause";
  Event effect;
  effect.step_slug = "effect";
  std::thread second;
  // The second transaction starts committing while the first still is.
  ASSERT_TRUE(publisher
                  .CommitAndPublish(
                      [&] {
                        second = std::thread([&] {
                          (void)publisher.CommitAndPublish(
                              [] { return absl::OkStatus(); }, {effect});
                        });
                        return absl::OkStatus();
                      },
                      {cause})
                  .ok());
  second.join();
  EXPECT_THAT(seen, ElementsAre("cause", "effect"));
}

TEST(EventPublisher, FailedCommitPublishesNothing) {
  EventPublisher publisher;
  int delivered = 0;
  publisher.Subscribe([&](const Event&) { ++delivered; });
  absl::Status s = publisher.CommitAndPublish(
      [] { return absl::AbortedError("no"); }, {Event()});
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(delivered, 0);
  EXPECT_TRUE(
      publisher.CommitAndPublish([] { return absl::OkStatus(); }, {Event()})
          .ok());
  EXPECT_EQ(delivered, 1);
}

TEST(QueueSignals, NotifiesOnlyListenersOfThatQueue) {
  QueueSignals signals;
  int a = 0, b = 0;
  int id_a = signals.Listen("a", [&] { ++a; });
  signals.Listen("b", [&] { ++b; });
  signals.Notify("a");
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 0);
  signals.Notify("");
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 1);
  signals.Unlisten(id_a);
  signals.Notify("a");
  EXPECT_EQ(a, 2);
}

TEST(ServerClaimBackoff,
     AfterAFallback_SkipsTheServerForAFewClaimsOfThatQueue) {
  ServerClaimBackoff backoff;
  EXPECT_FALSE(backoff.SkipServer("jobs"));
  backoff.FellBack("jobs");
  for (int i = 0; i < ServerClaimBackoff::kEngineClaimsAfterFallback; ++i) {
    EXPECT_FALSE(backoff.SkipServer("other")) << "another queue";
    EXPECT_TRUE(backoff.SkipServer("jobs")) << "claim " << i;
  }
  EXPECT_FALSE(backoff.SkipServer("jobs"));
  // A second fallback grants the full count again.
  backoff.FellBack("jobs");
  EXPECT_TRUE(backoff.SkipServer("jobs"));
  backoff.FellBack("jobs");
  int skipped = 0;
  while (backoff.SkipServer("jobs")) ++skipped;
  EXPECT_EQ(skipped, ServerClaimBackoff::kEngineClaimsAfterFallback);
}

// IsImplicit compares field by field; it must agree with the record
// ImplicitStepState derives, and with every field that record fixes.
TEST(ImplicitSteps, IsImplicitAgreesWithTheDerivedStateAndEachOfItsFields) {
  Flow flow("one_step");
  flow.Step("only", Noop());
  const FlowShape& shape = flow.shape();
  RunRecord run;
  run.run_id = RunId::Random();
  run.started_at = absl::FromUnixSeconds(100);
  for (RunStatus status : {RunStatus::kStarted, RunStatus::kCompleted}) {
    run.status = status;
    run.finished_at = status == RunStatus::kCompleted
                          ? std::optional(absl::FromUnixSeconds(200))
                          : std::nullopt;
    run.output = boost::json::object{{"only", 7}};
    std::optional<StepStateRecord> derived =
        internal::ImplicitStepState(shape, run);
    ASSERT_TRUE(derived.has_value());
    EXPECT_TRUE(internal::IsImplicit(*derived, shape, run));
    auto differs = [&](auto change) {
      StepStateRecord s = *derived;
      change(s);
      return !internal::IsImplicit(s, shape, run);
    };
    EXPECT_TRUE(differs([](StepStateRecord& s) { s.step_index = 1; }));
    EXPECT_TRUE(
        differs([](StepStateRecord& s) { s.status = StepStatus::kFailed; }));
    EXPECT_TRUE(differs([](StepStateRecord& s) { s.remaining_deps = 1; }));
    EXPECT_TRUE(differs([](StepStateRecord& s) { s.initial_tasks = 2; }));
    EXPECT_TRUE(
        differs([](StepStateRecord& s) { s.remaining_tasks = std::nullopt; }));
    EXPECT_TRUE(differs([](StepStateRecord& s) { s.error = "boom"; }));
    EXPECT_TRUE(differs([](StepStateRecord& s) {
      s.skip_reason = SkipReason::kConditionUnmet;
    }));
    EXPECT_TRUE(differs(
        [](StepStateRecord& s) { s.started_at = absl::FromUnixSeconds(101); }));
    EXPECT_TRUE(differs([](StepStateRecord& s) {
      s.finished_at = absl::FromUnixSeconds(300);
    }));
    EXPECT_TRUE(differs([](StepStateRecord& s) { s.unreadable = "bad"; }));
    // The step's output is the run's (completed) and must be absent before.
    EXPECT_EQ(differs([](StepStateRecord& s) { s.output = Json(1); }),
              status == RunStatus::kStarted);
  }
  run.status = RunStatus::kFailed;
  EXPECT_FALSE(internal::ImplicitStepState(shape, run).has_value());
  StepStateRecord any;
  EXPECT_FALSE(internal::IsImplicit(any, shape, run));
}
}  // namespace
}  // namespace sluice
