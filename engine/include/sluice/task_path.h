// The task path's values: what a worker claims, what it hands back, and the
// leases it holds meanwhile (Engine::Claim, FinishTasks, Heartbeat). Included
// by sluice/engine.h.
#ifndef SLUICE_TASK_PATH_H_
#define SLUICE_TASK_PATH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/flow.h"
#include "sluice/json.h"
#include "sluice/native_connection.h"
#include "sluice/records.h"

namespace sluice {

// What a heartbeat learned about one lease.
enum class LeaseState {
  kOwned,            // extended
  kLost,             // the attempt no longer owns its task: stop
  kCancelRequested,  // owned, but its run asked it to stop; not extended
};

// The (flow, step) pairs a worker runs handlers for.
class StepSet {
 public:
  void Add(std::string_view flow_slug, int step_index);
  void AddFlow(const FlowShape& flow);
  bool Contains(std::string_view flow_slug, int step_index) const;
  // Each flow with a flag per step index.
  const std::vector<std::pair<std::string, std::vector<bool>>>& flows() const {
    return flows_;
  }

 private:
  std::vector<std::pair<std::string, std::vector<bool>>> flows_;
};

// The generation of a flow a worker deployed (see development_recompile).
struct FlowGeneration {
  std::string flow_slug;
  int64_t generation = 1;
};

struct ClaimRequest {
  std::string queue;
  std::string worker_id;
  StepSet served;
  int limit = 10;
  // With EngineOptions::development_recompile: the generation of each flow
  // the worker deployed. A flow recompiled since fails the claim before
  // anything is read (the worker runs stale handlers). Flows not listed
  // are not checked.
  std::vector<FlowGeneration> generations;
};

struct ClaimedTask {
  TaskKey key;
  std::string flow_slug;
  std::string step_slug;
  int attempt = 1;
  int max_attempts = 1;
  Json input;
  absl::Time deadline;      // claim time plus the effective timeout
  std::string traceparent;  // the run's W3C traceparent; "" if none
  // The task as this claim stored it, without its input. Handing it back in
  // TaskResult::claimed spares FinishTasks a read of the task.
  std::shared_ptr<const TaskRecord> record;
};

// A claim's tasks; when it took none, when the earliest hidden message of the
// queue becomes visible (an idle worker may sleep until then).
struct ClaimBatch {
  std::vector<ClaimedTask> tasks;
  std::optional<absl::Time> next_visible_at;
};

// A handler's result for one attempt: an output (or a FanOut), or the error
// that failed it (see errors.h for RetryAfter and NonRetryable).
struct TaskResult {
  TaskKey key;
  int attempt = 1;
  absl::StatusOr<StepResult> outcome;
  // The handler's own write (TaskContext::WriteOnCompletion), run in the
  // transaction that completes the task, and only if it does.
  NativeWrite completion_write;
  // ClaimedTask::record of this attempt, if the caller kept it. FinishTasks
  // then plans from it instead of reading the task, and its write also
  // compares the task's cancel request, so that anything that changed the
  // task since the claim sends it back to a fresh read (decision 0078).
  // Ignored unless it names this key and attempt as started.
  std::shared_ptr<const TaskRecord> claimed;
};

// What FinishTasks did with one result.
enum class ResultDisposition {
  // Stored; a report will release dependents. Also a FanOut: the task
  // parked (kWaiting) and its children were created.
  kCompleted,
  kRetrying,  // failed; queued again after a delay
  kFailed,    // failed for good; a report applies when_exhausted
  kStale,     // the attempt no longer owns the task; nothing changed
  // The run asked the task to stop (CancelRun kRequest) and the attempt
  // failed, or the handler returned kCancelled: the task is cancelled.
  kCancelled,
  kNotFound,  // no such task (its run was deleted); nothing changed
};

struct FinishOutcome {
  std::vector<ResultDisposition> dispositions;  // one per result
  std::vector<int64_t> report_ids;              // to apply
};

struct FinishOptions {
  // Applies completion reports in the transaction that records them, for
  // each run whose row that transaction can lock without waiting and that
  // has no cancel pending; every other report goes to the outbox as
  // without it (decision 0048). Workers set it.
  bool apply_completions = false;
};

// A worker's lease on a claimed task.
struct Lease {
  TaskKey key;
  int attempt = 1;
};

}  // namespace sluice

#endif  // SLUICE_TASK_PATH_H_
