// Stopping workers: Stop() returns by the drain deadline even when a handler
// ignores cancellation, and the rows of workers long gone are pruned.
#include <memory>
#include <optional>

#include "absl/synchronization/notification.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class WorkerStop : public FaultyWorkers {
 protected:
  // Writes a worker's row as a worker that crashed or stopped would leave it.
  void PutWorker(const std::string& id, absl::Time heartbeat,
                 std::optional<absl::Time> stopped) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    ASSERT_TRUE((*tx)
                    ->UpsertWorker(WorkerRecord{id, "q", "f", heartbeat,
                                                heartbeat, stopped})
                    .ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  std::vector<std::string> WorkerIds() {
    std::vector<std::string> ids;
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return ids;
    auto workers = (*tx)->ListWorkers();
    EXPECT_TRUE(workers.ok()) << workers.status();
    if (!workers.ok()) return ids;
    for (const WorkerRecord& w : *workers) ids.push_back(w.worker_id);
    return ids;
  }

  // Waits until the stored workers are exactly `ids` (sorted); the state is
  // in the backend, so this polls it until the deadline.
  bool AwaitWorkerIds(const std::vector<std::string>& ids) {
    absl::Time give_up = absl::Now() + kWorkerTestDeadline;
    while (WorkerIds() != ids) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }
};

// Notifies when the last copy of whatever holds it is destroyed.
class NotifyOnDestroy {
 public:
  explicit NotifyOnDestroy(absl::Notification* destroyed)
      : destroyed_(destroyed) {}
  ~NotifyOnDestroy() { destroyed_->Notify(); }

 private:
  absl::Notification* destroyed_;
};

TEST_P(WorkerStop, HandlerIgnoringCancellation_IsAbandonedAtTheDeadline) {
  // Declared first, so it outlives everything that may signal it.
  absl::Notification handler_gone;
  absl::Notification started;
  auto latch = std::make_shared<absl::Notification>();
  auto flow = std::make_unique<Flow>("stubborn");
  {
    auto guard = std::make_shared<NotifyOnDestroy>(&handler_gone);
    flow->Step("hold",
               [&started, latch, guard](const Json&,
                                        TaskContext&) -> absl::StatusOr<Json> {
                 started.Notify();
                 latch->WaitForNotification();  // deaf to its cancel token
                 return J("\"late\"");
               });
  }
  WorkerOptions options = Fast();
  options.drain_timeout = absl::Milliseconds(200);
  std::unique_ptr<Worker> worker = StartWorker(*flow, options);
  flow.reset();  // the worker keeps its own copy of the handler
  RunId run = Start(Flow("stubborn"), J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWorkerTestDeadline));

  std::optional<absl::Status> stopped =
      StopWithin(*worker, kWorkerTestDeadline);
  ASSERT_TRUE(stopped.has_value()) << "Stop() did not return";
  EXPECT_EQ(stopped->code(), absl::StatusCode::kDeadlineExceeded) << *stopped;
  EXPECT_THAT(std::string(stopped->message()),
              HasSubstr("1 abandoned handlers and 0 unrecorded results"));
  absl::Status waited = worker->Wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(worker->stats().abandoned, 1);
  EXPECT_TRUE(LogHas("abandoned task (run " + run.ToString() +
                     ", step 0, task 0) attempt 1"));
  EXPECT_EQ(worker->Stop().code(), absl::StatusCode::kDeadlineExceeded)
      << "a second Stop() returns the first one's status";

  // The worker goes away while its handler still runs; when the handler
  // returns, its thread must touch nothing of the worker's.
  worker.reset();
  latch->Notify();
  ASSERT_TRUE(handler_gone.WaitForNotificationWithTimeout(kWorkerTestDeadline))
      << "the abandoned handler's thread never let go of its state";

  // The late result was dropped; stall recovery takes the task back and a
  // new worker finishes the run.
  EXPECT_EQ(TaskOf(run, "hold").status, TaskStatus::kStarted);
  clock().Advance(absl::Seconds(60) + engine().options().recovery_grace +
                  absl::Seconds(1));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(10);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 1);
  Flow again("stubborn");
  again.Step("hold", Returns(J("\"on time\"")));
  std::unique_ptr<Worker> second = StartWorker(again, Fast());
  ASSERT_TRUE(AwaitRunsEnd({run}));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"hold":"on time"})"));
  EXPECT_EQ(TaskOf(run, "hold").attempts, 2);
  EXPECT_TRUE(second->Stop().ok());
}

