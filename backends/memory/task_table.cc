#include "task_table.h"

#include <limits>

#include "absl/base/macros.h"
#include "sluice/internal/strings.h"
#include "stored_copy.h"

namespace sluice::memory {
namespace {

std::string DescribeKey(const TaskKey& key) {
  return StrCat("task (run ", key.run_id.ToString(), ", step ", key.step_index,
                ", task ", key.task_index, ")");
}

// Moves the fields a TaskUpdate writes out of `stored` and moves `next`'s in
// their place. Returns the old ones for the undo log.
SavedTaskFields ExchangeMutableFields(TaskRecord& stored, TaskRecord& next) {
  SavedTaskFields saved{.status = stored.status,
                        .attempts = stored.attempts,
                        .output = std::move(stored.output),
                        .error = std::move(stored.error),
                        .started_at = stored.started_at,
                        .finished_at = stored.finished_at,
                        .stall_at = stored.stall_at,
                        .requeued_count = stored.requeued_count,
                        .worker_id = std::move(stored.worker_id),
                        .budget_start = stored.budget_start,
                        .cancel_requested = stored.cancel_requested,
                        .message_id = stored.message_id};
  stored.status = next.status;
  stored.attempts = next.attempts;
  stored.output = Stored(std::move(next.output));
  stored.error = std::move(next.error);
  stored.started_at = next.started_at;
  stored.finished_at = next.finished_at;
  stored.stall_at = next.stall_at;
  stored.requeued_count = next.requeued_count;
  stored.worker_id = std::move(next.worker_id);
  stored.budget_start = next.budget_start;
  stored.cancel_requested = next.cancel_requested;
  stored.message_id = next.message_id;
  return saved;
}

void RestoreMutableFields(TaskRecord& stored, SavedTaskFields saved) {
  stored.status = saved.status;
  stored.attempts = saved.attempts;
  stored.output = std::move(saved.output);
  stored.error = std::move(saved.error);
  stored.started_at = saved.started_at;
  stored.finished_at = saved.finished_at;
  stored.stall_at = saved.stall_at;
  stored.requeued_count = saved.requeued_count;
  stored.worker_id = std::move(saved.worker_id);
  stored.budget_start = saved.budget_start;
  stored.cancel_requested = saved.cancel_requested;
  stored.message_id = saved.message_id;
}

}  // namespace

absl::Status TaskTable::Insert(std::span<TaskRecord> tasks, UndoLog& undo) {
  by_key_.reserve(by_key_.size() + tasks.size());
  // A batch's tasks usually share a run and a queue: look them up once.
  std::optional<uint64_t> run_sequence;
  RunId run_of_sequence;
  MessageIndex* messages = nullptr;
  std::string_view queue_of_messages;  // the key in by_message_
  for (TaskRecord& task : tasks) {
    if (!run_sequence.has_value() || run_of_sequence != task.key.run_id) {
      run_sequence = runs_.SequenceOf(task.key.run_id);
      run_of_sequence = task.key.run_id;
      if (!run_sequence.has_value()) {
        return absl::NotFoundError(StrCat(
            DescribeKey(task.key), " belongs to no run: insert the run first"));
      }
    }
    auto [by_key, key_is_new] = by_key_.try_emplace(task.key, nullptr);
    if (!key_is_new) {
      return absl::AlreadyExistsError(
          StrCat(DescribeKey(task.key), " already exists"));
    }
    if (messages == nullptr || queue_of_messages != task.queue_name) {
      // Only this lookup inserts into by_message_, so the pointers stay
      // valid until the next one.
      auto queue_it = by_message_.try_emplace(task.queue_name).first;
      messages = &queue_it->second;
      queue_of_messages = queue_it->first;
    }
    auto [by_id, message_is_new] =
        messages->try_emplace(task.message_id, nullptr);
    if (!message_is_new) {
      by_key_.erase(by_key);
      return absl::AlreadyExistsError(
          StrCat("message ", task.message_id, " of queue \"", task.queue_name,
                 "\" already belongs to a task; ", DescribeKey(task.key),
                 " needs a message of its own"));
    }
    TaskRow& row = rows_.AddMade([&] {
      return TaskRow{.task = Stored(std::move(task)),
                     .run_sequence = *run_sequence};
    });
    by_key->second = &row;
    by_id->second = &row;
    runs_.AddTask(row.task);
    IndexStall(row);
    undo.Add(undo::TaskInserted{.key = row.task.key});
  }
  return absl::OkStatus();
}

std::vector<std::optional<TaskRecord>> TaskTable::Get(
    std::span<const TaskKey> keys, Fields fields) const {
  std::vector<std::optional<TaskRecord>> found;
  found.reserve(keys.size());
  for (const TaskKey& key : keys) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) {
      found.emplace_back();
    } else {
      found.emplace_back(CopyOf(it->second->task, fields));
    }
  }
  return found;
}

