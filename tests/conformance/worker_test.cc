// The worker runtime, with real threads. Tests wait on conditions with a
// deadline, never on sleeps.
#include <algorithm>
#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "boost/json/value_from.hpp"
#include "boost/json/value_to.hpp"
#include "harness.h"
#include "worker_fixture.h"

namespace sluice::testing {

// A typed handler's input and output, converted by Boost.JSON.
struct AddInput {
  int a = 0;
  int b = 0;
};
struct AddOutput {
  int sum = 0;
};
AddInput tag_invoke(boost::json::value_to_tag<AddInput>, const Json& v) {
  const Json& run = v.at("run");
  return AddInput{static_cast<int>(run.at("a").to_number<int64_t>()),
                  static_cast<int>(run.at("b").to_number<int64_t>())};
}
void tag_invoke(boost::json::value_from_tag, Json& v, const AddOutput& out) {
  v = boost::json::object{{"sum", out.sum}};
}

namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = kWorkerTestDeadline;

class Workers : public WorkerConformance {};

TEST_P(Workers, Worker_RunsAFlowWithAMapStepToCompletion) {
  Flow flow("worker_pipeline");
  flow.Step("list",
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              return in.at("run").at("items");
            })
      .Map("double", {.depends_on = {"list"}},
           [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
             return in.as_int64() * 2;
           })
      .Step("total", {.depends_on = {"double"}},
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              int64_t sum = 0;
              for (const Json& v : in.at("double").as_array())
                sum += v.as_int64();
              return sum;
            });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J(R"({"items":[1,2,3,4,5,6,7,8,9,10]})"));
  ASSERT_TRUE(AwaitRunEnd(run));
  EXPECT_EQ(*View(run).run.output, J(R"({"total":110})"));
  ASSERT_TRUE(worker->Stop().ok());
  WorkerStats stats = worker->stats();
  EXPECT_EQ(stats.completed, 12);
  EXPECT_EQ(stats.claimed, 12);
}

TEST_P(Workers, Worker_NeverRunsMoreHandlersThanItsConcurrency) {
  absl::Mutex mu;
  int active = 0;
  int peak = 0;
  absl::Notification gate;
  Flow flow("limited");
  flow.Map("each", [&](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    {
      absl::MutexLock lock(&mu);
      peak = std::max(peak, ++active);
    }
    gate.WaitForNotificationWithTimeout(kDeadline);
    absl::MutexLock lock(&mu);
    --active;
    return in;
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast(3));
  RunId run = Start(flow, boost::json::array(20, 1));
  // Wait until the worker is at its limit, then let everything finish.
  {
    absl::MutexLock lock(&mu);
    auto at_limit = [&]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return peak >= 3; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&at_limit), kDeadline));
  }
  gate.Notify();
  ASSERT_TRUE(AwaitRunEnd(run));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(peak, 3);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(Workers, IdleWorker_WakesOnTheInProcessSignalWithoutPolling) {
  Flow flow("wake");
  flow.Step("a", Returns(J("1")));
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  // The worker is idle with an hour-long poll interval; only the signal
  // from StartRun's commit can make it claim within the deadline.
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(AwaitRunEnd(run));
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(Workers, Stop_DrainsRunningHandlersAndRecordsTheirResults) {
  absl::Notification started;
  absl::Notification release;
  Flow flow("drain");
  flow.Step("slow", [&](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    started.Notify();
    release.WaitForNotificationWithTimeout(kDeadline);
    return J("\"done\"");
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kDeadline));
  absl::Status stopped;
  std::thread stopper([&] { stopped = worker->Stop(); });
  // Stop is waiting for the handler; it hasn't finished.
  EXPECT_FALSE(worker->WaitFor(absl::Milliseconds(50)));
  release.Notify();
  stopper.join();
  EXPECT_TRUE(stopped.ok()) << stopped;
  EXPECT_TRUE(worker->Wait().ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"slow":"done"})"));
}

TEST_P(Workers, TypedHandler_ConvertsInputAndOutputThroughBoostJson) {
  Flow flow("typed");
  flow.Step("add", Typed<AddInput, AddOutput>(
                       [](const AddInput& in,
                          TaskContext&) -> absl::StatusOr<AddOutput> {
                         return AddOutput{in.a + in.b};
                       }));
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J(R"({"a":2,"b":40})"));
  ASSERT_TRUE(AwaitRunEnd(run));
  EXPECT_EQ(*View(run).run.output, J(R"({"add":{"sum":42}})"));
}

TEST_P(Workers, TypedHandler_InputThatDoesNotConvert_FailsWithoutRetry) {
  Flow flow("typed_bad");
  flow.Step("add", Typed<AddInput, AddOutput>(
                       [](const AddInput& in,
                          TaskContext&) -> absl::StatusOr<AddOutput> {
                         return AddOutput{in.a + in.b};
                       }));
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J(R"({"a":"two"})"));
  ASSERT_TRUE(AwaitRunEnd(run));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(TaskOf(run, "add").attempts, 1);
}

