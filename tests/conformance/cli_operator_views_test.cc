// The engine's operator views behind `sluice status` and `sluice prune`:
// ListQueueStatus (every queue's counts, oldest waiting task, paused flag
// and live workers) and CountPrunableRuns (what PruneRuns would delete), on
// every backend, under the manual clock.
#include <string>
#include <vector>

#include "harness.h"

namespace sluice::testing {
namespace {

class OperatorViews : public Conformance {
 protected:
  void PutWorker(const std::string& id, const std::string& queue,
                 absl::Duration since_heartbeat, bool stopped = false) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    absl::Time heartbeat = clock().Now() - since_heartbeat;
    WorkerRecord w{id, queue, queue, heartbeat, heartbeat, std::nullopt};
    if (stopped) w.stopped_at = heartbeat;
    ASSERT_TRUE((*tx)->UpsertWorker(w).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  std::vector<QueueStatus> Statuses(
      absl::Duration liveness = absl::Seconds(30)) {
    absl::StatusOr<std::vector<QueueStatus>> statuses =
        engine().ListQueueStatus(liveness);
    EXPECT_TRUE(statuses.ok()) << statuses.status();
    return statuses.ok() ? *statuses : std::vector<QueueStatus>{};
  }

  int64_t Prunable(absl::Time before) {
    absl::StatusOr<int64_t> count = engine().CountPrunableRuns(before);
    EXPECT_TRUE(count.ok()) << count.status();
    return count.ok() ? *count : -1;
  }
};

TEST_P(OperatorViews, ListQueueStatus_EveryQueueByNameWithCountsAndWorkers) {
  Flow billing("billing", {.max_attempts = 1});
  billing.Step("charge", Echo());
  Flow audit("audit");
  audit.Step("log", Echo());
  Deploy(billing);
  Deploy(audit);
  absl::Time first_visible = clock().Now();
  Start(billing, J("{}"));
  clock().Advance(absl::Seconds(10));
  Start(billing, J("{}"));
  Start(billing, J("{}"));
  ASSERT_TRUE(
      engine().StartRun("billing", J("{}"), {.delay = absl::Minutes(5)}).ok());
  std::vector<ClaimedTask> claimed = Claim(billing, 2);
  ASSERT_EQ(claimed.size(), 2u);
  Fail(claimed[0], absl::InternalError("declined"));  // the first run
  ASSERT_TRUE(engine().PauseQueue("audit").ok());
  PutWorker("live", "billing", absl::Seconds(5));
  PutWorker("late", "billing", absl::Minutes(2));
  PutWorker("stopped", "billing", absl::Seconds(1), /*stopped=*/true);
  clock().Advance(absl::Seconds(20));

  std::vector<QueueStatus> statuses = Statuses();
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].state.queue, "audit");
  EXPECT_TRUE(statuses[0].state.paused);
  EXPECT_EQ(statuses[0].state.counts.waiting, 0);
  EXPECT_EQ(statuses[0].state.counts.oldest_waiting_since, std::nullopt);
  EXPECT_EQ(statuses[0].live_workers, 0);

  const QueueStatus& b = statuses[1];
  EXPECT_EQ(b.state.queue, "billing");
  EXPECT_FALSE(b.state.paused);
  EXPECT_EQ(b.state.counts.waiting, 1);
  EXPECT_EQ(b.state.counts.delayed, 1);
  EXPECT_EQ(b.state.counts.active, 1);
  EXPECT_EQ(b.state.counts.failed, 1);
  // The claimed ones were the two oldest; the one left became visible 10 s
  // after the first.
  EXPECT_EQ(b.state.counts.oldest_waiting_since,
            first_visible + absl::Seconds(10));
  EXPECT_EQ(b.live_workers, 1) << "late (2 min) and stopped are not live";
  EXPECT_EQ(Statuses(absl::Minutes(5))[1].live_workers, 2);
}

TEST_P(OperatorViews, ListQueueStatus_NonPositiveLiveness_IsInvalid) {
  EXPECT_EQ(engine().ListQueueStatus(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(OperatorViews, CountPrunableRuns_CountsWhatPruneRunsDeletes) {
  Flow flow("ledger", {.max_attempts = 1});
  flow.Step("write", Echo());
  Deploy(flow);
  std::vector<RunId> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(Start(flow, J("{}")));
  // Three end at t0 + 0, 1, 2 minutes (completed, failed, cancelled); one
  // ends later; one never does.
  absl::Time t0 = clock().Now();
  std::vector<ClaimedTask> claimed = Claim(flow, 2);
  ASSERT_EQ(claimed.size(), 2u);
  Complete(claimed[0], J("1"));
  clock().Advance(absl::Minutes(1));
  Fail(claimed[1], absl::InternalError("no"));
  clock().Advance(absl::Minutes(1));
  ASSERT_TRUE(engine().CancelRun(runs[2], CancelMode::kImmediate).ok());
  clock().Advance(absl::Hours(1));
  ASSERT_TRUE(engine().CancelRun(runs[3], CancelMode::kImmediate).ok());

  EXPECT_EQ(Prunable(t0), 0);
  EXPECT_EQ(Prunable(t0 + absl::Minutes(1)), 1);
  EXPECT_EQ(Prunable(t0 + absl::Minutes(30)), 3);
  EXPECT_EQ(Prunable(clock().Now() + absl::Seconds(1)), 4)
      << "the started run never counts";
  absl::StatusOr<int> pruned = engine().PruneRuns(t0 + absl::Minutes(30), 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 3) << "the same runs the count saw";
  EXPECT_EQ(Prunable(t0 + absl::Minutes(30)), 0);
  EXPECT_EQ(engine().CountPrunableRuns(absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

SLUICE_CONFORMANCE_SUITE(OperatorViews);

}  // namespace
}  // namespace sluice::testing
