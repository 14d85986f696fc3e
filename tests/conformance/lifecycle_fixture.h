// Shared helpers of the task lifecycle scenarios (lifecycle_*_test.cc):
// attempts ledger, overrides and backoff, cancel requests, release, RetryRun
// (docs/decisions/0018-task-lifecycle-for-jobs.md).
#ifndef SLUICE_TESTS_CONFORMANCE_LIFECYCLE_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_LIFECYCLE_FIXTURE_H_

#include <string>
#include <vector>

#include "harness.h"
#include "sluice/errors.h"
#include "sluice/internal/strings.h"

namespace sluice::testing {

class Lifecycle : public Conformance {
 protected:
  // A one-step flow; retries wait `delay` (zero: visible at once).
  static Flow OneStep(std::string slug, int max_attempts = 3,
                      absl::Duration delay = absl::ZeroDuration(),
                      BackoffKind kind = BackoffKind::kExponential) {
    Flow flow(std::move(slug), {.max_attempts = max_attempts,
                                .base_delay = delay,
                                .timeout = absl::Seconds(10),
                                .backoff = kind});
    flow.Step("work", Echo());
    return flow;
  }

  // The first task a claim takes; a test failure (and an empty task) if it
  // takes none.
  ClaimedTask One(const Flow& flow) {
    std::vector<ClaimedTask> claimed = Claim(flow, 1);
    if (claimed.empty()) {
      ADD_FAILURE() << "nothing to claim";
      return ClaimedTask();
    }
    return claimed[0];
  }

  // The run's ledger as "outcome@attempt" (error text left out).
  std::vector<std::string> Ledger(const RunId& run) {
    std::vector<std::string> out;
    for (const AttemptRecord& a : View(run).attempts) {
      out.push_back(StrCat(ToString(a.outcome), "@", a.attempt));
    }
    return out;
  }

  // Checks a finish of `run`'s one task (OneStep) that the run's cancel
  // request ended: the result is cancelled, and so is the task, which keeps
  // the request, and its ledger says so.
  void ExpectCancelledByRequest(const FinishOutcome& got, const RunId& run) {
    EXPECT_THAT(got.dispositions,
                ::testing::ElementsAre(ResultDisposition::kCancelled));
    const TaskRecord stored = TaskOf(run, "work");
    EXPECT_EQ(stored.status, TaskStatus::kCancelled);
    EXPECT_TRUE(stored.cancel_requested);
    EXPECT_THAT(Ledger(run), ::testing::ElementsAre("cancelled@1"));
  }

  // Finishes results without applying their reports.
  FinishOutcome FinishOnly(std::vector<TaskResult> results) {
    absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(results);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? *outcome : FinishOutcome();
  }

  std::vector<LeaseState> Extend(const std::vector<ClaimedTask>& tasks) {
    std::vector<Lease> leases;
    for (const ClaimedTask& t : tasks) leases.push_back({t.key, t.attempt});
    absl::StatusOr<std::vector<LeaseState>> states =
        engine().ExtendLeases(leases);
    EXPECT_TRUE(states.ok()) << states.status();
    return states.ok() ? *states : std::vector<LeaseState>();
  }

  void Release(const std::vector<ClaimedTask>& tasks) {
    std::vector<Lease> leases;
    for (const ClaimedTask& t : tasks) leases.push_back({t.key, t.attempt});
    absl::Status released = engine().ReleaseTasks(leases);
    EXPECT_TRUE(released.ok()) << released;
  }

  // Moves the clock past every lease and recovers stalled tasks.
  int RecoverAfterLeases() {
    clock().Advance(absl::Minutes(5));
    absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
    EXPECT_TRUE(recovered.ok()) << recovered.status();
    return recovered.ok() ? *recovered : -1;
  }

  // The runs of the claimed tasks, in claim order.
  static std::vector<RunId> RunsOf(const std::vector<ClaimedTask>& tasks) {
    std::vector<RunId> runs;
    for (const ClaimedTask& t : tasks) runs.push_back(t.key.run_id);
    return runs;
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_LIFECYCLE_FIXTURE_H_
