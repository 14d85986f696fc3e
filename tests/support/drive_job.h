// A worker's loop without its threads, for tests that must choose when each
// handler runs: claim a job's tasks, run its handler on each in the test's
// thread, record the results and apply their reports.
#ifndef SLUICE_TESTS_SUPPORT_DRIVE_JOB_H_
#define SLUICE_TESTS_SUPPORT_DRIVE_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/engine.h"
#include "sluice/job.h"
#include "sluice/task_context.h"

namespace sluice::testing {

struct DriveOptions {
  std::string worker_id = "test";
  // Claim rounds at most; fewer once a claim finds nothing.
  int max_rounds = 50;
  int claim_limit = 100;
};

// Runs the handler of a claimed task's step in `flow`, as a worker
// would (no cancellation), and returns its result.
inline TaskResult RunClaimed(const Flow& flow, const ClaimedTask& task) {
  TaskContext context(
      TaskContext::Info{task.key.run_id, task.flow_slug, task.step_slug,
                        task.key.task_index, task.attempt, task.max_attempts,
                        task.deadline},
      CancelToken());
  return {task.key, task.attempt,
          flow.handler(task.key.step_index)(task.input, context)};
}

// Claims and runs `job`'s handlers on `engine` until nothing is claimable
// (or `max_rounds`). Errors are tolerated, since recovery from them is what
// the callers test. Returns the number of handler calls.
inline int DriveJob(Engine& engine, const Job& job,
                    const DriveOptions& options = {}) {
  int calls = 0;
  for (int round = 0; round < options.max_rounds; ++round) {
    ClaimRequest request;
    request.queue = job.options().queue;
    request.worker_id = options.worker_id;
    request.served.AddFlow(job.flow().shape());
    request.limit = options.claim_limit;
    absl::StatusOr<std::vector<ClaimedTask>> claimed = engine.Claim(request);
    if (!claimed.ok() || claimed->empty()) break;
    std::vector<TaskResult> results;
    for (const ClaimedTask& task : *claimed) {
      results.push_back(RunClaimed(job.flow(), task));
      ++calls;
    }
    absl::StatusOr<FinishOutcome> done = engine.FinishTasks(results);
    if (done.ok()) (void)engine.ApplyReports(done->report_ids);
  }
  return calls;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_DRIVE_JOB_H_
