#include "run_progress.h"

#include "absl/container/inlined_vector.h"
#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "fan_out_internal.h"
#include "run_options.h"
#include "sluice/internal/implicit_steps.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/internal/writes_keep_outputs.h"
#include "wait_steps.h"

namespace sluice {
namespace {

bool ConditionMet(const StepSpec& spec, const Json& input) {
  if (spec.if_pattern && !JsonContains(input, *spec.if_pattern)) return false;
  if (spec.if_not_pattern && JsonContains(input, *spec.if_not_pattern)) {
    return false;
  }
  return true;
}

bool HasCondition(const StepSpec& spec) {
  return spec.if_pattern.has_value() || spec.if_not_pattern.has_value();
}

// The run status a run event reports (kStarted for a new run).
RunStatus RunStatusOf(EventKind kind) {
  switch (kind) {
    case EventKind::kRunCompleted:
      return RunStatus::kCompleted;
    case EventKind::kRunFailed:
      return RunStatus::kFailed;
    case EventKind::kRunCancelled:
      return RunStatus::kCancelled;
    default:
      return RunStatus::kStarted;
  }
}

}  // namespace

RunProgress RunProgress::ForNewRun(Context context, RunId run_id, Json input,
                                   NewRunSettings settings) {
  const CompiledFlow& flow = context.flow;
  RunRecord run;
  run.run_id = run_id;
  run.flow_slug = flow.slug();
  run.status = RunStatus::kStarted;
  run.remaining_steps = flow.step_count();
  run.started_at = settings.started_at.value_or(context.now);
  run.priority = settings.priority;
  run.external_key = std::move(settings.external_key);
  run.metadata = std::move(settings.metadata);
  run.options = std::move(settings.options);
  std::vector<StepStateRecord> steps(flow.step_count());
  for (const CompiledStep& step : flow.steps()) {
    StepStateRecord& s = steps[step.index];
    s.run_id = run_id;
    s.step_index = step.index;
    s.step_slug = step.shape->slug;
    s.remaining_deps = static_cast<int>(step.dependencies.size());
    if (step.is_root_map) {
      const Json& given =
          settings.lasting_input ? *settings.lasting_input : input;
      s.initial_tasks = static_cast<int>(given.as_array().size());
    } else if (step.shape->kind != StepKind::kMap) {
      s.initial_tasks = 1;
    }
  }
  run.input = std::move(input);
  RunProgress progress(context, std::move(run), std::move(steps),
                       /*fresh=*/true, /*payloads_loaded=*/true);
  progress.not_before_ = settings.not_before;
  progress.lasting_input_ = settings.lasting_input;
  progress.implicit_ = internal::HasImplicitStep(flow.shape());
  progress.Emit(EventKind::kRunStarted, -1, &progress.input());
  return progress;
}

absl::StatusOr<Transaction*> RunProgress::Store() const {
  if (ctx_.tx != nullptr) return ctx_.tx;
  return absl::FailedPreconditionError(
      StrCat("run ", run_.run_id.ToString(),
             ": planned before its transaction, but needs to read the store"));
}

RunProgress::RunProgress(Context context, RunRecord&& run,
                         std::vector<StepStateRecord>&& steps, Fields fields)
    : RunProgress(context, std::move(run), std::move(steps), /*fresh=*/false,
                  fields == Fields::kAll) {}

RunProgress::RunProgress(Context context, RunRecord&& run,
                         std::vector<StepStateRecord>&& steps, bool fresh,
                         bool payloads_loaded)
    : ctx_(context),
      run_(std::move(run)),
      steps_(std::move(steps)),
      dirty_(steps_.size(), false),
      fresh_(fresh),
      ended_at_start_(IsTerminal(run_.status)),
      payloads_loaded_(payloads_loaded),
      new_tasks_(steps_.size()),
      new_maps_(steps_.size()) {
  if (!fresh_ && steps_.empty() && internal::HasImplicitStep(flow().shape())) {
    // Not stored while the run's row says it (implicit_steps.h). A run in
    // any other state must have its step state stored; without it the
    // run is unreadable and fails.
    implicit_ = true;
    std::optional<StepStateRecord> derived =
        internal::ImplicitStepState(flow().shape(), run_);
    if (!derived) {
      derived.emplace();
      derived->step_slug = flow().step(0).shape->slug;
      derived->unreadable = "the step's state is not stored";
    }
    steps_.push_back(*std::move(derived));
    dirty_.assign(1, false);
    new_tasks_.resize(1);
    new_maps_.resize(1);
  }
  // A step state's own copy of the run id may not have decoded; it is this
  // run's either way, and writes need it.
  for (StepStateRecord& s : steps_) s.run_id = run_.run_id;
  if (!fresh_) {
    step_deltas_.resize(steps_.size());
    for (size_t i = 0; i < steps_.size(); ++i) {
      step_deltas_[i].step = StepRef{run_.run_id, static_cast<int>(i)};
    }
  }
}

void RunProgress::Emit(EventKind kind, int step, const Json* value,
                       std::string_view error, SkipReason reason) {
  if (ctx_.runs != nullptr && step < 0) {
    ctx_.runs->Add(run_.flow_slug, RunStatusOf(kind));
  }
  if (ctx_.events == nullptr) return;
  Event e;
  e.kind = kind;
  e.run_id = run_.run_id;
  e.flow_slug = run_.flow_slug;
  if (step >= 0) e.step_slug = ctx_.flow.step(step).shape->slug;
  if (value != nullptr) e.value = *value;
  e.error = std::string(error);
  e.skip_reason = reason;
  e.at = ctx_.now;
  ctx_.events->push_back(std::move(e));
}

void RunProgress::AddRemainingTasks(int step, int delta) {
  StepStateRecord& s = state(step);
  s.remaining_tasks = s.remaining_tasks.value_or(0) + delta;
  if (!fresh_) step_deltas_[step].remaining_tasks += delta;
}

void RunProgress::AddRemainingDeps(int step, int delta) {
  state(step).remaining_deps += delta;
  if (!fresh_) step_deltas_[step].remaining_deps += delta;
}

void RunProgress::AddRemainingSteps(int delta) {
  run_.remaining_steps += delta;
  if (!fresh_) remaining_steps_delta_ += delta;
}

absl::StatusOr<Json> RunProgress::StepInput(int step) {
  SLUICE_RETURN_IF_ERROR(LoadPayloads());
  boost::json::object input;
  const CompiledStep& s = ctx_.flow.step(step);
  input.reserve(1 + s.dependencies.size());
  input.emplace("run", this->input());
  for (int dep : s.dependencies) {
    const StepStateRecord& d = steps_[dep];
    if (d.status == StepStatus::kCompleted && d.output.has_value()) {
      input.emplace(ctx_.flow.step(dep).shape->slug, *d.output);
    }
  }
  return input;
}

absl::Status RunProgress::Advance() {
  for (int i = 0;
       i < ctx_.flow.step_count() && !ended() && !run_.cancel_requested; ++i) {
    const StepStateRecord& s = state(i);
    if (s.status == StepStatus::kCreated && s.remaining_deps == 0) {
      SLUICE_RETURN_IF_ERROR(ResolveReadyStep(i));
    }
  }
  SLUICE_RETURN_IF_ERROR(MaybeCompleteRun());
  if (!ended() && run_.cancel_requested) return SettleCancelRequest();
  return absl::OkStatus();
}

bool RunProgress::StepReadsInput(int step) const {
  const StepShape& shape = *ctx_.flow.step(step).shape;
  return HasCondition(shape.spec) || shape.kind != StepKind::kMap;
}

absl::Status RunProgress::ResolveReadyStep(int step) {
  const CompiledStep& s = ctx_.flow.step(step);
  const StepSpec& spec = s.shape->spec;
  Json input;
  if (StepReadsInput(step)) {
    SLUICE_RETURN_IF_ERROR(LoadPayloads());
    if (!unreadable_payloads_.empty()) {
      return FailStep(step, unreadable_payloads_);
    }
    SLUICE_ASSIGN_OR_RETURN(input, StepInput(step));
  }
  if (HasCondition(spec) && !ConditionMet(spec, input)) {
    switch (spec.when_unmet) {
      case Policy::kFail:
        return FailStep(step, "Condition not met");
      case Policy::kSkip:
        return SkipStep(step, SkipReason::kConditionUnmet, "");
      case Policy::kSkipCascade:
        return SkipCascade(step, SkipReason::kConditionUnmet, "");
    }
  }
  std::optional<int> tasks = state(step).initial_tasks;
  if (!tasks.has_value()) {
    return absl::InternalError(
        StrCat("run ", run_.run_id.ToString(), ": map step \"", s.shape->slug,
               "\" is ready but its task count is unknown"));
  }
  if (*tasks == 0) return CompleteStep(step, boost::json::array());
  return StartStep(step, std::move(input));
}

absl::Status RunProgress::StartStep(int step, Json input) {
  const CompiledStep& s = ctx_.flow.step(step);
  StepStateRecord& st = state(step);
  st.status = StepStatus::kStarted;
  st.started_at = ctx_.now;
  AddRemainingTasks(step, *st.initial_tasks - st.remaining_tasks.value_or(0));
  MarkDirty(step);
  Emit(EventKind::kStepStarted, step);

  if (!task_options_) task_options_ = TaskOptionsOfRun(run_.options);
  // Only a new run's first tasks wait for its delay: later steps start
  // after those ran.
  absl::Time visible_at = ctx_.now;
  if (fresh_ && not_before_ && *not_before_ > visible_at) {
    visible_at = *not_before_;
  }
  visible_at += s.start_delay;
  if (s.is_wait()) visible_at = WaitVisibleAt(s, visible_at);
  TaskRecord task;
  task.key = TaskKey{run_.run_id, step, 0};
  task.flow_slug = run_.flow_slug;
  task.queue_name = s.shape->queue_name;
  task.queued_at = ctx_.now;
  task.options = *task_options_;
  if (s.shape->kind != StepKind::kMap) {
    task.input = std::move(input);
    TaskMessageBody body = MessageBody(task, s.shape->slug);
    new_tasks_[step].push_back(ctx_.writes.CreateTask(
        std::move(task), std::move(body), visible_at, run_.priority));
    if (s.is_wait() && st.output.has_value()) return DeliverHeldSignal(step);
    return absl::OkStatus();
  }
  std::shared_ptr<const Json> elements;
  if (s.is_root_map && lasting_input_ != nullptr) {
    elements = std::shared_ptr<const Json>(std::shared_ptr<const Json>(),
                                           lasting_input_);  // not owned
  } else {
    elements = std::make_shared<const Json>(
        s.is_root_map ? this->input() : *state(s.dependencies.front()).output);
  }
  new_maps_[step] = ctx_.writes.CreateMapTasks({.prototype = std::move(task),
                                                .elements = std::move(elements),
                                                .step_slug = s.shape->slug,
                                                .visible_at = visible_at,
                                                .priority = run_.priority});
  return absl::OkStatus();
}

// A signal reached the Wait step `step` before it started (Engine::Signal
// held it in the step's output): the task just created completes with it,
// and so does the step, in this transaction.
absl::Status RunProgress::DeliverHeldSignal(int step) {
  Json payload = *state(step).output;
  size_t handle = new_tasks_[step].back();
  new_tasks_[step].clear();  // ended here: nothing left to end
  TaskRecord& task = ctx_.writes.NewTask(handle);
  WaitEnd end = EndWait(task, ctx_.flow.step(step), payload,
                        /*worker_id=*/"", ctx_.now);
  task = std::move(end.update.task);
  ctx_.writes.EndNewTask(handle, TaskStatus::kCompleted, ctx_.now);
  ctx_.writes.AppendAttempt(std::move(end.attempt));
  return CompleteStep(step, std::move(payload));
}

absl::Status RunProgress::CompleteStep(int step, Json output) {
  StepStateRecord& st = state(step);
  st.status = StepStatus::kCompleted;
  if (!st.started_at) st.started_at = ctx_.now;
  st.finished_at = ctx_.now;
  if (st.remaining_tasks.value_or(0) != 0) {
    AddRemainingTasks(step, -*st.remaining_tasks);
  }
  st.output = std::move(output);
  MarkDirty(step);
  Emit(EventKind::kStepCompleted, step, &*st.output);
  AddRemainingSteps(-1);
  return ReleaseDependents(step);
}

absl::Status RunProgress::ReleaseDependents(int step) {
  const StepStateRecord& parent = state(step);
  for (int d : ctx_.flow.step(step).dependents) {
    AddRemainingDeps(d, -1);
    StepStateRecord& child = state(d);
    bool is_map = ctx_.flow.step(d).shape->kind == StepKind::kMap;
    if (!is_map || child.initial_tasks.has_value()) continue;
    MarkDirty(d);
    if (parent.status != StepStatus::kCompleted) {
      child.initial_tasks = 0;  // a skipped source maps over nothing
      continue;
    }
    if (!parent.output.has_value() || !parent.output->is_array()) {
      std::string type =
          parent.output ? std::string(JsonTypeName(*parent.output)) : "nothing";
      return FailStep(d, StrCat("[TYPE_VIOLATION] Map step \"", child.step_slug,
                                "\" expects array input but dependency \"",
                                parent.step_slug, "\" produced ", type));
    }
    child.initial_tasks = static_cast<int>(parent.output->as_array().size());
  }
  return absl::OkStatus();
}

absl::Status RunProgress::SkipStep(int step, SkipReason reason,
                                   const std::string& error) {
  StepStateRecord& st = state(step);
  if (IsTerminal(st.status)) return absl::OkStatus();
  st.status = StepStatus::kSkipped;
  st.skip_reason = reason;
  st.error = error;
  st.finished_at = ctx_.now;
  st.output.reset();  // a signal held for it is dropped
  MarkDirty(step);
  Emit(EventKind::kStepSkipped, step, nullptr, error, reason);
  SLUICE_RETURN_IF_ERROR(EndUnfinishedTasks(step, TaskStatus::kSkipped));
  AddRemainingSteps(-1);
  return ReleaseDependents(step);
}

absl::Status RunProgress::SkipCascade(int step, SkipReason reason,
                                      const std::string& error) {
  std::vector<bool> in_cascade(steps_.size(), false);
  in_cascade[step] = true;
  int skipped = 0;
  // Definition order is topological: a step joins when any dependency did.
  for (int i = step; i < ctx_.flow.step_count(); ++i) {
    if (i != step) {
      for (int dep : ctx_.flow.step(i).dependencies) {
        if (in_cascade[dep]) in_cascade[i] = true;
      }
    }
    if (!in_cascade[i] || IsTerminal(state(i).status)) continue;
    StepStateRecord& st = state(i);
    bool trigger = i == step;
    st.status = StepStatus::kSkipped;
    st.skip_reason = trigger ? reason : SkipReason::kDependencySkipped;
    st.error = trigger ? error : "";
    st.finished_at = ctx_.now;
    st.output.reset();  // a signal held for it is dropped
    MarkDirty(i);
    Emit(EventKind::kStepSkipped, i, nullptr, st.error, st.skip_reason);
    SLUICE_RETURN_IF_ERROR(EndUnfinishedTasks(i, TaskStatus::kSkipped));
    ++skipped;
  }
  AddRemainingSteps(-skipped);
  return absl::OkStatus();
}

bool RunProgress::LeafOutputIsStored() const {
  for (const CompiledStep& step : ctx_.flow.steps()) {
    const StepStateRecord& st = steps_[step.index];
    if (step.is_leaf && st.status == StepStatus::kCompleted &&
        !st.output.has_value()) {
      return true;
    }
  }
  return false;
}

absl::Status RunProgress::MaybeCompleteRun() {
  if (ended() || run_.remaining_steps != 0) return absl::OkStatus();
  if (LeafOutputIsStored()) SLUICE_RETURN_IF_ERROR(LoadPayloads());
  if (!unreadable_payloads_.empty()) {
    return EndRun(RunStatus::kFailed, unreadable_payloads_);
  }
  boost::json::object output;
  for (const CompiledStep& step : ctx_.flow.steps()) {
    StepStateRecord& st = state(step.index);
    if (!step.is_leaf || st.status != StepStatus::kCompleted) continue;
    // Moved, not copied, where the step state needs it no more (it is not
    // written) or gets it back for its write (Finish,
    // WriteBatch::LendOutput) from a backend that leaves it in place.
    const bool written = fresh_ || dirty_[step.index];
    // An implicit step is written only where the run's row does not say
    // it, which is rare: its output moves, and Finish copies it back then.
    const bool lend = !fresh_ && !implicit_ && dirty_[step.index] &&
                      dynamic_cast<internal::WritesKeepOutputs*>(ctx_.tx);
    if (!st.output.has_value() || (written && !lend && !implicit_)) {
      output.emplace(step.shape->slug, st.output.value_or(Json()));
      continue;
    }
    output.emplace(step.shape->slug, std::move(*st.output));
    if (lend) lent_outputs_.push_back(step.index);
    if (implicit_) implicit_output_moved_ = true;
  }
  run_.status = RunStatus::kCompleted;
  run_.output = Json(std::move(output));
  run_.finished_at = ctx_.now;
  run_dirty_ = true;
  Emit(EventKind::kRunCompleted, -1, &*run_.output);
  return absl::OkStatus();
}

bool RunProgress::WouldComplete(int step, int count) const {
  const StepStateRecord& st = steps_[step];
  return !ended() && st.status == StepStatus::kStarted &&
         st.remaining_tasks.value_or(0) - count <= 0;
}

absl::Status RunProgress::CompleteTasks(int step, int count,
                                        std::optional<StepOutputs> outputs) {
  if (ended() || state(step).status != StepStatus::kStarted) {
    return absl::OkStatus();
  }
  AddRemainingTasks(step, -count);
  int remaining = *state(step).remaining_tasks;
  if (remaining > 0) return absl::OkStatus();
  if (remaining < 0) {
    return absl::InternalError(StrCat(
        "run ", run_.run_id.ToString(), ": step \"", state(step).step_slug,
        "\" counted ", -remaining, " more completions than it has tasks"));
  }
  if (!outputs) {
    StepRef ref{run_.run_id, step};
    SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
    SLUICE_ASSIGN_OR_RETURN(std::vector<StepOutputs> got,
                            tx->GetTaskOutputs(std::span(&ref, 1)));
    outputs = std::move(got[0]);
  }
  if (!outputs->unreadable.empty()) {
    return FailStep(step, UnreadableError(StrCat(
                              "step \"", ctx_.flow.step(step).shape->slug,
                              "\": ", outputs->unreadable)));
  }
  std::vector<std::optional<Json>>& values = outputs->outputs;
  if (ctx_.flow.step(step).shape->kind != StepKind::kMap) {
    Json output =
        values.empty() ? Json() : std::move(values[0]).value_or(Json());
    return CompleteStep(step, std::move(output));
  }
  boost::json::array aggregated;
  aggregated.reserve(values.size());
  for (std::optional<Json>& o : values) {
    aggregated.push_back(o ? std::move(*o) : Json());
  }
  return CompleteStep(step, std::move(aggregated));
}

void RunProgress::Finish() {
  if (!ended_at_start_ && ended()) {
    // The outbox invariant: a child run's end and its report to its parent
    // commit together, whichever path ended it.
    if (std::optional<ChildReport> report =
            ChildReportFor(run_, ctx_.flow, ctx_.now)) {
      ctx_.writes.AppendChildReport(*std::move(report));
    }
  }
  // An implicit step's state is written only when the run's row no longer
  // says it; then it is inserted, being stored nowhere yet.
  const bool store_implicit =
      implicit_ && !internal::IsImplicit(steps_[0], flow().shape(), run_);
  if (store_implicit && implicit_output_moved_) {
    steps_[0].output = run_.output->as_object().at(flow().step(0).shape->slug);
  }
  if (fresh_) {
    ctx_.writes.InsertRun(std::move(run_), lasting_input_);
    if (implicit_ && !store_implicit) return;
    for (StepStateRecord& s : steps_) ctx_.writes.InsertStepState(std::move(s));
    return;
  }
  absl::InlinedVector<WriteBatch::Slot, 4> step_slots(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (implicit_) {  // its counters have no row to move
      if (store_implicit) ctx_.writes.InsertStepState(std::move(steps_[i]));
      continue;
    }
    const StepCounterDelta& d = step_deltas_[i];
    const bool moved = d.remaining_tasks != 0 || d.remaining_deps != 0;
    const StepCounters expected{steps_[i].remaining_tasks.value_or(0),
                                steps_[i].remaining_deps};
    if (moved && dirty_[i]) {
      step_slots[i] = ctx_.writes.UpdateStepStateAndCounters(
          std::move(steps_[i]), d, expected);
    } else if (moved) {
      ctx_.writes.AddStepCounters(d, expected);
    } else if (dirty_[i]) {
      step_slots[i] = ctx_.writes.UpdateStepState(std::move(steps_[i]));
    }
  }
  const RunCounterDelta run_delta{run_.run_id, remaining_steps_delta_};
  const int expected_steps = run_.remaining_steps;
  WriteBatch::Slot run_slot;
  if (remaining_steps_delta_ != 0 && run_dirty_) {
    run_slot = ctx_.writes.UpdateRunAndCounter(std::move(run_), run_delta,
                                               expected_steps);
  } else if (remaining_steps_delta_ != 0) {
    ctx_.writes.AddRunRemainingSteps(run_delta, expected_steps);
  } else if (run_dirty_) {
    run_slot = ctx_.writes.UpdateRun(std::move(run_));
  }
  // MaybeCompleteRun set run_dirty_ when it lent anything.
  for (int step : lent_outputs_) {
    ctx_.writes.LendOutput(step_slots[step], run_slot,
                           ctx_.flow.step(step).shape->slug);
  }
}

}  // namespace sluice
