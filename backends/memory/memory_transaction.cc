#include "memory_transaction.h"

#include <utility>

#include "run_deletion.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::memory {

MemoryTransaction::MemoryTransaction(MemoryBackend::State& state)
    : state_(state) {
  Acquire();
}

MemoryTransaction::~MemoryTransaction() {
  if (phase_ == Phase::kOpen) RollBackAndRelease();
}

absl::Status MemoryTransaction::Commit() {
  if (phase_ != Phase::kOpen) return NotOpenError();
  CommitChanges(store(), undo());
  phase_ = Phase::kCommitted;
  Release();
  return absl::OkStatus();
}

// --- Flows, aliases and the queue registry -----------------------------------

absl::Status MemoryTransaction::LockFlowSlug(std::string_view) {
  // Transactions are exclusive: this one already excludes every other.
  return Apply([] { return absl::OkStatus(); });
}

absl::StatusOr<std::optional<FlowRecord>> MemoryTransaction::GetFlow(
    std::string_view flow_slug) {
  return Apply([&]() -> absl::StatusOr<std::optional<FlowRecord>> {
    const FlowRecord* flow = store().catalog.FindFlow(flow_slug);
    if (flow == nullptr) return std::nullopt;
    return *flow;
  });
}

absl::Status MemoryTransaction::InsertFlow(const FlowRecord& flow) {
  return Apply([&] { return store().catalog.InsertFlow(flow, undo()); });
}

absl::StatusOr<std::vector<FlowRecord>> MemoryTransaction::ListFlows() {
  return Apply([&]() -> absl::StatusOr<std::vector<FlowRecord>> {
    return store().catalog.ListFlows();
  });
}

absl::StatusOr<bool> MemoryTransaction::DeleteFlow(std::string_view flow_slug) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().catalog.DeleteFlow(flow_slug, undo());
  });
}

absl::Status MemoryTransaction::UpdateFlow(const FlowRecord& flow) {
  return Apply([&] { return store().catalog.UpdateFlow(flow, undo()); });
}

absl::StatusOr<RunCounts> MemoryTransaction::CountRuns(
    std::string_view flow_slug) {
  return Apply([&]() -> absl::StatusOr<RunCounts> {
    return store().runs.CountRuns(flow_slug);
  });
}

absl::Status MemoryTransaction::LockAlias(std::string_view) {
  // As LockFlowSlug: an open transaction already excludes every other.
  return Apply([] { return absl::OkStatus(); });
}

absl::StatusOr<std::optional<AliasRecord>> MemoryTransaction::GetAlias(
    std::string_view alias) {
  return Apply([&]() -> absl::StatusOr<std::optional<AliasRecord>> {
    const AliasRecord* found = store().catalog.FindAlias(alias);
    if (found == nullptr) return std::nullopt;
    return *found;
  });
}

absl::Status MemoryTransaction::ExpectAlias(std::string_view alias,
                                            std::string_view active_slug) {
  return Apply([&] {
    const AliasRecord* found = store().catalog.FindAlias(alias);
    if (found != nullptr && found->active_slug == active_slug) {
      return absl::OkStatus();
    }
    return absl::NotFoundError(StrCat("ExpectAlias: alias \"", alias,
                                      "\" at version \"", active_slug,
                                      "\" does not exist"));
  });
}

