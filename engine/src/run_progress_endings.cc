// RunProgress transitions that end steps, tasks and runs: a step's
// failure, a run's end and what it ends with it, a task out of attempts,
// a type violation, unreadable records, and children to cancel.
#include "fan_out_internal.h"
#include "ledger.h"
#include "run_progress.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

absl::Status RunProgress::FailStep(int step, const std::string& error) {
  StepStateRecord& st = state(step);
  st.status = StepStatus::kFailed;
  st.error = error;
  st.finished_at = ctx_.now;
  st.output.reset();  // a signal held for it is dropped
  MarkDirty(step);
  Emit(EventKind::kStepFailed, step, nullptr, error);
  return EndRun(RunStatus::kFailed, error);
}

absl::Status RunProgress::EndRun(RunStatus status, const std::string& error) {
  run_.status = status;
  run_.error = error;
  run_.finished_at = ctx_.now;
  run_dirty_ = true;
  Emit(status == RunStatus::kCancelled ? EventKind::kRunCancelled
                                       : EventKind::kRunFailed,
       -1, nullptr, error);
  SLUICE_RETURN_IF_ERROR(EndUnfinishedTasks(-1, TaskStatus::kCancelled));
  for (int i = 0; i < ctx_.flow.step_count(); ++i) {
    StepStateRecord& st = state(i);
    if (IsTerminal(st.status)) continue;
    st.status = StepStatus::kCancelled;
    st.finished_at = ctx_.now;
    st.output.reset();  // a signal held for it is dropped
    MarkDirty(i);
  }
  return absl::OkStatus();
}

absl::Status RunProgress::EndUnfinishedTasks(int step, TaskStatus status) {
  for (int i = 0; i < ctx_.flow.step_count(); ++i) {
    if (step >= 0 && i != step) continue;
    for (size_t handle : new_tasks_[i]) {
      ctx_.writes.EndNewTask(handle, status, ctx_.now);
    }
    new_tasks_[i].clear();
    if (new_maps_[i]) ctx_.writes.EndMapTasks(*new_maps_[i], status, ctx_.now);
    new_maps_[i].reset();
  }
  if (fresh_) return absl::OkStatus();
  std::optional<int> only_step;
  if (step >= 0) only_step = step;
  SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<TaskRecord> tasks,
      tx->GetUnfinishedTasks(run_.run_id, only_step, Fields::kNoPayloads));
  for (TaskRecord& task : tasks) {
    task.key.run_id = run_.run_id;  // even if its copy did not decode
    TaskStatus expected = task.status;
    int attempts = task.attempts;
    // A started attempt ends here: the ledger says it was cancelled.
    std::optional<AttemptRecord> ended;
    if (expected == TaskStatus::kStarted) {
      ended = EndedAttempt(task, AttemptOutcome::kCancelled, ctx_.now);
    }
    if (expected == TaskStatus::kWaiting) {
      // Parked on children: its message is archived already; the cancels
      // it owes its live children go through its links.
      SLUICE_RETURN_IF_ERROR(CancelChildrenOf(task.key));
    } else {
      ctx_.writes.Archive(task.queue_name, task.message_id);
    }
    task.status = status;
    task.finished_at = ctx_.now;
    task.stall_at.reset();
    ctx_.writes.UpdateTask(TaskUpdate{std::move(task), expected, attempts},
                           std::move(ended));
  }
  return absl::OkStatus();
}

absl::Status RunProgress::ExhaustTask(int step, const std::string& error) {
  if (ended() || state(step).status != StepStatus::kStarted) {
    return absl::OkStatus();
  }
  switch (ctx_.flow.step(step).shape->spec.when_exhausted) {
    case Policy::kFail:
      return FailStep(step, error);
    case Policy::kSkip:
      return SkipStep(step, SkipReason::kHandlerFailed, error);
    case Policy::kSkipCascade:
      return SkipCascade(step, SkipReason::kHandlerFailed, error);
  }
  return absl::OkStatus();
}

absl::Status RunProgress::FailTypeViolation(int step,
                                            const std::string& error) {
  if (ended() || state(step).status != StepStatus::kStarted) {
    return absl::OkStatus();
  }
  return FailStep(step, error);
}

absl::Status RunProgress::FailUnreadable(int step, const std::string& error) {
  if (ended()) return absl::OkStatus();
  if (step >= 0 && step < ctx_.flow.step_count() &&
      !IsTerminal(state(step).status)) {
    return FailStep(step, error);
  }
  return EndRun(RunStatus::kFailed, error);
}

std::string RunProgress::UnreadableState() const {
  std::string unreadable = run_.unreadable;
  for (size_t i = 0; i < steps_.size() && i < ctx_.flow.steps().size(); ++i) {
    if (steps_[i].unreadable.empty()) continue;
    AddUnreadable(
        unreadable,
        StrCat("step \"", ctx_.flow.step(static_cast<int>(i)).shape->slug,
               "\": ", steps_[i].unreadable));
  }
  return unreadable.empty() ? std::string() : UnreadableError(unreadable);
}

absl::Status RunProgress::CancelChildrenOf(const TaskKey& parent) {
  SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
  return tx->CancelPendingChildLinks(parent, "cancelled: its parent task ended")
      .status();
}

}  // namespace sluice
