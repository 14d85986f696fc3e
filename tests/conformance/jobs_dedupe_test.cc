// Jobs: explicit ids and dedupe keys, row by row of the decision table
// (effect-mq's enqueue order): id first, then replace while delayed, a live
// throttle window, a pending keyed run, else the key is taken over.
#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

class JobsDedupe : public JobsConformance {
 protected:
  void SetUp() override {
    JobsConformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend
    DeployJob(job_);
  }
  // Claims the one claimable task of `run` and completes it.
  void RunToEnd(const RunId& run) {
    std::vector<ClaimedTask> claimed = Claim(job_.flow());
    ASSERT_EQ(claimed.size(), 1u);
    ASSERT_EQ(claimed[0].key.run_id, run);
    Complete(claimed[0], J("null"));
    ASSERT_EQ(View(run).run.status, RunStatus::kCompleted);
  }
  Job job_ = EchoJob("mailer");
};

TEST_P(JobsDedupe, ExplicitIdOfAnEndedRun_ReturnsItAndChangesNothing) {
  EnqueueResult first = Enqueue(job_, J("1"), {.id = "order-7"});
  RunToEnd(first.run_id);
  EnqueueResult again = Enqueue(job_, J("2"), {.id = "order-7"});
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.run_id, first.run_id);
  EXPECT_EQ(AllRuns().size(), 1u);
  EXPECT_EQ(View(first.run_id).run.input, J("1"));
  EXPECT_EQ(CountsOf("work").waiting, 0);
}

TEST_P(JobsDedupe, ExplicitId_IsScopedToItsJob) {
  Job other = EchoJob("other");
  DeployJob(other);
  EnqueueResult a = Enqueue(job_, J("1"), {.id = "same"});
  EnqueueResult b = Enqueue(other, J("1"), {.id = "same"});
  EXPECT_FALSE(b.duplicate);
  EXPECT_NE(a.run_id, b.run_id);
}

TEST_P(JobsDedupe, ExplicitIdBeatsDedupeReplace) {
  EnqueueResult keyed =
      Enqueue(job_, J("1"),
              {.delay = absl::Minutes(5),
               .dedupe = Dedupe{.key = "k", .replace = true}});
  EnqueueResult with_id = Enqueue(job_, J("2"), {.id = "x"});
  EnqueueResult again =
      Enqueue(job_, J("3"),
              {.id = "x",
               .delay = absl::Minutes(5),
               .dedupe = Dedupe{.key = "k", .replace = true}});
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.run_id, with_id.run_id);
  EXPECT_EQ(View(keyed.run_id).run.input, J("1"));  // not replaced
}

TEST_P(JobsDedupe, Pending_DuplicateWhileTheKeyedRunIsQueued) {
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = Dedupe{.key = "u42"}});
  EnqueueResult second =
      Enqueue(job_, J("2"), {.dedupe = Dedupe{.key = "u42"}});
  EXPECT_FALSE(first.duplicate);
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_EQ(CountsOf("work").waiting, 1);
}

TEST_P(JobsDedupe, Pending_DuplicateWhileTheKeyedRunIsStarted) {
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = Dedupe{.key = "u42"}});
  ASSERT_EQ(Claim(job_.flow()).size(), 1u);
  EnqueueResult second =
      Enqueue(job_, J("2"), {.dedupe = Dedupe{.key = "u42"}});
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.run_id, first.run_id);
}

TEST_P(JobsDedupe, Pending_KeyIsTakenOverOnceTheKeyedRunEnded) {
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = Dedupe{.key = "u42"}});
  RunToEnd(first.run_id);
  EnqueueResult second =
      Enqueue(job_, J("2"), {.dedupe = Dedupe{.key = "u42"}});
  EXPECT_FALSE(second.duplicate);
  EXPECT_NE(second.run_id, first.run_id);
  std::optional<DedupeRecord> entry = DedupeEntry("mailer", "u42");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->run_id, second.run_id);
  EXPECT_FALSE(entry->expires_at.has_value());
}