absl::Status MemoryTransaction::PutAlias(const AliasRecord& alias) {
  return Apply([&] {
    store().catalog.PutAlias(alias, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<AliasRecord>> MemoryTransaction::ListAliases() {
  return Apply([&]() -> absl::StatusOr<std::vector<AliasRecord>> {
    return store().catalog.ListAliases();
  });
}

absl::StatusOr<std::optional<QueueRecord>> MemoryTransaction::GetQueue(
    std::string_view name) {
  return Apply([&]() -> absl::StatusOr<std::optional<QueueRecord>> {
    const MessageQueue* queue = store().catalog.FindQueue(name);
    if (queue == nullptr) return std::nullopt;
    return queue->record();
  });
}

absl::StatusOr<bool> MemoryTransaction::QueueExists(std::string_view name) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().catalog.FindQueue(name) != nullptr;
  });
}

absl::Status MemoryTransaction::CreateQueue(const QueueRecord& queue) {
  return Apply([&] { return store().catalog.CreateQueue(queue, undo()); });
}

absl::StatusOr<std::vector<QueueRecord>> MemoryTransaction::ListQueues() {
  return Apply([&]() -> absl::StatusOr<std::vector<QueueRecord>> {
    return store().catalog.ListQueues();
  });
}

absl::Status MemoryTransaction::SetQueuePaused(std::string_view name,
                                               bool paused) {
  return Apply([&]() -> absl::Status {
    absl::StatusOr<MessageQueue*> found = FindQueue(name);
    if (!found.ok()) return found.status();
    (*found)->SetPaused(paused, undo());
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> MemoryTransaction::DeleteQueue(std::string_view name) {
  return Apply([&]() -> absl::StatusOr<bool> {
    return store().catalog.DeleteQueue(name, undo());
  });
}

// --- Runs -------------------------------------------------------------------

absl::Status MemoryTransaction::InsertRuns(
    std::span<RunRecord> runs, std::span<const Json* const> inputs) {
  return Apply([&] {
    SLUICE_RETURN_IF_ERROR(CheckRunInputs(runs.size(), inputs.size()));
    return store().runs.InsertRuns(runs, inputs, undo());
  });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
MemoryTransaction::GetRuns(std::span<const RunId> run_ids, LockMode,
                           Fields fields) {
  // LockMode is implied: no other transaction runs while this one is open.
  return Apply([&]() -> absl::StatusOr<std::vector<std::optional<RunRecord>>> {
    return store().runs.GetRuns(run_ids, fields);
  });
}

absl::Status MemoryTransaction::UpdateRuns(std::span<RunRecord> runs) {
  return Apply([&] { return store().runs.UpdateRuns(runs, undo()); });
}

absl::StatusOr<std::vector<int>> MemoryTransaction::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  return Apply([&] { return store().runs.AddRemainingSteps(deltas, undo()); });
}

absl::StatusOr<std::vector<RunRecord>> MemoryTransaction::ListRuns(
    const RunQuery& query, Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<RunRecord>> {
    return store().runs.ListRuns(query, fields);
  });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
MemoryTransaction::FindRunsByKey(std::string_view flow_slug,
                                 std::span<const std::string> external_keys,
                                 Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<std::optional<RunRecord>>> {
    return store().runs.FindByKey(flow_slug, external_keys, fields);
  });
}

absl::StatusOr<std::vector<RunRecord>> MemoryTransaction::FindFinishedRuns(
    absl::Time finished_before, int limit) {
  return Apply([&]() -> absl::StatusOr<std::vector<RunRecord>> {
    return store().runs.FindFinished(finished_before, limit);
  });
}

absl::StatusOr<int> MemoryTransaction::DeleteRuns(
    std::span<const RunId> run_ids) {
  return Apply([&]() -> absl::StatusOr<int> {
    return memory::DeleteRuns(store(), run_ids, undo());
  });
}

// --- Step states ------------------------------------------------------------

absl::Status MemoryTransaction::InsertStepStates(
    std::span<StepStateRecord> states) {
  return Apply([&] { return store().runs.InsertStepStates(states, undo()); });
}

absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
MemoryTransaction::GetStepStates(std::span<const RunId> run_ids,
                                 Fields fields) {
  return Apply(
      [&]() -> absl::StatusOr<std::vector<std::vector<StepStateRecord>>> {
        return store().runs.GetStepStates(run_ids, fields);
      });
}

absl::Status MemoryTransaction::UpdateStepStates(
    std::span<StepStateRecord> states) {
  return Apply([&] { return store().runs.UpdateStepStates(states, undo()); });
}

absl::StatusOr<std::vector<StepCounters>> MemoryTransaction::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  return Apply([&] { return store().runs.AddStepCounters(deltas, undo()); });
}

// --- Tasks ------------------------------------------------------------------

absl::Status MemoryTransaction::InsertTasks(std::span<TaskRecord> tasks) {
  return Apply([&] { return store().tasks.Insert(tasks, undo()); });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
MemoryTransaction::GetTasks(std::span<const TaskKey> keys, Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<std::optional<TaskRecord>>> {
    return store().tasks.Get(keys, fields);
  });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
MemoryTransaction::GetTasksByMessage(std::string_view queue,
                                     std::span<const int64_t> message_ids,
                                     Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<std::optional<TaskRecord>>> {
    return store().tasks.GetByMessage(queue, message_ids, fields);
  });
}

absl::StatusOr<std::vector<bool>> MemoryTransaction::UpdateTasks(
    std::span<TaskUpdate> updates) {
  return Apply([&]() -> absl::StatusOr<std::vector<bool>> {
    return store().tasks.Update(updates, undo());
  });
}

absl::StatusOr<std::vector<TaskRecord>> MemoryTransaction::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<TaskRecord>> {
    return store().tasks.GetUnfinished(run_id, step_index, fields);
  });
}

absl::StatusOr<std::vector<TaskRecord>> MemoryTransaction::ListTasks(
    const RunId& run_id) {
  return Apply([&]() -> absl::StatusOr<std::vector<TaskRecord>> {
    return store().tasks.List(run_id);
  });
}

