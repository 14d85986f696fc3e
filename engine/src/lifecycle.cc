// Engine::CancelRun and Engine::RetryRun: ending a run early, and giving an
// ended one another go (docs/decisions/0018-task-lifecycle-for-jobs.md).
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "run_progress.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "wait_steps.h"
#include "write_batch.h"

namespace sluice {
namespace {

bool Reopens(StepStatus status) {
  return status == StepStatus::kFailed || status == StepStatus::kCancelled;
}

bool Reruns(TaskStatus status) {
  return status == TaskStatus::kFailed || status == TaskStatus::kCancelled;
}

// A map step that failed because its dependency's output was not an array
// never got a task count; rerunning can't change that output.
absl::Status CheckReopenable(const CompiledFlow& flow, const RunId& run_id,
                             const StepStateRecord& st) {
  const CompiledStep& step = flow.step(st.step_index);
  if (step.shape->kind == StepKind::kMap && !st.initial_tasks &&
      st.remaining_deps == 0) {
    return absl::FailedPreconditionError(
        StrCat("run ", run_id.ToString(), ": map step \"", step.shape->slug,
               "\" failed on its dependency's completed output (", st.error,
               "); retrying can't change that output"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Engine::CancelRun(const RunId& run_id, CancelMode mode) {
  SLUICE_RETURN_IF_ERROR(CancelRunOnly(run_id, mode));
  // Its children (if it is one, its parent's link) hear of it now; the
  // sweeper catches up if this fails.
  if (absl::Status s = RelayChildReports().status(); !s.ok()) {
    impl_->Log(LogLevel::kWarning,
               StrCat("cancel: relaying child reports failed (", s.ToString(),
                      "); the sweeper will relay them"));
  }
  return absl::OkStatus();
}

absl::Status Engine::CancelRunOnly(const RunId& run_id, CancelMode mode) {
  if (mode != CancelMode::kRequest && mode != CancelMode::kImmediate) {
    return absl::InvalidArgumentError(StrCat("CancelRun: mode ",
                                             static_cast<int>(mode),
                                             " is not kRequest or kImmediate"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(RunRecord run, LockRun(*tx, run_id));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl_->FlowFor(*tx, run.flow_slug));
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<StepStateRecord>> steps,
      tx->GetStepStates(std::span(&run_id, 1), Fields::kNoPayloads));
  absl::Time now = impl_->Now();
  WriteBatch writes;
  TransactionEffects effects;
  RunProgress progress(
      RunProgress::Context{tx.get(), *flow, now, writes,
                           impl_->wants_events() ? &effects.events : nullptr,
                           &effects.runs},
      std::move(run), std::move(steps[0]), Fields::kNoPayloads);
  SLUICE_RETURN_IF_ERROR(progress.Cancel(mode));
  progress.Finish();
  SLUICE_RETURN_IF_ERROR(writes.Flush(*tx, now, effects));
  return impl_->Commit(*tx, std::move(effects));
}

absl::Status Engine::RetryRun(const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(RunRecord run, LockRun(*tx, run_id));
  if (run.status != RunStatus::kFailed && run.status != RunStatus::kCancelled) {
    return absl::FailedPreconditionError(
        StrCat("run ", run_id.ToString(), " is ", ToString(run.status),
               "; only a failed or cancelled run can be retried"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl_->FlowFor(*tx, run.flow_slug));
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<StepStateRecord>> all_steps,
      tx->GetStepStates(std::span(&run_id, 1), Fields::kNoPayloads));
  std::vector<StepStateRecord>& steps = all_steps[0];
  SLUICE_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks, tx->ListTasks(run_id));
  absl::Time now = impl_->Now();

  // The steps that reopen, and how many of each one's tasks must finish.
  std::vector<int> step_row(flow->step_count(), -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    int index = steps[i].step_index;
    if (index >= 0 && index < flow->step_count()) step_row[index] = i;
  }
  std::vector<int> reset;
  std::vector<int> open_tasks;
  std::vector<int> reset_of_step(flow->step_count(), -1);
  for (int step = 0; step < flow->step_count(); ++step) {
    if (step_row[step] < 0) {
      return absl::InternalError(
          StrCat("run ", run_id.ToString(), " has no state for step ", step));
    }
    const StepStateRecord& st = steps[step_row[step]];
    if (!Reopens(st.status)) continue;
    SLUICE_RETURN_IF_ERROR(CheckReopenable(*flow, run_id, st));
    reset_of_step[step] = static_cast<int>(reset.size());
    reset.push_back(step);
    open_tasks.push_back(0);
  }

  // Failed and cancelled tasks of reopened steps run again with a fresh
  // budget, each with a new message at the back of its priority.
  WriteBatch writes;
  TransactionEffects effects;
  absl::flat_hash_map<std::string, std::vector<size_t>> rerun_by_queue;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskRecord& t = tasks[i];
    int step = t.key.step_index;
    if (step < 0 || step >= flow->step_count() || reset_of_step[step] < 0) {
      continue;
    }
    if (t.status != TaskStatus::kCompleted) ++open_tasks[reset_of_step[step]];
    if (Reruns(t.status)) rerun_by_queue[t.queue_name].push_back(i);
  }
  for (auto& [queue, indexes] : rerun_by_queue) {
    std::vector<OutgoingMessage> messages;
    messages.reserve(indexes.size());
    for (size_t i : indexes) {
      const TaskRecord& t = tasks[i];
      const CompiledStep& step = flow->step(t.key.step_index);
      // A Wait step waits afresh: its timeout counts from now.
      absl::Time visible_at = step.is_wait() ? WaitVisibleAt(step, now) : now;
      messages.push_back(
          OutgoingMessage{.visible_at = visible_at,
                          .priority = run.priority,
                          .task = MessageBody(t, step.shape->slug)});
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                            tx->SendMessages(queue, messages, now));
    if (ids.size() != indexes.size()) {
      return absl::InternalError(StrCat("queue \"", queue, "\" returned ",
                                        ids.size(), " ids for ", indexes.size(),
                                        " messages"));
    }
    for (size_t k = 0; k < indexes.size(); ++k) {
      TaskRecord t = std::move(tasks[indexes[k]]);
      TaskStatus expected = t.status;
      int attempts = t.attempts;
      t.status = TaskStatus::kQueued;
      t.budget_start = t.attempts;  // a fresh budget; the ledger is kept
      t.requeued_count = 0;         // and a fresh stall budget
      t.cancel_requested = false;
      t.output = Json();
      t.error.clear();
      t.started_at.reset();
      t.finished_at.reset();
      t.stall_at.reset();
      t.message_id = ids[k];
      writes.UpdateTask(TaskUpdate{std::move(t), expected, attempts});
    }
    effects.queues_to_wake.insert(queue);
  }

  RunProgress progress(
      RunProgress::Context{tx.get(), *flow, now, writes,
                           impl_->wants_events() ? &effects.events : nullptr,
                           &effects.runs},
      std::move(run), std::move(steps), Fields::kNoPayloads);
  SLUICE_RETURN_IF_ERROR(progress.Reopen(reset, open_tasks));
  progress.Finish();
  SLUICE_RETURN_IF_ERROR(writes.Flush(*tx, now, effects));
  return impl_->Commit(*tx, std::move(effects));
}

}  // namespace sluice
