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

}  // namespace

absl::Status RunTable::InsertStepStates(std::span<const StepStateRecord> states,
                                        UndoLog& undo) {
  for (const StepStateRecord& state : states) {
    RunEntry* entry = FindEntry(state.run_id);
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
    step.state = StoredCopy(state);
    undo.Add(undo::StepStateInserted{.run_id = state.run_id,
                                     .step_index = state.step_index});
  }
  return absl::OkStatus();
}

std::vector<StepStateRecord> RunTable::GetStepStates(
    const RunId& run_id) const {
  std::vector<StepStateRecord> states;
  const RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return states;
  states.reserve(entry->steps.size());
  for (const StepEntry& step : entry->steps) {
    if (step.state.has_value()) states.push_back(*step.state);
  }
  return states;
}

absl::Status RunTable::UpdateStepStates(std::span<const StepStateRecord> states,
                                        UndoLog& undo) {
  for (const StepStateRecord& state : states) {
    StepStateRecord* stored = FindStepState(state.run_id, state.step_index);
    if (stored == nullptr) {
      return absl::NotFoundError(StrCat(
          DescribeStep(state.run_id, state.step_index), " does not exist"));
    }
    undo.Add(undo::StepStateUpdated{.run_id = state.run_id,
                                    .step_index = state.step_index},
             SavedStepFields{.status = stored->status,
                             .initial_tasks = stored->initial_tasks,
                             .remaining_tasks = stored->remaining_tasks,
                             .output = std::move(stored->output),
                             .error = std::move(stored->error),
                             .skip_reason = stored->skip_reason,
                             .started_at = stored->started_at,
                             .finished_at = stored->finished_at});
    stored->status = state.status;
    stored->initial_tasks = state.initial_tasks;
    stored->remaining_tasks = state.remaining_tasks;
    stored->output = StoredCopy(state.output);
    stored->error = state.error;
    stored->skip_reason = state.skip_reason;
    stored->started_at = state.started_at;
    stored->finished_at = state.finished_at;
  }
  return absl::OkStatus();
}

absl::StatusOr<int> RunTable::AddStepCounter(const RunId& run_id,
                                             int step_index,
                                             StepCounter counter, int delta,
                                             UndoLog& undo) {
  StepStateRecord* stored = FindStepState(run_id, step_index);
  if (stored == nullptr) {
    return absl::NotFoundError(
        StrCat(DescribeStep(run_id, step_index), " does not exist"));
  }
  const bool tasks = counter == StepCounter::kRemainingTasks;
  const std::optional<int> old_value =
      tasks ? stored->remaining_tasks : stored->remaining_deps;
  // An unset remaining_tasks counts as 0, as SQL's coalesce would.
  const int current = old_value.value_or(0);
  std::optional<int> sum = CheckedAdd(current, delta);
  if (!sum.has_value()) {
    return CounterOverflow(DescribeStep(run_id, step_index), current, delta);
  }
  undo.Add(undo::StepCounterAdded{.run_id = run_id,
                                  .step_index = step_index,
                                  .counter = counter,
                                  .old_value = old_value});
  if (tasks) {
    stored->remaining_tasks = *sum;
  } else {
    stored->remaining_deps = *sum;
  }
  return *sum;
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
  stored.remaining_tasks = saved.remaining_tasks;
  stored.output = std::move(saved.output);
  stored.error = std::move(saved.error);
  stored.skip_reason = saved.skip_reason;
  stored.started_at = saved.started_at;
  stored.finished_at = saved.finished_at;
}

void RunTable::UndoAddStepCounter(const RunId& run_id, int step_index,
                                  StepCounter counter,
                                  std::optional<int> old_value) {
  StepStateRecord& stored = *FindStepState(run_id, step_index);
  if (counter == StepCounter::kRemainingTasks) {
    stored.remaining_tasks = old_value;
  } else {
    stored.remaining_deps = *old_value;
  }
}

RunTable::StepEntry* RunTable::FindStep(RunEntry& entry, int step_index) {
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

RunTable::StepEntry& RunTable::FindOrAddStep(RunEntry& entry, int step_index) {
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
