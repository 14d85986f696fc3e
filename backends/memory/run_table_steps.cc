// RunTable's step states and task lists.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "counter.h"
#include "run_table.h"
#include "sluice/internal/strings.h"
#include "stored_copy.h"

namespace sluice::memory {
namespace {

std::string DescribeStep(const RunId& run_id, int step_index) {
  return StrCat("step state (run ", run_id.ToString(), ", step ", step_index,
                ")");
}

template <typename Step>
bool StepIndexLess(const Step& step, int step_index) {
  return step.step_index < step_index;
}

bool TaskIndexLess(const TaskRecord* task, int task_index) {
  return task->key.task_index < task_index;
}

StepStateRecord CopyOf(const StepStateRecord& state, Fields fields) {
  if (fields == Fields::kAll) return state;
  return StepStateRecord{.run_id = state.run_id,
                         .step_index = state.step_index,
                         .step_slug = state.step_slug,
                         .status = state.status,
                         .remaining_deps = state.remaining_deps,
                         .initial_tasks = state.initial_tasks,
                         .remaining_tasks = state.remaining_tasks,
                         .error = state.error,
                         .skip_reason = state.skip_reason,
                         .started_at = state.started_at,
                         .finished_at = state.finished_at};
}

}  // namespace

absl::Status RunTable::InsertStepStates(std::span<StepStateRecord> states,
                                        UndoLog& undo) {
  RunEntry* entry = nullptr;  // a batch's states usually share a run
  for (StepStateRecord& state : states) {
    if (entry == nullptr || entry->run.run_id != state.run_id) {
      entry = FindEntry(state.run_id);
    }
    if (entry == nullptr) {
      return absl::NotFoundError(
          StrCat(DescribeStep(state.run_id, state.step_index),
                 " belongs to no run: insert the run first"));
    }
    StepEntry& step = FindOrAddStep(*entry, state.step_index);
    if (step.state.has_value()) {
      return absl::AlreadyExistsError(StrCat(
          DescribeStep(state.run_id, state.step_index), " already exists"));
    }
    undo.Add(undo::StepStateInserted{.run_id = state.run_id,
                                     .step_index = state.step_index});
    step.state.emplace(Stored(std::move(state)));
  }
  return absl::OkStatus();
}

std::vector<std::vector<StepStateRecord>> RunTable::GetStepStates(
    std::span<const RunId> run_ids, Fields fields) const {
  std::vector<std::vector<StepStateRecord>> states(run_ids.size());
  for (size_t i = 0; i < run_ids.size(); ++i) {
    const RunEntry* entry = FindEntry(run_ids[i]);
    if (entry == nullptr) continue;
    states[i].reserve(entry->steps.size());
    for (const StepEntry& step : entry->steps) {
      if (step.state.has_value()) {
        states[i].push_back(CopyOf(*step.state, fields));
      }
    }
  }
  return states;
}

absl::Status RunTable::UpdateStepStates(std::span<StepStateRecord> states,
                                        UndoLog& undo) {
  for (StepStateRecord& state : states) {
    StepStateRecord* stored = FindStepState(state.run_id, state.step_index);
    if (stored == nullptr) {
      return absl::NotFoundError(StrCat(
          DescribeStep(state.run_id, state.step_index), " does not exist"));
    }
    undo.Add(undo::StepStateUpdated{.run_id = state.run_id,
                                    .step_index = state.step_index},
             SavedStepFields{.status = stored->status,
                             .initial_tasks = stored->initial_tasks,
                             .output = std::move(stored->output),
                             .error = std::move(stored->error),
                             .skip_reason = stored->skip_reason,
                             .started_at = stored->started_at,
                             .finished_at = stored->finished_at});
    stored->status = state.status;
    stored->initial_tasks = state.initial_tasks;
    stored->output = Stored(std::move(state.output));
    stored->error = std::move(state.error);
    stored->skip_reason = state.skip_reason;
    stored->started_at = state.started_at;
    stored->finished_at = state.finished_at;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepCounters>> RunTable::AddStepCounters(
    std::span<const StepCounterDelta> deltas, UndoLog& undo) {
  std::vector<StepCounters> values;
  values.reserve(deltas.size());
  for (const StepCounterDelta& delta : deltas) {
    const StepRef& ref = delta.step;
    StepStateRecord* stored = FindStepState(ref.run_id, ref.step_index);
    if (stored == nullptr) {
      return absl::NotFoundError(
          StrCat(DescribeStep(ref.run_id, ref.step_index), " does not exist"));
    }
    // An unset remaining_tasks counts as 0, as SQL's coalesce would.
    const int tasks_before = stored->remaining_tasks.value_or(0);
    const std::optional<int> tasks =
        CheckedAdd(tasks_before, delta.remaining_tasks);
    if (!tasks.has_value()) {
      return CounterOverflow(StrCat("remaining_tasks of ",
                                    DescribeStep(ref.run_id, ref.step_index)),
                             tasks_before, delta.remaining_tasks);
    }
    const std::optional<int> deps =
        CheckedAdd(stored->remaining_deps, delta.remaining_deps);
    if (!deps.has_value()) {
      return CounterOverflow(StrCat("remaining_deps of ",
                                    DescribeStep(ref.run_id, ref.step_index)),
                             stored->remaining_deps, delta.remaining_deps);
    }
    if (stored->remaining_tasks != tasks || stored->remaining_deps != *deps) {
      undo.Add(
          undo::StepCountersAdded{.run_id = ref.run_id,
                                  .step_index = ref.step_index,
                                  .remaining_tasks = stored->remaining_tasks,
                                  .remaining_deps = stored->remaining_deps});
      stored->remaining_tasks = tasks;
      stored->remaining_deps = *deps;
    }
    values.push_back({.remaining_tasks = *tasks, .remaining_deps = *deps});
  }
  return values;
}

std::optional<uint64_t> RunTable::SequenceOf(const RunId& run_id) const {
  const RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return std::nullopt;
  return entry->sequence;
}

void RunTable::AddTask(const TaskRecord& task) {
  StepEntry& step =
      FindOrAddStep(*FindEntry(task.key.run_id), task.key.step_index);
  // A step's tasks are created in index order, so this is usually an append.
  auto at = step.tasks.empty() ||
                    step.tasks.back()->key.task_index < task.key.task_index
                ? step.tasks.end()
                : std::lower_bound(step.tasks.begin(), step.tasks.end(),
                                   task.key.task_index, TaskIndexLess);
  step.tasks.insert(at, &task);
}

void RunTable::RemoveTask(const TaskRecord& task) {
  RunEntry& entry = *FindEntry(task.key.run_id);
  StepEntry& step = *FindStep(entry, task.key.step_index);
  step.tasks.erase(std::lower_bound(step.tasks.begin(), step.tasks.end(),
                                    task.key.task_index, TaskIndexLess));
  DropStepIfEmpty(entry, task.key.step_index);
}

void RunTable::UndoInsertStepState(const RunId& run_id, int step_index) {
  RunEntry& entry = *FindEntry(run_id);
  FindStep(entry, step_index)->state.reset();
  DropStepIfEmpty(entry, step_index);
}

void RunTable::UndoUpdateStepState(const RunId& run_id, int step_index,
                                   SavedStepFields saved) {
  StepStateRecord& stored = *FindStepState(run_id, step_index);
  stored.status = saved.status;
  stored.initial_tasks = saved.initial_tasks;
  stored.output = std::move(saved.output);
  stored.error = std::move(saved.error);
  stored.skip_reason = saved.skip_reason;
  stored.started_at = saved.started_at;
  stored.finished_at = saved.finished_at;
}

void RunTable::UndoAddStepCounters(
    const undo::StepCountersAdded& old_counters) {
  StepStateRecord& stored =
      *FindStepState(old_counters.run_id, old_counters.step_index);
  stored.remaining_tasks = old_counters.remaining_tasks;
  stored.remaining_deps = old_counters.remaining_deps;
}

StepEntry* RunTable::FindStep(RunEntry& entry, int step_index) {
  auto& steps = entry.steps;
  // Step indexes are normally 0..n-1: try the direct slot first.
  if (step_index >= 0 && static_cast<size_t>(step_index) < steps.size() &&
      steps[step_index].step_index == step_index) {
    return &steps[step_index];
  }
  auto at = std::lower_bound(steps.begin(), steps.end(), step_index,
                             StepIndexLess<StepEntry>);
  return at == steps.end() || at->step_index != step_index ? nullptr : &*at;
}

StepEntry& RunTable::FindOrAddStep(RunEntry& entry, int step_index) {
  if (StepEntry* step = FindStep(entry, step_index)) return *step;
  auto& steps = entry.steps;
  auto at = std::lower_bound(steps.begin(), steps.end(), step_index,
                             StepIndexLess<StepEntry>);
  StepEntry& step = *steps.emplace(at);
  step.step_index = step_index;
  return step;
}

void RunTable::DropStepIfEmpty(RunEntry& entry, int step_index) {
  StepEntry* step = FindStep(entry, step_index);
  if (!step->state.has_value() && step->tasks.empty()) {
    entry.steps.erase(entry.steps.begin() + (step - entry.steps.data()));
  }
}

StepStateRecord* RunTable::FindStepState(const RunId& run_id, int step_index) {
  RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return nullptr;
  StepEntry* step = FindStep(*entry, step_index);
  if (step == nullptr || !step->state.has_value()) return nullptr;
  return &*step->state;
}

}  // namespace sluice::memory
