// Fixtures for worker tests: WorkerConformance runs workers over the test's
// backend; FaultyWorkers over a FaultyBackend wrapping it, which misbehaves
// on demand. Tests wait on conditions with a deadline, never on sleeps.
#ifndef SLUICE_TESTS_CONFORMANCE_WORKER_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_WORKER_FIXTURE_H_

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "faulty_backend.h"
#include "harness.h"

namespace sluice::testing {

inline constexpr absl::Duration kWorkerTestDeadline = absl::Seconds(30);

// Workers over the test's backend, with a record of the runs that ended.
class WorkerConformance : public Conformance {
 protected:
  void SetUp() override {
    Conformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend to watch
    WatchRunEnds();
  }

  // Records every run that completes or fails on the current engine.
  void WatchRunEnds() {
    engine().Subscribe([this](const Event& e) {
      absl::MutexLock lock(&mu_);
      if (e.kind == EventKind::kRunCompleted ||
          e.kind == EventKind::kRunFailed) {
        ended_.push_back(e.run_id);
      }
    });
  }

  // Waits until every run in `runs` ends; false on timeout.
  bool AwaitRunsEnd(const std::vector<RunId>& runs) {
    absl::MutexLock lock(&mu_);
    auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(runs.begin(), runs.end(), [&](const RunId& run) {
        return std::find(ended_.begin(), ended_.end(), run) != ended_.end();
      });
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), kWorkerTestDeadline);
  }

  static WorkerOptions Fast(int concurrency = 4) {
    WorkerOptions o;
    o.concurrency = concurrency;
    o.batch_size = 10;
    o.poll_interval = absl::Hours(1);  // only signals wake these workers
    o.heartbeat_interval = absl::Milliseconds(20);
    o.sweep_interval = absl::ZeroDuration();
    return o;
  }

  std::unique_ptr<Worker> StartWorker(const Flow& flow, WorkerOptions options) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        engine().StartWorker(flow, options);
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? std::move(*worker) : nullptr;
  }

  bool AwaitRunEnd(const RunId& run) { return AwaitRunsEnd({run}); }

  absl::Mutex mu_;
  std::vector<RunId> ended_ ABSL_GUARDED_BY(mu_);
};

class FaultyWorkers : public WorkerConformance {
 protected:
  void SetUp() override {
    Conformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    faulty_ = std::make_unique<FaultyBackend>(backend());
    UseEngine(*faulty_);
    WatchRunEnds();
  }

  FaultyBackend& faulty() { return *faulty_; }

  // Calls worker.Stop() on another thread and waits for it at most
  // `timeout`. Returns its status, or nullopt if it had not returned; then
  // the backend's faults are cleared so that it can, and it is joined.
  std::optional<absl::Status> StopWithin(Worker& worker,
                                         absl::Duration timeout) {
    absl::Notification returned;
    absl::Status status;
    std::thread stopper([&] {
      status = worker.Stop();
      returned.Notify();
    });
    bool in_time = returned.WaitForNotificationWithTimeout(timeout);
    if (!in_time) faulty().SetUnavailable(false);
    stopper.join();
    if (!in_time) return std::nullopt;
    return status;
  }

  bool LogHas(std::string_view text) {
    std::vector<std::string> lines = LogLines();
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(text) != std::string::npos;
    });
  }

 private:
  std::unique_ptr<FaultyBackend> faulty_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_WORKER_FIXTURE_H_
