// Stopping workers: Stop() returns by the drain deadline even when a handler
// ignores cancellation.
#include <memory>
#include <optional>

#include "absl/synchronization/notification.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class WorkerStop : public FaultyWorkers {};

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

SLUICE_CONFORMANCE_SUITE(WorkerStop);

}  // namespace
}  // namespace sluice::testing