TEST_P(JobsDedupe, Pending_KeyIsTakenOverOnceTheKeyedRunWasRemoved) {
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = Dedupe{.key = "u42"}});
  ASSERT_TRUE(engine().RemoveRun(first.run_id).ok());
  EXPECT_FALSE(DedupeEntry("mailer", "u42").has_value());
  EnqueueResult second =
      Enqueue(job_, J("2"), {.dedupe = Dedupe{.key = "u42"}});
  EXPECT_FALSE(second.duplicate);
}

TEST_P(JobsDedupe, Keys_AreScopedToTheirJob) {
  Job other = EchoJob("other");
  DeployJob(other);
  EnqueueResult a = Enqueue(job_, J("1"), {.dedupe = Dedupe{.key = "k"}});
  EnqueueResult b = Enqueue(other, J("1"), {.dedupe = Dedupe{.key = "k"}});
  EXPECT_FALSE(b.duplicate);
  EXPECT_NE(a.run_id, b.run_id);
}

TEST_P(JobsDedupe, Throttle_DuplicateWithinTheWindowEvenAfterTheRunEnded) {
  Dedupe throttle{.key = "t", .ttl = absl::Minutes(1)};
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = throttle});
  RunToEnd(first.run_id);
  clock().Advance(absl::Seconds(59));
  EnqueueResult second = Enqueue(job_, J("2"), {.dedupe = throttle});
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.run_id, first.run_id);
  clock().Advance(absl::Seconds(1));  // the window ended
  EnqueueResult third = Enqueue(job_, J("3"), {.dedupe = throttle});
  EXPECT_FALSE(third.duplicate);
  std::optional<DedupeRecord> entry = DedupeEntry("mailer", "t");
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->run_id, third.run_id);
  EXPECT_EQ(entry->expires_at, clock().Now() + absl::Minutes(1));
}

TEST_P(JobsDedupe, Throttle_WithoutExtendAHitKeepsTheWindow) {
  Dedupe throttle{.key = "t", .ttl = absl::Minutes(1)};
  absl::Time start = clock().Now();
  Enqueue(job_, J("1"), {.dedupe = throttle});
  clock().Advance(absl::Seconds(30));
  EXPECT_TRUE(Enqueue(job_, J("2"), {.dedupe = throttle}).duplicate);
  EXPECT_EQ(DedupeEntry("mailer", "t")->expires_at, start + absl::Minutes(1));
}

TEST_P(JobsDedupe, Throttle_ExtendPushesTheWindowOnEveryHit) {
  Dedupe throttle{.key = "t", .ttl = absl::Minutes(1), .extend = true};
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = throttle});
  for (int i = 0; i < 3; ++i) {
    clock().Advance(absl::Seconds(50));
    EnqueueResult hit = Enqueue(job_, J("2"), {.dedupe = throttle});
    EXPECT_TRUE(hit.duplicate);
    EXPECT_EQ(hit.run_id, first.run_id);
  }
  EXPECT_EQ(DedupeEntry("mailer", "t")->expires_at,
            clock().Now() + absl::Minutes(1));
}

