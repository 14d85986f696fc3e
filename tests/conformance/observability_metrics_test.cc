// Engine::Metrics on every backend: the in-process counters follow the task
// path, and the store's gauges (queue depth, outbox backlog) read the store.
#include "lifecycle_fixture.h"
#include "sluice/metrics.h"

namespace sluice::testing {
namespace {

class ObservabilityMetrics : public Lifecycle {
 protected:
  const FlowRunCounts* RunsOf(const MetricsSnapshot& s, std::string_view flow) {
    for (const FlowRunCounts& r : s.runs) {
      if (r.flow == flow) return &r;
    }
    return nullptr;
  }
  const StepTaskCounts* TasksOf(const MetricsSnapshot& s, std::string_view flow,
                                std::string_view step) {
    for (const StepTaskCounts& t : s.tasks) {
      if (t.flow == flow && t.step == step) return &t;
    }
    return nullptr;
  }
  const QueueMetrics* QueueOf(const MetricsSnapshot& s,
                              std::string_view queue) {
    for (const QueueMetrics& q : s.queues) {
      if (q.queue == queue) return &q;
    }
    return nullptr;
  }
};

TEST_P(ObservabilityMetrics, Counters_FollowClaimsResultsAndRuns) {
  Flow flow = OneStep("metered", /*max_attempts=*/2);
  Deploy(flow);
  for (int i = 0; i < 3; ++i) Start(flow, J("{}"));

  MetricsSnapshot before = engine().Metrics();
  ASSERT_EQ(before.store_error, "");
  ASSERT_NE(QueueOf(before, "metered"), nullptr);
  EXPECT_EQ(QueueOf(before, "metered")->waiting, 3);
  EXPECT_EQ(QueueOf(before, "metered")->active, 0);
  EXPECT_EQ(RunsOf(before, "metered")->started, 3);

  std::vector<ClaimedTask> claimed = Claim(flow, 3);
  ASSERT_EQ(claimed.size(), 3u);
  clock().Advance(absl::Milliseconds(40));
  Complete(claimed[0], J("1"));
  Complete(claimed[1], J("2"));
  Fail(claimed[2], absl::UnavailableError("once"));  // retried
  Fail(One(flow), absl::UnavailableError("twice"));  // out of attempts

  MetricsSnapshot after = engine().Metrics();
  const StepTaskCounts* tasks = TasksOf(after, "metered", "work");
  ASSERT_NE(tasks, nullptr);
  EXPECT_EQ(tasks->claimed, 4);
  EXPECT_EQ(tasks->completed, 2);
  EXPECT_EQ(tasks->retried, 1);
  EXPECT_EQ(tasks->failed, 1);
  EXPECT_EQ(tasks->latency_seconds.count, 2);
  EXPECT_DOUBLE_EQ(tasks->latency_seconds.sum, 0.08);  // 2 x 40 ms
  const FlowRunCounts* runs = RunsOf(after, "metered");
  EXPECT_EQ(runs->started, 3);
  EXPECT_EQ(runs->completed, 2);
  EXPECT_EQ(runs->failed, 1);
  const QueueMetrics* queue = QueueOf(after, "metered");
  EXPECT_EQ(queue->waiting, 0);
  EXPECT_EQ(queue->active, 0);
  EXPECT_EQ(queue->claim_batch_size.count, 2);  // a batch of 3, then 1
  EXPECT_EQ(queue->claim_batch_size.sum, 4);
  EXPECT_EQ(after.outbox_backlog, 0);
}

TEST_P(ObservabilityMetrics, Stalls_AndCancelledRuns_AreCounted) {
  Flow flow = OneStep("stalling", /*max_attempts=*/3);
  Deploy(flow);
  RunId stalls = Start(flow, J("{}"));
  RunId cancelled = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow, 1);
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(
      engine()
          .CancelRun(claimed[0].key.run_id == stalls ? cancelled : stalls,
                     CancelMode::kImmediate)
          .ok());
  EXPECT_EQ(RecoverAfterLeases(), 1);

  MetricsSnapshot s = engine().Metrics();
  EXPECT_EQ(TasksOf(s, "stalling", "work")->stalled, 1);
  EXPECT_EQ(RunsOf(s, "stalling")->cancelled, 1);
  EXPECT_EQ(QueueOf(s, "stalling")->waiting, 1);  // the stalled task, again
}

TEST_P(ObservabilityMetrics, OutboxBacklog_CountsReportsNotYetApplied) {
  Flow flow = OneStep("backlog");
  Deploy(flow);
  Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  FinishOnly({{task.key, task.attempt, J("1")}});
  EXPECT_EQ(engine().Metrics().outbox_backlog, 1);
}

TEST_P(ObservabilityMetrics, Snapshot_RendersAsValidText) {
  Flow flow = OneStep("rendered");
  Deploy(flow);
  Start(flow, J("{}"));
  Complete(One(flow), J("1"));
  std::string text = WritePrometheusText(engine().Metrics());
  EXPECT_NE(text.find("sluice_tasks_completed_total{flow=\"rendered\","
                      "step=\"work\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_queue_tasks{queue=\"rendered\",state=\"waiting\"}"
                      " 0\n"),
            std::string::npos)
      << text;
}

SLUICE_CONFORMANCE_SUITE(ObservabilityMetrics);

}  // namespace
}  // namespace sluice::testing
