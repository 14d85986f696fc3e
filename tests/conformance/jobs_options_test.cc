// Jobs and runs: priority, delay and run_at, metadata, per-run overrides.
#include "boost/json/object.hpp"
#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

class JobsOptions : public JobsConformance {};

TEST_P(JobsOptions, HigherPriorityIsClaimedFirst_ThenInEnqueueOrder) {
  Job job = EchoJob();
  DeployJob(job);
  RunId low1 = Enqueue(job, J("1"), {.priority = -5}).run_id;
  RunId mid1 = Enqueue(job, J("2")).run_id;
  RunId high1 = Enqueue(job, J("3"), {.priority = 9}).run_id;
  RunId mid2 = Enqueue(job, J("4")).run_id;
  RunId high2 = Enqueue(job, J("5"), {.priority = 9}).run_id;
  EXPECT_EQ(ClaimRuns(job, 2), (std::vector<RunId>{high1, high2}));
  EXPECT_EQ(ClaimRuns(job, 10), (std::vector<RunId>{mid1, mid2, low1}));
}

// Delayed jobs that came due and retries whose backoff ended are claimed in
// the same order as jobs sent visible: priority, then enqueue order.
TEST_P(JobsOptions, DueDelayedJobsAndRetries_TakeTheirPlaceInClaimOrder) {
  Job job = EchoJob(
      "echo", {.backoff = Backoff{BackoffKind::kFixed, absl::Seconds(5)}});
  DeployJob(job);
  RunId retried = Enqueue(job, J("1"), {.priority = 3}).run_id;
  std::vector<ClaimedTask> first = Claim(job.flow());
  ASSERT_EQ(first.size(), 1u);
  Fail(first[0], absl::InternalError("again"));
  RunId delayed_low = Enqueue(job, J("2"), {.delay = absl::Seconds(2)}).run_id;
  RunId ready_low = Enqueue(job, J("3")).run_id;
  RunId delayed_high =
      Enqueue(job, J("4"), {.priority = 5, .delay = absl::Seconds(2)}).run_id;
  RunId ready_mid = Enqueue(job, J("5"), {.priority = 1}).run_id;
  RunId later = Enqueue(job, J("6"), {.delay = absl::Minutes(1)}).run_id;
  clock().Advance(absl::Seconds(10));
  EXPECT_EQ(ClaimRuns(job, 3),
            (std::vector<RunId>{delayed_high, retried, ready_mid}));
  EXPECT_EQ(ClaimRuns(job), (std::vector<RunId>{delayed_low, ready_low}));
  clock().Advance(absl::Minutes(1));
  EXPECT_EQ(ClaimRuns(job), std::vector<RunId>{later});
}

TEST_P(JobsOptions, TheJobsPriorityIsTheDefault_AndAnItemsWins) {
  Job job = EchoJob("urgent", {.priority = 4});
  DeployJob(job);
  RunId by_default = Enqueue(job, J("1")).run_id;
  RunId lower = Enqueue(job, J("2"), {.priority = 2}).run_id;
  EXPECT_EQ(View(by_default).run.priority, 4);
  EXPECT_EQ(View(lower).run.priority, 2);
  EXPECT_EQ(MessageOf(TaskOf(by_default, "job"))->message.priority, 4);
  EXPECT_EQ(ClaimRuns(job), (std::vector<RunId>{by_default, lower}));
}

TEST_P(JobsOptions, EveryStepOfARunInheritsItsPriority) {
  Flow flow("two", {.queue = "work"});
  flow.Step("a", Echo()).Map("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> low =
      engine().StartRun("two", J("[1,2]"), {.priority = 1});
  absl::StatusOr<EnqueueResult> high =
      engine().StartRun("two", J("[3]"), {.priority = 6});
  ASSERT_TRUE(low.ok() && high.ok());
  // Step "a" of both, high first; their completions start step "b".
  std::vector<ClaimedTask> first = Claim(flow);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].key.run_id, high->run_id);
  for (const ClaimedTask& task : {first[1], first[0]}) {
    Complete(task, J("[10,20]"));
  }
  std::vector<ClaimedTask> second = Claim(flow);
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second[0].key.run_id, high->run_id);
  EXPECT_EQ(second[1].key.run_id, high->run_id);
  EXPECT_EQ(second[2].key.run_id, low->run_id);
  EXPECT_EQ(MessageOf(TaskOf(low->run_id, "b", 1))->message.priority, 1);
  EXPECT_EQ(MessageOf(TaskOf(high->run_id, "b", 0))->message.priority, 6);
}

