#include "write_batch.h"

#include <span>

#include "boost/json/object.hpp"
#include "sluice/internal/one_trip_task_writes.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

TaskMessageBody MessageBody(const TaskRecord& task,
                            const std::string& step_slug) {
  return TaskMessageBody{.flow_slug = task.flow_slug,
                         .run_id = task.key.run_id,
                         .step_slug = step_slug,
                         .task_index = task.key.task_index};
}

size_t WriteBatch::CreateTask(TaskRecord task, TaskMessageBody message_body,
                              absl::Time visible_at, int priority) {
  new_tasks_.push_back(std::move(task));
  new_messages_.push_back({.visible_at = visible_at,
                           .priority = priority,
                           .task = std::move(message_body)});
  archive_new_.push_back(false);
  return new_tasks_.size() - 1;
}

void WriteBatch::EndNewTask(size_t handle, TaskStatus status, absl::Time now) {
  TaskRecord& task = new_tasks_[handle];
  task.status = status;
  task.finished_at = now;
  archive_new_[handle] = true;
}

size_t WriteBatch::CreateMapTasks(MapTasks map) {
  new_maps_.push_back({.tasks = std::move(map),
                       .tasks_before = new_tasks_.size(),
                       .ended = std::nullopt,
                       .ended_at = absl::InfinitePast()});
  return new_maps_.size() - 1;
}

void WriteBatch::EndMapTasks(size_t handle, TaskStatus status, absl::Time now) {
  new_maps_[handle].ended = status;
  new_maps_[handle].ended_at = now;
}

namespace {

// New tasks and their messages on their way to the backend, written
// WriteBatch::kTaskChunk at a time and in the order they were added.
class TaskChunk {
 public:
  TaskChunk(Transaction& tx, absl::Time now, TransactionEffects& effects,
            absl::flat_hash_map<std::string, std::vector<int64_t>>& archives)
      : tx_(tx), now_(now), effects_(effects), archives_(archives) {}

  // Takes every task of `tasks` (with its message and archive flag) at
  // once, without moving each record: a batch of one chunk, the usual
  // case. REQUIRES: the chunk is empty and `tasks` fit in one.
  absl::Status AddAll(std::vector<TaskRecord>& tasks,
                      std::vector<OutgoingMessage>& messages,
                      std::vector<bool>& archive) {
    tasks_.swap(tasks);
    messages_.swap(messages);
    archive_.swap(archive);
    return Write();
  }

  // `archive`: the task is terminal already; its message is archived as
  // soon as it is sent.
  absl::Status Add(TaskRecord task, OutgoingMessage message, bool archive) {
    tasks_.push_back(std::move(task));
    messages_.push_back(std::move(message));
    archive_.push_back(archive);
    if (tasks_.size() < WriteBatch::kTaskChunk) return absl::OkStatus();
    return Write();
  }

  // Sends the messages, per queue (a flow-mode batch has one, so the common
  // case is one call), then inserts the tasks.
  absl::Status Write() {
    if (tasks_.empty()) return absl::OkStatus();
    if (auto* one_trip = dynamic_cast<internal::OneTripTaskWrites*>(&tx_);
        one_trip != nullptr && OneLiveQueue()) {
      // Nobody needs the message ids: nothing of the chunk is archived.
      const std::string queue = tasks_.front().queue_name;
      SLUICE_RETURN_IF_ERROR(
          one_trip->SendMessagesAndInsertTasks(queue, messages_, tasks_, now_));
      effects_.queues_to_wake.insert(queue);
      Clear();
      return absl::OkStatus();
    }
    for (size_t first = 0; first < tasks_.size();) {
      const std::string& queue = tasks_[first].queue_name;
      size_t last = first;
      bool any_live = false;
      while (last < tasks_.size() && tasks_[last].queue_name == queue) {
        any_live = any_live || !archive_[last];
        ++last;
      }
      std::span<OutgoingMessage> messages(messages_.data() + first,
                                          last - first);
      SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                              tx_.SendMessages(queue, messages, now_));
      if (ids.size() != last - first) {
        return absl::InternalError(StrCat("queue \"", queue, "\" returned ",
                                          ids.size(), " ids for ", last - first,
                                          " messages"));
      }
      for (size_t i = first; i < last; ++i) {
        tasks_[i].message_id = ids[i - first];
        if (archive_[i]) archives_[queue].push_back(ids[i - first]);
      }
      if (any_live) effects_.queues_to_wake.insert(queue);
      first = last;
    }
    SLUICE_RETURN_IF_ERROR(tx_.InsertTasks(tasks_));
    Clear();
    return absl::OkStatus();
  }

