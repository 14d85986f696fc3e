// Jobs and runs: keep rules (per job or flow, per enqueue) applied by
// ApplyRetention in bounded batches; started runs are never deleted.
#include <algorithm>

#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

class JobsRetention : public JobsConformance {
 protected:
  int Apply(int limit = 1000) {
    absl::StatusOr<int> deleted = engine().ApplyRetention(limit);
    EXPECT_TRUE(deleted.ok()) << deleted.status();
    return deleted.ok() ? *deleted : -1;
  }
  // Enqueues `count` jobs one second apart and completes each.
  std::vector<RunId> CompleteMany(const Job& job, int count,
                                  const EnqueueOptions& options = {}) {
    std::vector<RunId> ids;
    for (int i = 0; i < count; ++i) {
      ids.push_back(Enqueue(job, Json(i), options).run_id);
      EXPECT_EQ(DriveJob(job), 1);
      clock().Advance(absl::Seconds(1));
    }
    return ids;
  }
  bool Exists(const RunId& run) { return engine().GetRun(run).ok(); }
};

TEST_P(JobsRetention, KeepCount_KeepsTheNewestCompleted) {
  Job job = EchoJob("kept", {.keep = {.completed = {.count = 2}}});
  DeployJob(job);
  std::vector<RunId> ids = CompleteMany(job, 5);
  EXPECT_EQ(Apply(), 3);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Exists(ids[i]), i >= 3) << i;
  EXPECT_EQ(Apply(), 0);
}

TEST_P(JobsRetention, KeepAge_DeletesRunsEndedLongerAgo) {
  Job job =
      EchoJob("aged", {.keep = {.completed = {.age = absl::Seconds(10)}}});
  DeployJob(job);
  std::vector<RunId> ids = CompleteMany(job, 3);  // ended at t0, t0+1, t0+2
  clock().Advance(absl::Seconds(8));              // now t0+11
  EXPECT_EQ(Apply(), 2);
  EXPECT_FALSE(Exists(ids[0]));
  EXPECT_FALSE(Exists(ids[1]));
  EXPECT_TRUE(Exists(ids[2]));
}

TEST_P(JobsRetention, RulesArePerOutcome) {
  Job job(
      "mixed",
      {.queue = "work", .max_attempts = 1, .keep = {.failed = {.count = 0}}},
      [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
        if (payload.as_int64() < 0) return absl::InternalError("no");
        return payload;
      });
  DeployJob(job);
  RunId ok = Enqueue(job, J("1")).run_id;
  RunId bad = Enqueue(job, J("-1")).run_id;
  EXPECT_EQ(DriveJob(job), 2);
  EXPECT_EQ(View(bad).run.status, RunStatus::kFailed);
  EXPECT_EQ(Apply(), 1);
  EXPECT_TRUE(Exists(ok));
  EXPECT_FALSE(Exists(bad));
}

TEST_P(JobsRetention, AnEnqueuesOwnKeepWinsOverTheJobs) {
  Job job = EchoJob("own", {.keep = {.completed = {.count = 10}}});
  DeployJob(job);
  std::vector<RunId> ids =
      CompleteMany(job, 3, {.keep = Keep{.completed = {.count = 1}}});
  EXPECT_EQ(Apply(), 2);
  EXPECT_TRUE(Exists(ids[2]));
}

TEST_P(JobsRetention, NeverDeletesRunsThatHaveNotEnded) {
  Job job =
      EchoJob("none_kept",
              {.keep = {.completed = {.count = 0}, .cancelled = {.count = 0}}});
  DeployJob(job);
  CompleteMany(job, 2);
  RunId started = Enqueue(job, J("1")).run_id;
  ASSERT_EQ(ClaimRuns(job), std::vector<RunId>{started});
  RunId queued = Enqueue(job, J("2")).run_id;
  RunId delayed = Enqueue(job, J("3"), {.delay = absl::Hours(1)}).run_id;

  EXPECT_EQ(Apply(), 2);
  EXPECT_TRUE(Exists(queued));
  EXPECT_TRUE(Exists(started));
  EXPECT_TRUE(Exists(delayed));
}

TEST_P(JobsRetention, DeletesInBoundedBatches) {
  Flow flow("bulk", {.keep = {.completed = {.count = 0}}});
  flow.Step("s", Returns(J("1")));
  Deploy(flow);
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(engine().StartRun("bulk", Json(i)).ok());
  EXPECT_EQ(Drive(flow), 7);
  EXPECT_EQ(Apply(3), 3);
  EXPECT_EQ(Apply(3), 3);
  EXPECT_EQ(Apply(3), 1);
  EXPECT_TRUE(AllRuns().empty());
  EXPECT_EQ(engine().ApplyRetention(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(JobsRetention, WithoutRules_NothingIsDeleted) {
  Job job = EchoJob();
  DeployJob(job);
  CompleteMany(job, 3);
  EXPECT_EQ(Apply(), 0);
  EXPECT_EQ(AllRuns().size(), 3u);
}

TEST_P(JobsRetention, ExpiredThrottleEntries_AreDropped) {
  Job job = EchoJob();
  DeployJob(job);
  Enqueue(job, J("1"), {.dedupe = Dedupe{.key = "t", .ttl = absl::Minutes(1)}});
  Enqueue(job, J("2"), {.dedupe = Dedupe{.key = "p"}});
  clock().Advance(absl::Minutes(1));
  Apply();
  EXPECT_FALSE(DedupeEntry("echo", "t").has_value());
  EXPECT_TRUE(DedupeEntry("echo", "p").has_value());  // pending: kept
}

TEST_P(JobsRetention, DeletingAKeyedRun_DropsItsPendingEntry) {
  Job job = EchoJob("keyed", {.keep = {.completed = {.count = 0}}});
  DeployJob(job);
  Enqueue(job, J("1"), {.dedupe = Dedupe{.key = "k"}});
  EXPECT_EQ(DriveJob(job), 1);
  EXPECT_EQ(Apply(), 1);
  EXPECT_FALSE(DedupeEntry("keyed", "k").has_value());
}

SLUICE_CONFORMANCE_SUITE(JobsRetention);

}  // namespace
}  // namespace sluice::testing