std::vector<std::optional<TaskRecord>> TaskTable::GetByMessage(
    std::string_view queue, std::span<const int64_t> message_ids,
    Fields fields) const {
  std::vector<std::optional<TaskRecord>> found(message_ids.size());
  auto queue_it = by_message_.find(ToAbsl(queue));
  if (queue_it == by_message_.end()) return found;
  for (size_t i = 0; i < message_ids.size(); ++i) {
    auto it = queue_it->second.find(message_ids[i]);
    if (it != queue_it->second.end()) {
      found[i] = CopyOf(it->second->task, fields);
    }
  }
  return found;
}

const TaskRecord* TaskTable::OfMessage(std::string_view queue,
                                       int64_t message_id) const {
  auto queue_it = by_message_.find(ToAbsl(queue));
  if (queue_it == by_message_.end()) return nullptr;
  auto it = queue_it->second.find(message_id);
  return it == queue_it->second.end() ? nullptr : &it->second->task;
}

std::vector<bool> TaskTable::Update(std::span<TaskUpdate> updates,
                                    UndoLog& undo) {
  std::vector<bool> applied;
  applied.reserve(updates.size());
  for (TaskUpdate& update : updates) {
    auto it = by_key_.find(update.task.key);
    if (it == by_key_.end() ||
        it->second->task.status != update.expected_status ||
        it->second->task.attempts != update.expected_attempts ||
        (update.expected_cancel_requested &&
         it->second->task.cancel_requested !=
             *update.expected_cancel_requested)) {
      applied.push_back(false);
      continue;
    }
    TaskRow& row = *it->second;
    int64_t old_message = row.task.message_id;
    UnindexStall(row);
    undo.Add(undo::TaskUpdated{.key = update.task.key},
             ExchangeMutableFields(row.task, update.task));
    IndexStall(row);
    ReindexMessage(row, old_message);
    applied.push_back(true);
  }
  return applied;
}

std::vector<TaskRecord> TaskTable::GetUnfinished(const RunId& run_id,
                                                 std::optional<int> step_index,
                                                 Fields fields) const {
  std::vector<TaskRecord> unfinished;
  runs_.ForEachTask(run_id,
                    step_index.value_or(std::numeric_limits<int>::min()),
                    step_index.value_or(std::numeric_limits<int>::max()),
                    [&](const TaskRecord& task) {
                      if (!IsTerminal(task.status)) {
                        unfinished.push_back(CopyOf(task, fields));
                      }
                    });
  return unfinished;
}

std::vector<TaskRecord> TaskTable::List(const RunId& run_id) const {
  std::vector<TaskRecord> tasks;
  runs_.ForEachTask(run_id, std::numeric_limits<int>::min(),
                    std::numeric_limits<int>::max(),
                    [&](const TaskRecord& task) { tasks.push_back(task); });
  return tasks;
}

std::vector<StepOutputs> TaskTable::GetOutputs(
    std::span<const StepRef> steps) const {
  std::vector<StepOutputs> outputs(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<std::optional<Json>>& step_outputs = outputs[i].outputs;
    runs_.ForEachTask(
        steps[i].run_id, steps[i].step_index, steps[i].step_index,
        [&](const TaskRecord& task) { step_outputs.push_back(task.output); });
  }
  return outputs;
}

