#include "write_batch.h"

#include "boost/json/object.hpp"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

Json MessageBody(const TaskRecord& task, const std::string& run_id,
                 const std::string& step_slug) {
  boost::json::object body;
  body.reserve(4);
  body.emplace("flow_slug", task.flow_slug);
  body.emplace("run_id", run_id);
  body.emplace("step_slug", step_slug);
  body.emplace("task_index", task.key.task_index);
  return body;
}

size_t WriteBatch::CreateTask(TaskRecord task, Json message_body,
                              absl::Time visible_at) {
  new_tasks_.push_back({std::move(task), std::move(message_body), visible_at});
  return new_tasks_.size() - 1;
}

void WriteBatch::EndNewTask(size_t handle, TaskStatus status, absl::Time now) {
  NewTask& t = new_tasks_[handle];
  t.task.status = status;
  t.task.finished_at = now;
  t.archive = true;
}

absl::Status WriteBatch::SendAndInsertTasks(Transaction& tx, absl::Time now,
                                            TransactionEffects& effects) {
  if (new_tasks_.empty()) return absl::OkStatus();
  // Group by queue, keeping each queue's tasks in creation order.
  absl::flat_hash_map<std::string, std::vector<size_t>> by_queue;
  for (size_t i = 0; i < new_tasks_.size(); ++i) {
    by_queue[new_tasks_[i].task.queue_name].push_back(i);
  }
  std::vector<OutgoingMessage> messages;
  std::vector<TaskRecord> tasks;
  tasks.reserve(new_tasks_.size());
  for (auto& [queue, indices] : by_queue) {
    messages.clear();
    messages.reserve(indices.size());
    bool any_visible = false;
    for (size_t i : indices) {
      NewTask& t = new_tasks_[i];
      messages.push_back({std::move(t.body), t.visible_at});
      any_visible = any_visible || (t.visible_at <= now && !t.archive);
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                            tx.SendMessages(queue, messages, now));
    if (ids.size() != indices.size()) {
      return absl::InternalError(StrCat("queue \"", queue, "\" returned ",
                                        ids.size(), " ids for ", indices.size(),
                                        " messages"));
    }
    for (size_t j = 0; j < indices.size(); ++j) {
      NewTask& t = new_tasks_[indices[j]];
      t.task.message_id = ids[j];
      if (t.archive) archives_[queue].push_back(ids[j]);
    }
    if (any_visible) effects.queues_to_wake.insert(queue);
  }
  for (NewTask& t : new_tasks_) tasks.push_back(std::move(t.task));
  return tx.InsertTasks(tasks);
}

absl::Status WriteBatch::Flush(Transaction& tx, absl::Time now,
                               TransactionEffects& effects) {
  if (!new_runs_.empty()) SLUICE_RETURN_IF_ERROR(tx.InsertRuns(new_runs_));
  if (!new_step_states_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.InsertStepStates(new_step_states_));
  }
  SLUICE_RETURN_IF_ERROR(SendAndInsertTasks(tx, now, effects));
  for (const RunRecord& run : updated_runs_) {
    SLUICE_RETURN_IF_ERROR(tx.UpdateRun(run));
  }
  if (!updated_step_states_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.UpdateStepStates(updated_step_states_));
  }
  if (!task_updates_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            tx.UpdateTasks(task_updates_));
    (void)applied;  // a task another transaction ended first stays as it is
  }
  for (auto& [queue, updates] : visibility_) {
    SLUICE_RETURN_IF_ERROR(tx.SetVisibility(queue, updates));
    for (const VisibilityUpdate& u : updates) {
      if (u.visible_at <= now) effects.queues_to_wake.insert(queue);
    }
  }
  for (auto& [queue, ids] : archives_) {
    SLUICE_RETURN_IF_ERROR(tx.ArchiveMessages(queue, ids, now));
  }
  return absl::OkStatus();
}

}  // namespace sluice