 private:
  // Every task on one queue, none of them terminal.
  bool OneLiveQueue() const {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (archive_[i] || tasks_[i].queue_name != tasks_[0].queue_name) {
        return false;
      }
    }
    return true;
  }
  void Clear() {
    tasks_.clear();
    messages_.clear();
    archive_.clear();
  }

  Transaction& tx_;
  absl::Time now_;
  TransactionEffects& effects_;
  absl::flat_hash_map<std::string, std::vector<int64_t>>& archives_;
  std::vector<TaskRecord> tasks_;
  std::vector<OutgoingMessage> messages_;
  std::vector<bool> archive_;
};

// One task per element of `map`, made as the chunk takes them.
absl::Status AddMapTasks(const WriteBatch::MapTasks& map,
                         std::optional<TaskStatus> ended, absl::Time ended_at,
                         TaskChunk& chunk) {
  const boost::json::array& elements = map.elements->as_array();
  for (size_t k = 0; k < elements.size(); ++k) {
    TaskRecord task = map.prototype;
    task.key.task_index = static_cast<int>(k);
    task.input = elements[k];
    if (ended) {
      task.status = *ended;
      task.finished_at = ended_at;
    }
    OutgoingMessage message{.visible_at = map.visible_at,
                            .priority = map.priority,
                            .task = MessageBody(task, map.step_slug)};
    SLUICE_RETURN_IF_ERROR(
        chunk.Add(std::move(task), std::move(message), ended.has_value()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteBatch::SendAndInsertTasks(Transaction& tx, absl::Time now,
                                            TransactionEffects& effects) {
  // In creation order, so messages get their sequence numbers in it.
  TaskChunk chunk(tx, now, effects, archives_);
  if (new_maps_.empty() && new_tasks_.size() <= kTaskChunk) {
    return chunk.AddAll(new_tasks_, new_messages_, archive_new_);
  }
  size_t next = 0;
  auto add_created = [&](size_t end) -> absl::Status {
    for (; next < end; ++next) {
      SLUICE_RETURN_IF_ERROR(chunk.Add(std::move(new_tasks_[next]),
                                       std::move(new_messages_[next]),
                                       archive_new_[next]));
    }
    return absl::OkStatus();
  };
  for (const PendingMap& map : new_maps_) {
    SLUICE_RETURN_IF_ERROR(add_created(map.tasks_before));
    SLUICE_RETURN_IF_ERROR(
        AddMapTasks(map.tasks, map.ended, map.ended_at, chunk));
  }
  SLUICE_RETURN_IF_ERROR(add_created(new_tasks_.size()));
  return chunk.Write();
}

namespace {

// The counters the backend returned must be those the engine computed under
// the run's lock; a drifted counter fails the transaction instead.
absl::Status CheckStepCounters(std::span<const StepCounterDelta> deltas,
                               std::span<const StepCounters> expected,
                               std::span<const StepCounters> got) {
  if (got.size() != deltas.size()) {
    return absl::InternalError(StrCat("the backend returned ", got.size(),
                                      " step counters for ", deltas.size(),
                                      " moves; nothing was changed"));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const StepCounters& want = expected[i];
    if (got[i].remaining_tasks != want.remaining_tasks ||
        got[i].remaining_deps != want.remaining_deps) {
      return absl::InternalError(
          StrCat("run ", deltas[i].step.run_id.ToString(), " step ",
                 deltas[i].step.step_index, ": counters are (tasks ",
                 got[i].remaining_tasks, ", deps ", got[i].remaining_deps,
                 ") but the engine expected (", want.remaining_tasks, ", ",
                 want.remaining_deps, "); nothing was changed"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRunCounters(std::span<const RunCounterDelta> deltas,
                              std::span<const int> expected,
                              std::span<const int> got) {
  if (got.size() != deltas.size()) {
    return absl::InternalError(StrCat("the backend returned ", got.size(),
                                      " run counters for ", deltas.size(),
                                      " moves; nothing was changed"));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      return absl::InternalError(StrCat(
          "run ", deltas[i].run_id.ToString(), ": remaining_steps is ", got[i],
          " but the engine expected ", expected[i], "; nothing was changed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteBatch::UpdateCountedChecked(
    internal::CheckedCounterMoves& tx) {
  if (!counted_runs_.runs.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.UpdateRunsAndCheckCounters(
        counted_runs_.runs, counted_runs_.deltas, counted_runs_.expected));
  }
  if (!counted_steps_.states.empty()) {
    MoveLentOutputs(/*counted_steps=*/true, /*to_steps=*/true);
    absl::Status written = tx.UpdateStepStatesAndCheckCounters(
        counted_steps_.states, counted_steps_.deltas, counted_steps_.expected);
    MoveLentOutputs(/*counted_steps=*/true, /*to_steps=*/false);
    SLUICE_RETURN_IF_ERROR(written);
  }
  return absl::OkStatus();
}

absl::Status WriteBatch::MoveCounters(Transaction& tx) {
  if (auto* checked = dynamic_cast<internal::CheckedCounterMoves*>(&tx)) {
    if (!step_deltas_.empty()) {
      SLUICE_RETURN_IF_ERROR(
          checked->AddStepCountersChecked(step_deltas_, expected_steps_));
    }
    if (!run_deltas_.empty()) {
      SLUICE_RETURN_IF_ERROR(
          checked->AddRunRemainingStepsChecked(run_deltas_, expected_runs_));
    }
    return absl::OkStatus();
  }
  if (!step_deltas_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<StepCounters> got,
                            tx.AddStepCounters(step_deltas_));
    SLUICE_RETURN_IF_ERROR(
        CheckStepCounters(step_deltas_, expected_steps_, got));
  }
  if (!run_deltas_.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<int> got,
                            tx.AddRunRemainingSteps(run_deltas_));
    SLUICE_RETURN_IF_ERROR(CheckRunCounters(run_deltas_, expected_runs_, got));
  }
  return absl::OkStatus();
}

void WriteBatch::MoveLentOutputs(bool counted_steps, bool to_steps) {
  for (LentOutput& lent : lent_outputs_) {
    if (lent.step.counted != counted_steps) continue;
    StepStateRecord& step = counted_steps
                                ? counted_steps_.states[lent.step.index]
                                : updated_step_states_[lent.step.index];
    RunRecord& run = lent.run.counted ? counted_runs_.runs[lent.run.index]
                                      : updated_runs_[lent.run.index];
    Json& in_run = run.output->as_object()[lent.slug];
    if (to_steps) {
      step.output = std::move(in_run);
    } else {
      in_run = std::move(*step.output);
    }
  }
}

absl::Status WriteBatch::UpdateCounted(Transaction& tx) {
  if (auto* checked = dynamic_cast<internal::CheckedCounterMoves*>(&tx)) {
    return UpdateCountedChecked(*checked);
  }
  if (!counted_runs_.runs.empty()) {
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<int> got,
        tx.UpdateRunsAndCounters(counted_runs_.runs, counted_runs_.deltas));
    SLUICE_RETURN_IF_ERROR(
        CheckRunCounters(counted_runs_.deltas, counted_runs_.expected, got));
  }
  if (!counted_steps_.states.empty()) {
    MoveLentOutputs(/*counted_steps=*/true, /*to_steps=*/true);
    absl::StatusOr<std::vector<StepCounters>> written =
        tx.UpdateStepStatesAndCounters(counted_steps_.states,
                                       counted_steps_.deltas);
    MoveLentOutputs(/*counted_steps=*/true, /*to_steps=*/false);
    SLUICE_ASSIGN_OR_RETURN(std::vector<StepCounters> got, std::move(written));
    SLUICE_RETURN_IF_ERROR(
        CheckStepCounters(counted_steps_.deltas, counted_steps_.expected, got));
  }
  return absl::OkStatus();
}

absl::Status WriteBatch::Flush(Transaction& tx, absl::Time now,
                               TransactionEffects& effects) {
  if (!new_runs_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.InsertRuns(new_runs_, new_run_inputs_));
    // Stored: a run's input (a whole map's array) is not held while its
    // tasks are written below.
    std::vector<RunRecord>().swap(new_runs_);
    new_run_inputs_.clear();
  }
  if (!new_step_states_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.InsertStepStates(new_step_states_));
  }
  SLUICE_RETURN_IF_ERROR(SendAndInsertTasks(tx, now, effects));
  if (!new_attempts_.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.AppendAttempts(new_attempts_));
  }
  if (!updated_runs_.empty())
    SLUICE_RETURN_IF_ERROR(tx.UpdateRuns(updated_runs_));
  if (!updated_step_states_.empty()) {
    MoveLentOutputs(/*counted_steps=*/false, /*to_steps=*/true);
    absl::Status written = tx.UpdateStepStates(updated_step_states_);
    MoveLentOutputs(/*counted_steps=*/false, /*to_steps=*/false);
    SLUICE_RETURN_IF_ERROR(written);
  }
  SLUICE_RETURN_IF_ERROR(UpdateCounted(tx));
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
