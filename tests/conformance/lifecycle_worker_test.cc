// Workers and the task lifecycle: several jobs and flows on one queue,
// cancel requests reaching handlers, releasing prefetched tasks on Stop(),
// and idle workers sleeping until the next hidden task becomes visible.
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "lifecycle_fixture.h"
#include "sluice/job.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LifecycleWorkers : public WorkerConformance {
 protected:
  // Waits until `done` holds; false on timeout.
  template <typename F>
  bool Eventually(F done) {
    absl::Time give_up = absl::Now() + kWorkerTestDeadline;
    while (!done()) {
      if (absl::Now() >= give_up) return false;
      absl::SleepFor(absl::Milliseconds(2));  // polling a stored state
    }
    return true;
  }

  std::vector<std::string> Ledger(const RunId& run) {
    std::vector<std::string> out;
    for (const AttemptRecord& a : View(run).attempts) {
      out.push_back(StrCat(ToString(a.outcome), "@", a.attempt));
    }
    return out;
  }
};

TEST_P(LifecycleWorkers, OneWorker_ServesTwoJobsAndAFlowOnOneQueue) {
  Job email("send_email", {.queue = "mail"},
            [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
              return Json(StrCat("sent ", payload.as_string().c_str()));
            });
  Job resize("resize_photo", {.queue = "mail"}, Echo());
  Flow digest("digest", {.queue = "mail"});
  digest.Step("gather", Returns(J("3")))
      .Step("send", {.depends_on = {"gather"}}, Returns(J("\"ok\"")));
  std::unique_ptr<Worker> worker = [&] {
    absl::StatusOr<std::unique_ptr<Worker>> w = engine().StartWorker(
        WorkerSpec().Serve(email).Serve(resize).Serve(digest), Fast());
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }();
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->queue(), "mail");
  absl::StatusOr<RunId> a = engine().StartRun("send_email", J("\"bob\""));
  absl::StatusOr<RunId> b = engine().StartRun("resize_photo", J("[1,2]"));
  absl::StatusOr<RunId> c = engine().StartRun("digest", J("{}"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_TRUE(AwaitRunsEnd({*a, *b, *c}));
  ASSERT_TRUE(worker->Stop().ok());
  EXPECT_EQ(View(*a).run.output, J("{\"job\":\"sent bob\"}"));
  EXPECT_EQ(View(*b).run.output, J("{\"job\":[1,2]}"));
  EXPECT_EQ(View(*c).run.status, RunStatus::kCompleted);
  EXPECT_EQ(worker->stats().completed, 4);
}

TEST_P(LifecycleWorkers, DefinitionsOnDifferentQueues_AreRefused) {
  Flow one("queue_one");
  one.Step("a", Echo());
  Flow two("queue_two");
  two.Step("a", Echo());
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(WorkerSpec().Serve(one).Serve(two), Fast());
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(worker.status().message()),
              HasSubstr("one worker serves one queue"));
  EXPECT_EQ(engine().StartWorker(WorkerSpec(), Fast()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing was deployed.
  EXPECT_EQ(engine().StartRun("queue_one", J("{}")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(LifecycleWorkers, CancelRequest_FiresTheTokenAndIsRecordedCancelled) {
  absl::Notification started;
  Flow flow("worker_cancel_request");
  flow.Step("wait", [&](const Json&, TaskContext& ctx) -> absl::StatusOr<Json> {
    started.Notify();
    absl::Time give_up = absl::Now() + kWorkerTestDeadline;
    while (!ctx.cancelled() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));  // a handler polling its token
    }
    return absl::CancelledError("stopped as asked");
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWorkerTestDeadline));
  ASSERT_TRUE(engine().CancelRun(run).ok());
  ASSERT_TRUE(Eventually(
      [&] { return View(run).run.status == RunStatus::kCancelled; }));
  ASSERT_TRUE(worker->Stop().ok());
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
  EXPECT_EQ(worker->stats().cancelled, 1);
  EXPECT_EQ(worker->stats().stale, 0);
}

TEST_P(LifecycleWorkers, Stop_ReleasesPrefetchedTasksWithoutUsingAttempts) {
  absl::Notification first_started;
  absl::Notification let_go;
  Flow flow("worker_release", {.max_attempts = 1});
  flow.Step("work", [&](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    first_started.Notify();
    let_go.WaitForNotificationWithTimeout(kWorkerTestDeadline);
    return J("1");
  });
  Deploy(flow);
  std::vector<RunId> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(Start(flow, J("{}")));
  WorkerOptions options = Fast(/*concurrency=*/1);
  options.batch_size = 3;
  std::unique_ptr<Worker> worker = StartWorker(flow, options);
  ASSERT_TRUE(
      first_started.WaitForNotificationWithTimeout(kWorkerTestDeadline));
  std::thread stopper([&] { EXPECT_TRUE(worker->Stop().ok()); });
  bool released = Eventually([&] {
    return TaskOf(runs[1], "work").status == TaskStatus::kQueued &&
           TaskOf(runs[2], "work").status == TaskStatus::kQueued;
  });
  let_go.Notify();
  stopper.join();
  ASSERT_TRUE(released);
  EXPECT_EQ(View(runs[0]).run.status, RunStatus::kCompleted);
  for (int i : {1, 2}) {
    TaskRecord t = TaskOf(runs[i], "work");
    EXPECT_EQ(t.budget_start, 1);
    EXPECT_THAT(Ledger(runs[i]), ElementsAre("released@1"));
  }
  EXPECT_EQ(worker->stats().released, 2);
  // Their one attempt is still there to use.
  std::vector<ClaimedTask> left = Claim(flow);
  ASSERT_EQ(left.size(), 2u);
  Complete(left[0], J("1"));
  Complete(left[1], J("1"));
  EXPECT_EQ(View(runs[2]).run.status, RunStatus::kCompleted);
}

TEST_P(LifecycleWorkers, IdleWorker_ClaimsWhenTheRetryBecomesVisible) {
  std::atomic<int> calls{0};
  Flow flow("worker_wakes_for_retry", {.max_attempts = 2,
                                       .base_delay = absl::Milliseconds(100),
                                       .backoff = BackoffKind::kFixed});
  flow.Step("work", [&](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    if (calls.fetch_add(1) == 0) return absl::UnavailableError("not yet");
    return J("1");
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());  // poll: 1 h
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(Eventually([&] { return !View(run).attempts.empty(); }));
  // No signal comes: only the claim's hint brings the worker back.
  clock().Advance(absl::Milliseconds(100));
  ASSERT_TRUE(AwaitRunEnd(run));
  ASSERT_TRUE(worker->Stop().ok());
  EXPECT_THAT(Ledger(run), ElementsAre("retried@1", "completed@2"));
}

TEST_P(LifecycleWorkers, ClaimWithHint_SaysWhenTheNextTaskIsVisible) {
  Flow flow("hint", {.max_attempts = 3,
                     .base_delay = absl::Seconds(7),
                     .backoff = BackoffKind::kFixed});
  flow.Step("work", Echo());
  Deploy(flow);
  ClaimRequest request{.queue = "hint", .worker_id = "w", .limit = 10};
  request.served.AddFlow(flow.shape());
  absl::StatusOr<ClaimBatch> empty = engine().ClaimWithHint(request);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->tasks.empty());
  EXPECT_EQ(empty->next_visible_at, std::nullopt);
  Start(flow, J("{}"));
  absl::StatusOr<ClaimBatch> one = engine().ClaimWithHint(request);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->tasks.size(), 1u);
  Fail(one->tasks[0], absl::UnavailableError("later"));
  absl::StatusOr<ClaimBatch> later = engine().ClaimWithHint(request);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->tasks.empty());
  EXPECT_EQ(later->next_visible_at, clock().Now() + absl::Seconds(7));
}

SLUICE_CONFORMANCE_SUITE(LifecycleWorkers);

}  // namespace
}  // namespace sluice::testing
