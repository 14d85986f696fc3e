// Engine::Signal: the external event a Wait step waits for
// (docs/decisions/0030-signals.md).
//
// One transaction locks the run, then reads the step and its task: a queued
// task completes with the payload (message deleted, ledger entry, outbox
// report), exactly as a handler's completion would, and the report is then
// applied on the push path so that dependents start; the sweeper applies it
// if that fails. A step not started yet holds the payload in its state's
// output until it starts.
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "wait_steps.h"

namespace sluice {
namespace {

absl::Status ValidateSignal(const RunId& run_id, std::string_view step,
                            const Json& payload, size_t max_payload_bytes) {
  if (run_id.IsNil()) {
    return absl::InvalidArgumentError("Signal: the run id is nil");
  }
  SLUICE_RETURN_IF_ERROR(ValidateSlug(step, "Signal: step"));
  return CheckJsonPayload(payload, "Signal: payload", max_payload_bytes);
}

// The one Wait step `slug` of `flow`, or why the signal can't go there.
absl::StatusOr<const CompiledStep*> WaitStepOf(const CompiledFlow& flow,
                                               std::string_view slug,
                                               const Json& payload) {
  int index = flow.shape().StepIndex(slug);
  if (index < 0) {
    return absl::NotFoundError(StrCat("Signal: flow \"", flow.slug(),
                                      "\" has no step \"", slug, "\""));
  }
  const CompiledStep& step = flow.step(index);
  if (!step.is_wait()) {
    return absl::InvalidArgumentError(
        StrCat("Signal: step \"", slug, "\" of flow \"", flow.slug(),
               "\" is a ", ToString(step.shape->kind),
               " step, not a Wait step; only Wait steps take signals"));
  }
  if (step.feeds_map && !payload.is_array()) {
    return absl::InvalidArgumentError(
        StrCat("Signal: Wait step \"", slug, "\" of flow \"", flow.slug(),
               "\" feeds a map step, so its payload must be a JSON array, not ",
               JsonTypeName(payload)));
  }
  return &step;
}

std::string Where(const RunId& run_id, const CompiledStep& step) {
  return StrCat("Wait step \"", step.shape->slug, "\" of run ",
                run_id.ToString());
}

// What a signal to a Wait step whose task already ended means: a repeat of
// the signal that ended it (OK), or a wait that ended another way.
absl::StatusOr<SignalOutcome> AlreadyEnded(const RunId& run_id,
                                           const CompiledStep& step,
                                           const TaskRecord& task) {
  if (task.status == TaskStatus::kCompleted && task.error.empty()) {
    return SignalOutcome::kAlreadySignalled;
  }
  std::string how = task.error.empty() ? StrCat("is ", ToString(task.status))
                                       : StrCat("ended ", ToString(task.status),
                                                " (", task.error, ")");
  return absl::FailedPreconditionError(StrCat("Signal: ", Where(run_id, step),
                                              " ", how,
                                              "; the signal changed nothing"));
}

// A signal for a step that has not started: held in its state's output
// (which a step gets only when it completes), unless one is held already.
absl::StatusOr<SignalOutcome> HoldSignal(Transaction& tx, const RunId& run_id,
                                         const CompiledStep& step,
                                         const Json& payload) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<StepStateRecord>> states,
      tx.GetStepStates(std::span(&run_id, 1), Fields::kAll));
  for (StepStateRecord& state : states[0]) {
    if (state.step_index != step.index) continue;
    if (!state.unreadable.empty()) {
      return absl::FailedPreconditionError(
          StrCat("Signal: ", Where(run_id, step), ": ",
                 UnreadableError(state.unreadable)));
    }
    if (state.output.has_value()) return SignalOutcome::kAlreadySignalled;
    state.run_id = run_id;
    state.output = payload;
    SLUICE_RETURN_IF_ERROR(tx.UpdateStepStates(std::span(&state, 1)));
    return SignalOutcome::kHeld;
  }
  return absl::InternalError(
      StrCat("Signal: ", Where(run_id, step), " has no state"));
}

}  // namespace

