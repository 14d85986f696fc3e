// RunProgress transitions of a run's lifecycle: cancel (immediate or by
// request), settling a cancel request, and reopening a run for RetryRun
// (docs/decisions/0018).
#include "run_progress.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

absl::Status RunProgress::SettleCancelRequest() {
  if (!fresh_) {
    SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<TaskRecord> tasks,
        tx->GetUnfinishedTasks(run_.run_id, std::nullopt, Fields::kNoPayloads));
    for (const TaskRecord& t : tasks) {
      if (t.status == TaskStatus::kStarted) return absl::OkStatus();
    }
  }
  return EndRun(RunStatus::kCancelled, "cancelled");
}

absl::Status RunProgress::Cancel(CancelMode mode) {
  if (ended()) {
    return absl::FailedPreconditionError(StrCat(
        "run ", run_.run_id.ToString(), " already ended (",
        ToString(run_.status), "); only a started run can be cancelled"));
  }
  if (mode == CancelMode::kImmediate) {
    return EndRun(RunStatus::kCancelled, "cancelled");
  }
  SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<TaskRecord> tasks,
      tx->GetUnfinishedTasks(run_.run_id, std::nullopt, Fields::kNoPayloads));
  bool any_started = false;
  for (TaskRecord& task : tasks) {
    task.key.run_id = run_.run_id;
    TaskStatus expected = task.status;
    int attempts = task.attempts;
    if (expected == TaskStatus::kStarted) {
      // It stays started; its next heartbeat fires its cancel token.
      any_started = true;
      task.cancel_requested = true;
    } else {
      if (expected == TaskStatus::kWaiting) {
        SLUICE_RETURN_IF_ERROR(CancelChildrenOf(task.key));
      } else {
        ctx_.writes.Archive(task.queue_name, task.message_id);
      }
      task.status = TaskStatus::kCancelled;
      task.finished_at = ctx_.now;
      task.stall_at.reset();
    }
    ctx_.writes.UpdateTask(TaskUpdate{std::move(task), expected, attempts});
  }
  if (!any_started) return EndRun(RunStatus::kCancelled, "cancelled");
  run_.cancel_requested = true;
  run_dirty_ = true;
  return absl::OkStatus();
}

absl::Status RunProgress::Reopen(const std::vector<int>& reset,
                                 const std::vector<int>& open_tasks) {
  run_.status = RunStatus::kStarted;
  run_.error.clear();
  run_.output = Json();
  run_.finished_at.reset();
  run_.cancel_requested = false;
  run_dirty_ = true;
  std::vector<int> to_complete;
  for (size_t r = 0; r < reset.size(); ++r) {
    int step = reset[r];
    StepStateRecord& st = state(step);
    st.error.clear();
    st.finished_at.reset();
    st.skip_reason = SkipReason::kNone;
    MarkDirty(step);
    if (!st.started_at) {
      st.status = StepStatus::kCreated;  // waits for its dependencies
      continue;
    }
    // A started step keeps its tasks; only those not completed run again.
    st.status = StepStatus::kStarted;
    AddRemainingTasks(step, open_tasks[r] - st.remaining_tasks.value_or(0));
    if (open_tasks[r] == 0) to_complete.push_back(step);
  }
  // A step whose every task completed, though its run ended before that
  // was counted, completes now.
  for (int step : to_complete) {
    SLUICE_RETURN_IF_ERROR(CompleteTasks(step, 0));
  }
  return Advance();
}

}  // namespace sluice