std::vector<TaskRecord> TaskTable::FindStalled(absl::Time now, int limit,
                                               Fields fields) const {
  if (limit <= 0) return {};
  std::vector<TaskRecord> stalled;
  for (const auto& [key, row] : stalled_) {
    if (std::get<absl::Time>(key) >= now ||
        stalled.size() >= static_cast<size_t>(limit)) {
      break;
    }
    stalled.push_back(CopyOf(row->task, fields));
  }
  return stalled;
}

void TaskTable::DeleteTasksOfRun(std::span<const TaskRecord* const> tasks,
                                 UndoLog& undo) {
  // A run's tasks usually share a queue: look its index up once.
  MessageIndex* messages = nullptr;
  std::string_view queue_of_messages;  // the key in by_message_
  for (const TaskRecord* task_of_run : tasks) {
    const TaskRecord& task = *task_of_run;
    auto by_key = by_key_.find(task.key);
    TaskRow& row = *by_key->second;
    by_key_.erase(by_key);
    if (messages == nullptr || queue_of_messages != task.queue_name) {
      auto queue_it = by_message_.find(task.queue_name);
      messages = &queue_it->second;
      queue_of_messages = queue_it->first;
    }
    messages->erase(task.message_id);
    UnindexStall(row);
    undo.AddDetached(undo::TaskDeleted{.row = &row});
  }
}

void TaskTable::UndoInsert(const TaskKey& key) {
  TaskRow& row = *by_key_.find(key)->second;
  Unindex(row);
  rows_.Erase(row);
}

void TaskTable::UndoUpdate(const TaskKey& key, SavedTaskFields saved) {
  TaskRow& row = *by_key_.find(key)->second;
  int64_t old_message = row.task.message_id;
  UnindexStall(row);
  RestoreMutableFields(row.task, std::move(saved));
  IndexStall(row);
  ReindexMessage(row, old_message);
}

// A task's message changes only when RetryRun gives it a new one.
void TaskTable::ReindexMessage(TaskRow& row, int64_t old_message) {
  if (row.task.message_id == old_message) return;
  MessageIndex& messages = by_message_[row.task.queue_name];
  messages.erase(old_message);
  messages[row.task.message_id] = &row;
}

void TaskTable::UndoDelete(TaskRow& row) {
  // The run kept its listing of the row.
  const TaskRecord& task = row.task;
  by_key_.try_emplace(task.key, &row);
  by_message_[task.queue_name].try_emplace(task.message_id, &row);
  IndexStall(row);
}

TaskRecord TaskTable::CopyOf(const TaskRecord& task, Fields fields) {
  if (fields == Fields::kAll) return task;
  return TaskRecord{.key = task.key,
                    .flow_slug = task.flow_slug,
                    .status = task.status,
                    .attempts = task.attempts,
                    .error = task.error,
                    .queue_name = task.queue_name,
                    .message_id = task.message_id,
                    .queued_at = task.queued_at,
                    .started_at = task.started_at,
                    .finished_at = task.finished_at,
                    .stall_at = task.stall_at,
                    .requeued_count = task.requeued_count,
                    .worker_id = task.worker_id,
                    .budget_start = task.budget_start,
                    .cancel_requested = task.cancel_requested,
                    .options = task.options};
}

void TaskTable::Unindex(const TaskRow& row) {
  const TaskRecord& task = row.task;
  by_key_.erase(task.key);
  by_message_.find(task.queue_name)->second.erase(task.message_id);
  runs_.RemoveTask(task);
  UnindexStall(row);
}

void TaskTable::IndexStall(TaskRow& row) {
  const TaskRecord& task = row.task;
  if (task.status == TaskStatus::kStarted && task.stall_at.has_value()) {
    // Hinted at the end: claims mostly come in time order.
    stalled_.try_emplace(stalled_.end(),
                         {*task.stall_at, row.run_sequence, task.key.step_index,
                          task.key.task_index},
                         &row);
  }
}

void TaskTable::UnindexStall(const TaskRow& row) {
  const TaskRecord& task = row.task;
  if (task.status == TaskStatus::kStarted && task.stall_at.has_value()) {
    stalled_.erase({*task.stall_at, row.run_sequence, task.key.step_index,
                    task.key.task_index});
  }
}

}  // namespace sluice::memory