TEST_P(WorkerStop, HandlerFinishingWithinTheDeadline_IsRecorded) {
  absl::Notification started;
  absl::Notification release;
  Flow flow("prompt");
  flow.Step("a", [&](const Json&, TaskContext& ctx) -> absl::StatusOr<Json> {
    started.Notify();
    release.WaitForNotificationWithTimeout(kWorkerTestDeadline);
    return Json(ctx.cancelled());
  });
  WorkerOptions options = Fast();
  options.drain_timeout = absl::Seconds(20);
  std::unique_ptr<Worker> worker = StartWorker(flow, options);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWorkerTestDeadline));
  absl::Status status;
  std::thread stopper([&] { status = worker->Stop(); });
  release.Notify();
  stopper.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(worker->Wait().ok());
  EXPECT_EQ(worker->stats().abandoned, 0);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"a":false})"))
      << "a draining handler is not cancelled before the deadline";
}

TEST_P(WorkerStop, PruneWorkers_DeletesOnlyWorkersInactiveForTheWindow) {
  absl::Time now = clock().Now();
  absl::Time cutoff = now - absl::Hours(1);
  PutWorker("alive", now - absl::Seconds(10), std::nullopt);
  PutWorker("at_the_cutoff", cutoff, std::nullopt);
  PutWorker("crashed_long_ago", now - absl::Hours(2), std::nullopt);
  PutWorker("stopped_long_ago", now - absl::Hours(3), now - absl::Hours(2));
  PutWorker("stopped_recently", now - absl::Hours(2), now - absl::Minutes(5));

  absl::StatusOr<int> pruned = engine().PruneWorkers(cutoff, 1);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1) << "at most the limit";
  pruned = engine().PruneWorkers(cutoff, 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  pruned = engine().PruneWorkers(cutoff, 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 0);
  EXPECT_THAT(WorkerIds(), ::testing::ElementsAre("alive", "at_the_cutoff",
                                                  "stopped_recently"));

  EXPECT_EQ(engine().PruneWorkers(cutoff, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().PruneWorkers(absl::InfiniteFuture(), 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerIds().size(), 3u) << "bad input changes nothing";
}

TEST_P(WorkerStop, StoppedWorkers_ArePrunedBySweep_LiveWorkerKept) {
  Flow flow("pruned");
  flow.Step("a", Echo());
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
    ASSERT_TRUE(worker->Stop().ok());
  }
  PutWorker("crashed", clock().Now(), std::nullopt);
  WorkerOptions sweeping = Fast();
  sweeping.sweep_interval = absl::Milliseconds(10);
  std::unique_ptr<Worker> live = StartWorker(flow, sweeping);
  ASSERT_EQ(WorkerIds().size(), 5u) << "nothing is old enough yet";

  clock().Advance(engine().options().worker_retention + absl::Minutes(1));
  EXPECT_TRUE(AwaitWorkerIds({live->id()}))
      << "the sweep prunes the stopped and the crashed workers, not itself";
  ASSERT_TRUE(live->Stop().ok());
}

TEST_P(WorkerStop, WorkerStart_PrunesWorkersGoneForTheWindow) {
  Flow flow("pruned_at_start");
  flow.Step("a", Echo());
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
    ASSERT_TRUE(worker->Stop().ok());
  }
  clock().Advance(engine().options().worker_retention + absl::Minutes(1));
  std::unique_ptr<Worker> fresh = StartWorker(flow, Fast());
  EXPECT_THAT(WorkerIds(), ::testing::ElementsAre(fresh->id()));
  ASSERT_TRUE(fresh->Stop().ok());
}

TEST_P(WorkerStop, WorkerRetention_MustBePositive) {
  EngineOptions options = DefaultOptions();
  options.worker_retention = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(backend(), options);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(engine.status().message()),
              HasSubstr("worker_retention"));
}

SLUICE_CONFORMANCE_SUITE(WorkerStop);

}  // namespace
}  // namespace sluice::testing
