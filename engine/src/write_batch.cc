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
                              absl::Time visible_at, int priority) {
  new_tasks_.push_back(std::move(task));
  new_messages_.push_back({std::move(message_body), visible_at, priority});
  archive_new_.push_back(false);
  return new_tasks_.size() - 1;
}

void WriteBatch::EndNewTask(size_t handle, TaskStatus status, absl::Time now) {
  TaskRecord& task = new_tasks_[handle];
  task.status = status;
  task.finished_at = now;
  archive_new_[handle] = true;
}

absl::Status WriteBatch::SendAndInsertTasks(Transaction& tx, absl::Time now,
                                            TransactionEffects& effects) {
  if (new_tasks_.empty()) return absl::OkStatus();
  // Messages go out per queue; a flow-mode batch has one queue, so the
  // common case sends everything in one call without regrouping.
  size_t begin = 0;
  while (begin < new_tasks_.size()) {
    const std::string& queue = new_tasks_[begin].queue_name;
    size_t end = begin;
    bool any_live = false;
    while (end < new_tasks_.size() && new_tasks_[end].queue_name == queue) {
      any_live = any_live || !archive_new_[end];
      ++end;
    }
    std::span<OutgoingMessage> messages(new_messages_.data() + begin,
                                        end - begin);
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                            tx.SendMessages(queue, messages, now));
    if (ids.size() != end - begin) {
      return absl::InternalError(StrCat("queue \"", queue, "\" returned ",
                                        ids.size(), " ids for ", end - begin,
                                        " messages"));
    }
    for (size_t i = begin; i < end; ++i) {
      new_tasks_[i].message_id = ids[i - begin];
      if (archive_new_[i]) archives_[queue].push_back(ids[i - begin]);
    }
    if (any_live) effects.queues_to_wake.insert(queue);
    begin = end;
  }
  return tx.InsertTasks(new_tasks_);
}

absl::Status WriteBatch::MoveCounters(Transaction& tx) {
  if (!step_deltas_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<StepCounters> got,
                            tx.AddStepCounters(step_deltas_));
    for (size_t i = 0; i < got.size(); ++i) {
      const StepCounters& want = expected_steps_[i];
      if (got[i].remaining_tasks != want.remaining_tasks ||
          got[i].remaining_deps != want.remaining_deps) {
        return absl::InternalError(
            StrCat("run ", step_deltas_[i].step.run_id.ToString(), " step ",
                   step_deltas_[i].step.step_index, ": counters are (tasks ",
                   got[i].remaining_tasks, ", deps ", got[i].remaining_deps,
                   ") but the engine expected (", want.remaining_tasks, ", ",
                   want.remaining_deps, "); nothing was changed"));
      }
    }
  }
  if (!run_deltas_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> got,
                            tx.AddRunRemainingSteps(run_deltas_));
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != expected_runs_[i]) {
        return absl::InternalError(
            StrCat("run ", run_deltas_[i].run_id.ToString(),
                   ": remaining_steps is ", got[i], " but the engine expected ",
                   expected_runs_[i], "; nothing was changed"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WriteBatch::Flush(Transaction& tx, absl::Time now,
                               TransactionEffects& effects) {
  if (!new_runs_.empty()) SLUICE_RETURN_IF_ERROR(tx.InsertRuns(new_runs_));
  if (!new_step_states_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.InsertStepStates(new_step_states_));
  }
  SLUICE_RETURN_IF_ERROR(SendAndInsertTasks(tx, now, effects));
  if (!updated_runs_.empty())
    SLUICE_RETURN_IF_ERROR(tx.UpdateRuns(updated_runs_));
  if (!updated_step_states_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.UpdateStepStates(updated_step_states_));
  }
  SLUICE_RETURN_IF_ERROR(MoveCounters(tx));
  if (!task_updates_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            tx.UpdateTasks(task_updates_));
    // A task another transaction ended first stays as it is, and so does
    // the ledger of its attempt.
    std::vector<AttemptRecord> attempts;
    for (size_t i = 0; i < applied.size(); ++i) {
      if (applied[i] && task_attempts_[i]) {
        attempts.push_back(std::move(*task_attempts_[i]));
      }
    }
    if (!attempts.empty()) SLUICE_RETURN_IF_ERROR(tx.AppendAttempts(attempts));
  }
  for (auto& [queue, ids] : archives_) {
    SLUICE_RETURN_IF_ERROR(tx.ArchiveMessages(queue, ids, now));
  }
  if (!child_reports_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.AppendChildReports(child_reports_).status());
    effects.child_reports = true;
  }
  return absl::OkStatus();
}

}  // namespace sluice