TEST_P(Workers, Handler_GetsItsRunStepAttemptAndDeadline) {
  absl::Mutex mu;
  std::vector<std::string> seen;
  Flow flow("context",
            {.base_delay = absl::ZeroDuration(), .timeout = absl::Seconds(42)});
  flow.Map("each", [&](const Json&, TaskContext& ctx) -> absl::StatusOr<Json> {
    absl::MutexLock lock(&mu);
    seen.push_back(absl::StrCat(ctx.flow_slug(), "/", ctx.step_slug(), "[",
                                ctx.task_index(), "] attempt ", ctx.attempt(),
                                " of ", ctx.max_attempts(), " run ",
                                ctx.run_id().ToString()));
    EXPECT_EQ(ctx.deadline() - clock().Now(), absl::Seconds(42));
    if (ctx.attempt() == 1) return absl::InternalError("again");
    return Json(ctx.attempt());
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast(1));
  RunId run = Start(flow, J("[0]"));
  ASSERT_TRUE(AwaitRunEnd(run));
  absl::MutexLock lock(&mu);
  std::string id = run.ToString();
  EXPECT_THAT(
      seen, ::testing::ElementsAre("context/each[0] attempt 1 of 3 run " + id,
                                   "context/each[0] attempt 2 of 3 run " + id));
}

TEST_P(Workers, HandlerThatThrows_FailsTheAttempt) {
  Flow flow("throws", {.max_attempts = 2, .base_delay = absl::ZeroDuration()});
  flow.Step("a", [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
    throw std::runtime_error("kaboom");
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(AwaitRunEnd(run));
  TaskRecord task = TaskOf(run, "a");
  EXPECT_EQ(task.status, TaskStatus::kFailed);
  EXPECT_EQ(task.attempts, 2);
  EXPECT_THAT(task.error, HasSubstr("handler threw: kaboom"));
}

TEST_P(Workers, UnclaimableMessage_StopsTheWorkerWithOneError) {
  Flow flow("fatal");
  flow.Step("a", Echo());
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<OutgoingMessage> m = {{J(R"({"secret":1})"), clock().Now()}};
    ASSERT_TRUE((*tx)->SendMessages("fatal", m, clock().Now()).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  engine().Wake("fatal");
  ASSERT_TRUE(worker->WaitFor(kDeadline));
  absl::Status error = worker->Wait();
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(error.message()), HasSubstr("has no task"));
  EXPECT_THAT(std::string(error.message()),
              ::testing::Not(HasSubstr("secret")));
}

TEST_P(Workers, Worker_RegistersHeartbeatsAndShowsInCoverage) {
  Flow flow("covered");
  flow.Step("a", Echo());
  Flow other("uncovered");
  other.Step("a", Echo());
  Deploy(other);
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  absl::StatusOr<std::vector<QueueCoverage>> coverage = engine().Coverage();
  ASSERT_TRUE(coverage.ok()) << coverage.status();
  std::map<std::string, int> live;
  for (const QueueCoverage& q : *coverage) live[q.queue] = q.live_workers;
  EXPECT_EQ(live["covered"], 1);
  EXPECT_EQ(live["uncovered"], 0);
  ASSERT_TRUE(worker->Stop().ok());
  coverage = engine().Coverage();
  ASSERT_TRUE(coverage.ok());
  for (const QueueCoverage& q : *coverage)
    EXPECT_EQ(q.live_workers, 0) << q.queue;
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  auto workers = (*tx)->ListWorkers();
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].worker_id, worker->id());
  EXPECT_EQ((*workers)[0].queue_name, "covered");
  EXPECT_TRUE((*workers)[0].stopped_at.has_value());
}

TEST_P(Workers, CancelToken_FiresWhenTheRunIsCancelled) {
  absl::Notification started;
  std::atomic<bool> saw_cancel{false};
  Flow flow("cancellable");
  flow.Step("long", [&](const Json&, TaskContext& ctx) -> absl::StatusOr<Json> {
    started.Notify();
    absl::Time give_up = absl::Now() + kDeadline;
    while (!ctx.cancelled() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));  // a handler polling its token
    }
    saw_cancel = ctx.cancelled();
    return absl::CancelledError("stopped");
  });
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kDeadline));
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  ASSERT_TRUE(worker->Stop().ok());
  EXPECT_TRUE(saw_cancel.load());
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_EQ(worker->stats().stale, 1);
}

TEST_P(Workers, InvalidWorkerOptions_AreRejectedBeforeDeploying) {
  Flow flow("bad_options");
  flow.Step("a", Echo());
  WorkerOptions options = Fast();
  options.concurrency = 0;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(flow, options);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine().StartRun("bad_options", J("{}")).ok());  // not deployed
}

SLUICE_CONFORMANCE_SUITE(Workers);

}  // namespace
}  // namespace sluice::testing
