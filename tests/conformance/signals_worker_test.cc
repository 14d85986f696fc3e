// Wait steps with real workers: no handler is needed, any worker of the
// queue applies the timeout, and coverage counts it as served.
#include "absl/synchronization/mutex.h"
#include "signals_fixture.h"
#include "worker_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

class SignalWorkers : public Signals {
 protected:
  // Records "event(step)" names of every event from now on.
  void Record() {
    engine().Subscribe([this](const Event& e) {
      absl::MutexLock lock(&mu_);
      std::string name(ToString(e.kind));
      if (!e.step_slug.empty()) name += "(" + e.step_slug + ")";
      seen_.push_back(name);
    });
  }
  // Waits until `name` was published; false after the test deadline.
  bool AwaitEvent(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(seen_.begin(), seen_.end(), name) != seen_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), kWorkerTestDeadline);
  }
  static WorkerOptions Quiet() {
    WorkerOptions o;
    o.poll_interval = absl::Hours(1);  // only wake-ups make it claim
    o.heartbeat_interval = absl::Milliseconds(50);
    o.sweep_interval = absl::ZeroDuration();
    return o;
  }

  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

TEST_P(SignalWorkers, Worker_NeedsNoHandler_AndAppliesTheTimeout) {
  Flow flow = Approval("worker_wait", {.timeout = absl::Seconds(5)});
  Record();
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(flow, Quiet());
  ASSERT_TRUE(worker.ok()) << worker.status();
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(AwaitEvent("step:completed(ask)"));
  clock().Advance(absl::Seconds(5));
  engine().Wake();
  ASSERT_TRUE(AwaitEvent("run:failed"));
  EXPECT_EQ(StepOf(View(run), "approve").status, StepStatus::kFailed);
  EXPECT_EQ((*worker)->stats().claimed, 1);  // `ask`; the wait ran nothing
  EXPECT_TRUE((*worker)->Stop().ok());
}

TEST_P(SignalWorkers, Worker_RunsTheDependentsOfASignalledWait) {
  Flow flow = Approval("worker_signal");
  Record();
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(flow, Quiet());
  ASSERT_TRUE(worker.ok()) << worker.status();
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(AwaitEvent("step:started(approve)"));
  ExpectSignal(run, "approve", J("\"go\""), SignalOutcome::kDelivered);
  ASSERT_TRUE(AwaitEvent("run:completed"));
  EXPECT_EQ(*View(run).run.output,
            J("{\"finish\":{\"run\":{},\"approve\":\"go\"}}"));
  EXPECT_TRUE((*worker)->Stop().ok());
}

TEST_P(SignalWorkers, Coverage_CountsEveryWorkerOfTheQueueForAWait) {
  Flow flow = Approval("worker_coverage");
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine().StartWorker(WorkerSpec().Serve(flow, {"ask"}), Quiet());
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<std::vector<QueueCoverage>> coverage = engine().Coverage();
  ASSERT_TRUE(coverage.ok()) << coverage.status();
  ASSERT_EQ(coverage->size(), 1u);
  std::vector<std::string> unserved;
  for (const StepCoverage* s : (*coverage)[0].Unserved()) {
    unserved.push_back(s->step_slug);
  }
  EXPECT_THAT(unserved, ElementsAre("finish"));
  EXPECT_TRUE((*worker)->Stop().ok());
}

SLUICE_CONFORMANCE_SUITE(SignalWorkers);

}  // namespace
}  // namespace sluice::testing