absl::StatusOr<std::vector<StepOutputs>> MemoryTransaction::GetTaskOutputs(
    std::span<const StepRef> steps) {
  return Apply([&]() -> absl::StatusOr<std::vector<StepOutputs>> {
    return store().tasks.GetOutputs(steps);
  });
}

absl::StatusOr<std::vector<TaskRecord>> MemoryTransaction::FindStalledTasks(
    const StalledQuery& query, Fields fields) {
  return Apply([&]() -> absl::StatusOr<std::vector<TaskRecord>> {
    return store().tasks.FindStalled(query.now, query.limit, fields);
  });
}

namespace {

// Counts a queued task whose message becomes visible at `visible_at`
// (unset: it has no live message).
void CountQueued(std::optional<absl::Time> visible_at, absl::Time now,
                 QueueCounts& counts) {
  if (visible_at.has_value() && *visible_at > now) {
    ++counts.delayed;
    return;
  }
  ++counts.waiting;
  if (visible_at.has_value() && (!counts.oldest_waiting_since ||
                                 *visible_at < *counts.oldest_waiting_since)) {
    counts.oldest_waiting_since = visible_at;
  }
}

// TaskCounts::kAll: every task of the queue.
QueueCounts CountAll(const TaskTable& tasks, const MessageQueue* messages,
                     std::string_view queue, absl::Time now) {
  QueueCounts counts;
  tasks.ForEachTaskOfQueue(queue, [&](const TaskRecord& task) {
    switch (task.status) {
      case TaskStatus::kQueued:
        CountQueued(messages == nullptr
                        ? std::nullopt
                        : messages->VisibleAtOf(task.message_id),
                    now, counts);
        break;
      case TaskStatus::kStarted:
        ++counts.active;
        break;
      case TaskStatus::kCompleted:
        ++counts.completed;
        break;
      case TaskStatus::kFailed:
        ++counts.failed;
        break;
      case TaskStatus::kSkipped:
        ++counts.skipped;
        break;
      case TaskStatus::kWaiting:
        ++counts.parked;
        break;
      case TaskStatus::kCancelled:
        ++counts.cancelled;
        break;
    }
  });
  return counts;
}

// TaskCounts::kInFlight: the tasks of the queue's live messages.
QueueCounts CountInFlight(const TaskTable& tasks, const MessageQueue* messages,
                          std::string_view queue, absl::Time now) {
  QueueCounts counts;
  if (messages == nullptr) return counts;
  messages->ForEachLive([&](int64_t message_id, absl::Time visible_at) {
    const TaskRecord* task = tasks.OfMessage(queue, message_id);
    if (task == nullptr) return;
    if (task->status == TaskStatus::kQueued) {
      CountQueued(visible_at, now, counts);
    } else if (task->status == TaskStatus::kStarted) {
      ++counts.active;
    }
  });
  return counts;
}

}  // namespace

absl::StatusOr<QueueCounts> MemoryTransaction::CountTasks(
    std::string_view queue, absl::Time now, TaskCounts which) {
  return Apply([&]() -> absl::StatusOr<QueueCounts> {
    const MessageQueue* messages = store().catalog.FindQueue(queue);
    return which == TaskCounts::kAll
               ? CountAll(store().tasks, messages, queue, now)
               : CountInFlight(store().tasks, messages, queue, now);
  });
}

// --- Lifecycle --------------------------------------------------------------

absl::Status MemoryTransaction::NotOpenError() const {
  if (phase_ == Phase::kCommitted) {
    return absl::FailedPreconditionError(
        "memory transaction already committed; begin a new one");
  }
  return absl::FailedPreconditionError(
      "an earlier call failed and rolled this memory transaction back; drop "
      "it and begin a new one");
}

absl::StatusOr<MessageQueue*> MemoryTransaction::FindQueue(
    std::string_view name) {
  MessageQueue* queue = store().catalog.FindQueue(name);
  if (queue == nullptr) {
    return absl::NotFoundError(StrCat("queue \"", name, "\" does not exist"));
  }
  return queue;
}

MemoryStore& MemoryTransaction::store() {
  state_.mu.AssertHeld();
  return state_.store;
}

UndoLog& MemoryTransaction::undo() {
  state_.mu.AssertHeld();
  return state_.undo;
}

void MemoryTransaction::Acquire() {
  state_.mu.Lock();
  state_.holder.store(std::this_thread::get_id(), std::memory_order_relaxed);
}

void MemoryTransaction::RollBackAndRelease() {
  RollBack(store(), undo());
  Release();
}

void MemoryTransaction::Release() {
  state_.holder.store(std::thread::id(), std::memory_order_relaxed);
  state_.mu.Unlock();
}

}  // namespace sluice::memory