TEST_P(JobsOptions, Delay_HidesTheJobUntilItsTime) {
  Job job = EchoJob();
  DeployJob(job);
  RunId run = Enqueue(job, J("1"), {.delay = absl::Seconds(30)}).run_id;
  QueueCounts counts = CountsOf("work");
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.waiting, 0);
  EXPECT_TRUE(ClaimRuns(job).empty());
  clock().Advance(absl::Seconds(29));
  EXPECT_TRUE(ClaimRuns(job).empty());
  clock().Advance(absl::Seconds(1));
  counts = CountsOf("work");
  EXPECT_EQ(counts.delayed, 0);
  EXPECT_EQ(counts.waiting, 1);
  EXPECT_EQ(ClaimRuns(job), std::vector<RunId>{run});
}

TEST_P(JobsOptions, RunAt_HidesTheJobUntilThatTime_AndAPastTimeIsNow) {
  Job job = EchoJob();
  DeployJob(job);
  absl::Time at = clock().Now() + absl::Hours(2);
  RunId later = Enqueue(job, J("1"), {.run_at = at}).run_id;
  RunId past =
      Enqueue(job, J("2"), {.run_at = clock().Now() - absl::Hours(1)}).run_id;
  EXPECT_EQ(MessageOf(TaskOf(later, "job"))->message.visible_at, at);
  EXPECT_EQ(ClaimRuns(job), std::vector<RunId>{past});
  clock().Set(at);
  EXPECT_EQ(ClaimRuns(job), std::vector<RunId>{later});
}

TEST_P(JobsOptions, DelayOfAFlowRun_AppliesToItsFirstStepsOnly) {
  Flow flow("later", {.queue = "work"});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> run =
      engine().StartRun("later", J("{}"), {.delay = absl::Minutes(5)});
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(Claim(flow).empty());
  clock().Advance(absl::Minutes(5));
  std::vector<ClaimedTask> a = Claim(flow);
  ASSERT_EQ(a.size(), 1u);
  Complete(a[0], J("1"));
  std::vector<ClaimedTask> b = Claim(flow);  // visible at once
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].step_slug, "b");
}

TEST_P(JobsOptions, Metadata_IsStoredOnTheRun) {
  Job job = EchoJob();
  DeployJob(job);
  RunId run =
      Enqueue(job, J("1"), {.metadata = J(R"({"tenant":"acme","n":3})")})
          .run_id;
  RunId plain = Enqueue(job, J("2")).run_id;
  EXPECT_EQ(View(run).run.metadata, J(R"({"tenant":"acme","n":3})"));
  EXPECT_TRUE(View(plain).run.metadata.is_null());
}

TEST_P(JobsOptions, Overrides_GoOntoTheRunAndEveryTask) {
  Flow flow("fan", {.queue = "work"});
  flow.Map("each", Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> run = engine().StartRun(
      "fan", J("[1,2]"),
      {.max_attempts = 7,
       .backoff = Backoff{BackoffKind::kFixed, absl::Seconds(3)},
       .timeout = absl::Seconds(90),
       .dedupe = Dedupe{.key = "d"},
       .keep = Keep{.failed = {.count = 2}}});
  ASSERT_TRUE(run.ok()) << run.status();
  RunView view = View(run->run_id);
  EXPECT_EQ(view.run.options, J(R"({"max_attempts":7,"timeout_ms":90000,
      "backoff":{"kind":"fixed","delay_ms":3000},
      "keep":{"failed":{"count":2}},
      "dedupe":{"key":"d","extend":false,"replace":false}})"));
  ASSERT_EQ(view.tasks.size(), 2u);
  for (const TaskRecord& task : view.tasks) {
    EXPECT_EQ(task.options, J(R"({"max_attempts":7,"timeout_ms":90000,
        "backoff":{"kind":"fixed","delay_ms":3000}})"));
  }
}

TEST_P(JobsOptions, NoOverrides_LeaveOptionsNull) {
  Job job = EchoJob();
  DeployJob(job);
  RunId run = Enqueue(job, J("1")).run_id;
  EXPECT_TRUE(View(run).run.options.is_null());
  EXPECT_TRUE(TaskOf(run, "job").options.is_null());
}

TEST_P(JobsOptions, ADelayedJob_IsTheQueuesNextVisibleTime) {
  Job job = EchoJob();
  DeployJob(job);
  Enqueue(job, J("1"), {.delay = absl::Minutes(3)});
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  absl::StatusOr<std::optional<absl::Time>> next =
      (*tx)->NextVisibleAt("work", clock().Now());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, clock().Now() + absl::Minutes(3));
}

SLUICE_CONFORMANCE_SUITE(JobsOptions);

}  // namespace
}  // namespace sluice::testing