std::string_view ToString(SignalOutcome outcome) {
  switch (outcome) {
    case SignalOutcome::kDelivered:
      return "delivered";
    case SignalOutcome::kHeld:
      return "held";
    case SignalOutcome::kAlreadySignalled:
      return "already_signalled";
  }
  return "unknown";
}

absl::StatusOr<SignalOutcome> Engine::Signal(const RunId& run_id,
                                             std::string_view step_slug,
                                             const Json& payload) {
  SLUICE_RETURN_IF_ERROR(ValidateSignal(run_id, step_slug, payload,
                                        impl_->options().max_payload_bytes));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(RunRecord run, LockRun(*tx, run_id, "Signal: "));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl_->FlowFor(*tx, run.flow_slug));
  SLUICE_ASSIGN_OR_RETURN(const CompiledStep* step,
                          WaitStepOf(*flow, step_slug, payload));
  if (IsTerminal(run.status) || run.cancel_requested) {
    return absl::FailedPreconditionError(
        StrCat("Signal: run ", run_id.ToString(),
               IsTerminal(run.status)
                   ? StrCat(" already ended (", ToString(run.status), ")")
                   : std::string(" is being cancelled"),
               "; the signal to step \"", step_slug, "\" changed nothing"));
  }
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<StepStateRecord>> states,
      tx->GetStepStates(std::span(&run_id, 1), Fields::kNoPayloads));
  const StepStateRecord* state = nullptr;
  for (const StepStateRecord& s : states[0]) {
    if (s.step_index == step->index) state = &s;
  }
  if (state == nullptr) {
    return absl::InternalError(StrCat("Signal: run ", run_id.ToString(),
                                      " has no state for step \"", step_slug,
                                      "\""));
  }
  absl::Time now = impl_->Now();
  if (state->status == StepStatus::kCreated) {
    SLUICE_ASSIGN_OR_RETURN(SignalOutcome held,
                            HoldSignal(*tx, run_id, *step, payload));
    if (held == SignalOutcome::kHeld) {
      SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
    }
    return held;
  }

  TaskKey key{run_id, step->index, 0};
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<TaskRecord>> tasks,
      tx->GetTasks(std::span(&key, 1), Fields::kNoPayloads));
  if (tasks.empty() || !tasks[0]) {
    return absl::FailedPreconditionError(StrCat(
        "Signal: ", Where(run_id, *step), " is ", ToString(state->status),
        " and has no task; the signal changed nothing"));
  }
  const TaskRecord& task = *tasks[0];
  if (task.status != TaskStatus::kQueued) {
    return AlreadyEnded(run_id, *step, task);
  }
  WaitEnd end = EndWait(task, *step, payload, /*worker_id=*/"", now);
  std::vector<TaskUpdate> updates{std::move(end.update)};
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx->UpdateTasks(updates));
  if (!applied[0]) {
    return absl::AbortedError(
        StrCat("Signal: ", Where(run_id, *step),
               " changed while it was signalled (its timeout fired); retry to "
               "see how it ended"));
  }
  const TaskRecord& ended = updates[0].task;
  int64_t message_id = ended.message_id;
  // Completed: its message is deleted, as a handler's completion's is.
  SLUICE_RETURN_IF_ERROR(
      tx->DeleteMessages(ended.queue_name, std::span(&message_id, 1)));
  SLUICE_RETURN_IF_ERROR(tx->AppendAttempts(std::span(&end.attempt, 1)));
  OutboxReport report{.task = ended.key,
                      .flow_slug = ended.flow_slug,
                      .kind = ReportKind::kCompleted,
                      .created_at = now};
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> report_ids,
                          tx->AppendReports(std::span(&report, 1)));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  // The push path; the reconcile path catches it if this fails.
  if (absl::Status s = ApplyReports(report_ids); !s.ok()) {
    impl_->Log(
        LogLevel::kWarning,
        StrCat("Signal: applying the report of ", Where(run_id, *step),
               " failed (", s.ToString(), "); the sweeper will apply it"));
  }
  return SignalOutcome::kDelivered;
}

}  // namespace sluice
