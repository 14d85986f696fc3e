// Deleting runs and pruning history: never a live run, never a live run's
// data.
#include "harness.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class Retention : public Conformance {
 protected:
  Flow Job(std::string slug = "job") {
    Flow flow(std::move(slug), {.max_attempts = 1});
    flow.Map("each", Echo());
    return flow;
  }
  // A run of `flow` over [1, 2], driven to its end now.
  RunId FinishedRun(const Flow& flow) {
    RunId run = Start(flow, J("[1,2]"));
    Drive(flow);
    return run;
  }
};

TEST_P(Retention, DeleteRun_RemovesTheRunItsStepsTasksAndMessages) {
  Flow flow = Job();
  Deploy(flow);
  RunId run = FinishedRun(flow);
  RunView before = View(run);
  ASSERT_EQ(before.run.status, RunStatus::kCompleted);
  ASSERT_EQ(before.tasks.size(), 2u);
  ASSERT_TRUE(engine().DeleteRun(run).ok());
  EXPECT_EQ(engine().GetRun(run).status().code(), absl::StatusCode::kNotFound);
  for (const TaskRecord& t : before.tasks) {
    EXPECT_FALSE(MessageOf(t).has_value()) << t.message_id;
  }
  EXPECT_EQ(engine().DeleteRun(run).code(), absl::StatusCode::kNotFound);
}

TEST_P(Retention, DeleteRun_RefusesAStartedRun) {
  Flow flow = Job();
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  absl::Status deleted = engine().DeleteRun(run);
  EXPECT_EQ(deleted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(deleted.message()), HasSubstr("cancel it"));
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);
  ASSERT_TRUE(engine().CancelRun(run).ok());
  EXPECT_TRUE(engine().DeleteRun(run).ok());
}

TEST_P(Retention, PruneRuns_DeletesOnlyRunsThatEndedBeforeTheCutoff) {
  Flow flow = Job();
  Deploy(flow);
  RunId completed = FinishedRun(flow);
  clock().Advance(absl::Minutes(1));
  RunId failed = Start(flow, J("[1]"));
  Fail(Claim(flow)[0], absl::InternalError("no"));
  ASSERT_EQ(View(failed).run.status, RunStatus::kFailed);
  clock().Advance(absl::Minutes(1));
  absl::Time cutoff = clock().Now();
  RunId live = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow, 1);  // one task in flight
  clock().Advance(absl::Minutes(1));
  RunId recent = FinishedRun(flow);  // also finishes "live"'s other task...
  clock().Advance(absl::Hours(1));

  absl::StatusOr<int> pruned = engine().PruneRuns(cutoff, 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 2);
  EXPECT_EQ(engine().GetRun(completed).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().GetRun(failed).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(engine().GetRun(recent).ok());
  // The live run keeps everything, and still completes.
  ASSERT_EQ(View(live).run.status, RunStatus::kStarted);
  Complete(claimed[0], claimed[0].input);
  Drive(flow);
  EXPECT_EQ(View(live).run.status, RunStatus::kCompleted);
  // Even with a cutoff in the future, a started run is never pruned.
  RunId started = Start(flow, J("[5]"));
  absl::StatusOr<int> all =
      engine().PruneRuns(clock().Now() + absl::Hours(1), 100);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, 2);  // "recent" and "live"
  EXPECT_EQ(View(started).run.status, RunStatus::kStarted);
}

TEST_P(Retention, PruneRuns_WorksInBatchesOldestFirst) {
  Flow flow = Job();
  Deploy(flow);
  std::vector<RunId> runs;
  for (int i = 0; i < 5; ++i) {
    runs.push_back(FinishedRun(flow));
    clock().Advance(absl::Seconds(1));
  }
  absl::Time cutoff = clock().Now();
  std::vector<int> batches;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<int> pruned = engine().PruneRuns(cutoff, 2);
    ASSERT_TRUE(pruned.ok());
    batches.push_back(*pruned);
    if (i == 0) {  // the two oldest went first
      EXPECT_FALSE(engine().GetRun(runs[0]).ok());
      EXPECT_FALSE(engine().GetRun(runs[1]).ok());
      EXPECT_TRUE(engine().GetRun(runs[2]).ok());
    }
  }
  EXPECT_THAT(batches, ::testing::ElementsAre(2, 2, 1, 0));
}

TEST_P(Retention, PruneRuns_ValidatesItsArguments) {
  EXPECT_EQ(engine().PruneRuns(clock().Now(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().PruneRuns(absl::InfiniteFuture(), 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(Retention, PendingReportsOfADeletedRun_AreDroppedWithIt) {
  Flow flow = Job();
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  ClaimedTask task = Claim(flow)[0];
  // Record the result but leave the report unapplied.
  ASSERT_TRUE(engine()
                  .FinishTasks(
                      std::vector<TaskResult>{{task.key, task.attempt, J("1")}})
                  .ok());
  ASSERT_EQ(PendingReports(), 1);
  ASSERT_TRUE(engine().CancelRun(run).ok());
  ASSERT_TRUE(engine().DeleteRun(run).ok());
  EXPECT_EQ(PendingReports(), 0);
  clock().Advance(absl::Hours(1));
  absl::StatusOr<int> swept = engine().ApplyStaleReports(100);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 0);
}

SLUICE_CONFORMANCE_SUITE(Retention);

}  // namespace
}  // namespace sluice::testing
