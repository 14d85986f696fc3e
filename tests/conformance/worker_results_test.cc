// A worker whose results the backend refuses or cannot take: one refused
// result fails only its own task, and a backend that is down never keeps
// Stop() past the drain deadline.
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class WorkerResults : public FaultyWorkers {};

TEST_P(WorkerResults, RefusedResult_FailsOnlyItsTask_TheOthersAreRecorded) {
  // Every handler waits for all five, so their results tend to arrive as
  // one batch, which the backend then refuses as a whole.
  absl::Mutex mu;
  int arrived = 0;
  Flow flow("refused", {.base_delay = absl::ZeroDuration()});
  flow.Step("echo", [&](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    absl::MutexLock lock(&mu);
    ++arrived;
    auto all_here = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return arrived >= 5;
    };
    mu.AwaitWithTimeout(absl::Condition(&all_here), kWorkerTestDeadline);
    return in.at("run");
  });
  faulty().RefuseOutput(J(R"("poison")"));
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast(5));
  std::vector<RunId> runs;
  for (const char* input : {"1", "2", R"("poison")", "4", "5"}) {
    runs.push_back(Start(flow, J(input)));
  }
  ASSERT_TRUE(AwaitRunsEnd(runs));
  for (size_t i = 0; i < runs.size(); ++i) {
    RunView view = View(runs[i]);
    TaskRecord task = TaskOf(runs[i], "echo");
    if (i == 2) {
      EXPECT_EQ(view.run.status, RunStatus::kFailed);
      EXPECT_EQ(task.status, TaskStatus::kFailed);
      EXPECT_EQ(task.attempts, 1) << "a refused result is not retried";
      EXPECT_THAT(task.error,
                  HasSubstr("the backend refused to store this attempt's "
                            "result (INVALID_ARGUMENT: injected"));
      EXPECT_FALSE(task.output.has_value());
    } else {
      EXPECT_EQ(view.run.status, RunStatus::kCompleted) << i;
      EXPECT_EQ(task.status, TaskStatus::kCompleted) << i;
    }
  }
  ASSERT_TRUE(worker->Stop().ok());
  WorkerStats stats = worker->stats();
  EXPECT_EQ(stats.completed, 4);
  EXPECT_EQ(stats.failed, 1);
  EXPECT_EQ(stats.rejected, 1);
  EXPECT_EQ(stats.unrecorded, 0);
  EXPECT_TRUE(LogHas("the backend refused the result of task (run " +
                     runs[2].ToString() + ", step 0, task 0)"));
}

TEST_P(WorkerResults, BackendDownWhileRecording_StopReturnsByTheDeadline) {
  absl::Notification started;
  absl::Notification release;
  Flow flow("down");
  flow.Step("slow", [&](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    started.Notify();
    release.WaitForNotificationWithTimeout(kWorkerTestDeadline);
    return J("\"done\"");
  });
  WorkerOptions options = Fast();
  options.drain_timeout = absl::Milliseconds(200);
  std::unique_ptr<Worker> worker = StartWorker(flow, options);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWorkerTestDeadline));
  faulty().SetUnavailable(true);
  release.Notify();
  // The worker is now retrying the result against a backend that is down.
  ASSERT_TRUE(faulty().AwaitFailures(3, kWorkerTestDeadline));

  std::optional<absl::Status> stopped =
      StopWithin(*worker, kWorkerTestDeadline);
  ASSERT_TRUE(stopped.has_value()) << "Stop() did not return";
  EXPECT_EQ(stopped->code(), absl::StatusCode::kDeadlineExceeded) << *stopped;
  EXPECT_THAT(std::string(stopped->message()),
              HasSubstr("0 abandoned handlers and 1 unrecorded results"));
  EXPECT_EQ(worker->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(worker->stats().unrecorded, 1);
  EXPECT_TRUE(LogHas("the result of task (run " + run.ToString() +
                     ", step 0, task 0) attempt 1 was not recorded"));

  // Back up: the task is still the dropped attempt's, until its lease
  // lapses and stall recovery takes it back.
  faulty().SetUnavailable(false);
  EXPECT_EQ(TaskOf(run, "slow").status, TaskStatus::kStarted);
  clock().Advance(absl::Seconds(60) + engine().options().recovery_grace +
                  absl::Seconds(1));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(10);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 1);
  EXPECT_EQ(TaskOf(run, "slow").status, TaskStatus::kQueued);
}

TEST_P(WorkerResults, BackendDownForGood_IdleWorkerStopsAtOnce) {
  Flow flow("down_idle");
  flow.Step("a", Echo());
  WorkerOptions options = Fast();
  options.drain_timeout = absl::Milliseconds(200);
  options.poll_interval = absl::Milliseconds(10);  // claims keep failing
  std::unique_ptr<Worker> worker = StartWorker(flow, options);
  faulty().SetUnavailable(true);
  ASSERT_TRUE(faulty().AwaitFailures(3, kWorkerTestDeadline));
  std::optional<absl::Status> stopped =
      StopWithin(*worker, kWorkerTestDeadline);
  ASSERT_TRUE(stopped.has_value()) << "Stop() did not return";
  // Nothing was in flight; only recording the stop itself failed.
  EXPECT_EQ(stopped->code(), absl::StatusCode::kUnavailable) << *stopped;
  EXPECT_TRUE(worker->Wait().ok());
  EXPECT_TRUE(LogHas("claim failed: UNAVAILABLE: injected"));
}

SLUICE_CONFORMANCE_SUITE(WorkerResults);

}  // namespace
}  // namespace sluice::testing