TEST_P(JobsDedupe, Replace_OverwritesADelayedRunInPlace) {
  Dedupe replace{.key = "r", .replace = true};
  EnqueueResult first =
      Enqueue(job_, J(R"({"v":1})"),
              {.priority = 1, .delay = absl::Minutes(5), .dedupe = replace});
  RunRecord before = View(first.run_id).run;
  clock().Advance(absl::Minutes(1));
  EnqueueResult second = Enqueue(job_, J(R"({"v":2})"),
                                 {.priority = 7,
                                  .delay = absl::Minutes(10),
                                  .metadata = J(R"({"who":"b"})"),
                                  .dedupe = replace});
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.run_id, first.run_id);
  RunView after = View(first.run_id);
  EXPECT_EQ(after.run.input, J(R"({"v":2})"));
  EXPECT_EQ(after.run.priority, 7);
  EXPECT_EQ(after.run.metadata, J(R"({"who":"b"})"));
  EXPECT_EQ(after.run.started_at, before.started_at);
  EXPECT_EQ(AllRuns().size(), 1u);
  std::optional<MessageLocation> message =
      MessageOf(TaskOf(first.run_id, "job"));
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(message->message.visible_at, clock().Now() + absl::Minutes(10));
  EXPECT_EQ(message->message.priority, 7);
  QueueCounts counts = CountsOf("work");
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.waiting, 0);
  clock().Advance(absl::Minutes(10));
  EXPECT_EQ(DriveJob(job_), 1);
  EXPECT_EQ(View(first.run_id).run.output, J(R"({"job":{"got":{"v":2}}})"));
}

TEST_P(JobsDedupe, Replace_OfAVisibleRunIsAPendingDuplicate) {
  Dedupe replace{.key = "r", .replace = true};
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = replace});
  EnqueueResult second = Enqueue(job_, J("2"), {.dedupe = replace});
  EXPECT_TRUE(second.duplicate);
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_EQ(View(first.run_id).run.input, J("1"));
}

TEST_P(JobsDedupe, Replace_OfAnEndedRunTakesTheKeyOver) {
  Dedupe replace{.key = "r", .replace = true};
  EnqueueResult first = Enqueue(job_, J("1"), {.dedupe = replace});
  RunToEnd(first.run_id);
  EnqueueResult second =
      Enqueue(job_, J("2"), {.delay = absl::Minutes(1), .dedupe = replace});
  EXPECT_FALSE(second.duplicate);
  EXPECT_NE(second.run_id, first.run_id);
  EXPECT_EQ(View(first.run_id).run.input, J("1"));
}

TEST_P(JobsDedupe, Replace_WithTtlReArmsTheWindow) {
  Dedupe replace{.key = "r", .ttl = absl::Minutes(2), .replace = true};
  EnqueueResult first =
      Enqueue(job_, J("1"), {.delay = absl::Minutes(5), .dedupe = replace});
  clock().Advance(absl::Minutes(1));
  EnqueueResult second =
      Enqueue(job_, J("2"), {.delay = absl::Minutes(5), .dedupe = replace});
  EXPECT_EQ(second.run_id, first.run_id);
  EXPECT_EQ(DedupeEntry("mailer", "r")->expires_at,
            clock().Now() + absl::Minutes(2));
}

TEST_P(JobsDedupe, EnqueueMany_SecondItemWithTheKeyIsADuplicate) {
  std::vector<Engine::EnqueueItem> items = {
      {J("1"), {.dedupe = Dedupe{.key = "k"}}},
      {J("2"), {}},
      {J("3"), {.dedupe = Dedupe{.key = "k"}}},
  };
  absl::StatusOr<std::vector<EnqueueResult>> results =
      engine().EnqueueMany("mailer", items);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_FALSE((*results)[0].duplicate);
  EXPECT_FALSE((*results)[1].duplicate);
  EXPECT_TRUE((*results)[2].duplicate);
  EXPECT_EQ((*results)[2].run_id, (*results)[0].run_id);
  EXPECT_EQ(AllRuns().size(), 2u);
}

TEST_P(JobsDedupe, StartRunWithAnIdempotencyKey_StartsAFlowOnce) {
  Flow flow("report");
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> first =
      engine().StartRun("report", J("{}"), {.id = "2026-12-01"});
  absl::StatusOr<EnqueueResult> second =
      engine().StartRun("report", J("{}"), {.id = "2026-12-01"});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(second->duplicate);
  EXPECT_EQ(second->run_id, first->run_id);
  EXPECT_EQ(AllRuns().size(), 1u);
}

SLUICE_CONFORMANCE_SUITE(JobsDedupe);

}  // namespace
}  // namespace sluice::testing
