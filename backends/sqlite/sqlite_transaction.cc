#include "sqlite_transaction.h"

#include <thread>
#include <utility>

#include "sluice/internal/status_macros.h"
#include "sqlite_connection.h"

namespace sluice::sqlite_internal {

namespace {

// A borrowed connection's transaction (SqliteBackend::Borrow).
constexpr char kSavepoint[] = "SAVEPOINT sluice_host";
constexpr char kReleaseSavepoint[] = "RELEASE sluice_host";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO sluice_host";

}  // namespace

SqliteTransaction::SqliteTransaction(SqliteBackend::Connection& connection)
    : connection_(connection),
      tables_(connection.statements,
              connection.borrowed ? nullptr : &connection.known_seqs) {}

SqliteTransaction::~SqliteTransaction() { End(); }

absl::StatusOr<std::unique_ptr<Transaction>> SqliteTransaction::Begin(
    SqliteBackend::Connection& connection) {
  if (connection.owner.load(std::memory_order_relaxed) ==
      std::this_thread::get_id()) {
    return absl::FailedPreconditionError(
        "this thread already has an open transaction of this sqlite backend; "
        "commit or drop it before beginning another");
  }
  connection.mu.Lock();
  connection.owner.store(std::this_thread::get_id(), std::memory_order_relaxed);
  // From here the transaction owns the mutex; its destructor releases it.
  std::unique_ptr<SqliteTransaction> transaction(
      new SqliteTransaction(connection));
  if (connection.borrowed) {
    SLUICE_RETURN_IF_ERROR(transaction->BeginSavepoint());
    return transaction;
  }
  if (!sqlite3_get_autocommit(connection.db.get())) {
    // An earlier ROLLBACK failed; don't build on its leftovers.
    SLUICE_RETURN_IF_ERROR(transaction->ExecuteControl("ROLLBACK", "Begin"));
  }
  SLUICE_RETURN_IF_ERROR(
      transaction->ExecuteControl("BEGIN IMMEDIATE", "Begin"));
  transaction->active_ = true;
  SLUICE_RETURN_IF_ERROR(transaction->CheckKnownRunSeqs());
  return transaction;
}

absl::Status SqliteTransaction::BeginSavepoint() {
  if (sqlite3_get_autocommit(connection_.db.get())) {
    // A SAVEPOINT here would start a transaction of its own, and RELEASE
    // would then commit it behind the host's back.
    return absl::FailedPreconditionError(
        "the host's sqlite connection has no open transaction; run BEGIN "
        "IMMEDIATE on it before enqueuing through it");
  }
  SLUICE_RETURN_IF_ERROR(ExecuteControl(kSavepoint, "Begin"));
  active_ = true;
  return absl::OkStatus();
}

absl::Status SqliteTransaction::Commit() {
  SLUICE_RETURN_IF_ERROR(CheckUsable());
  absl::Status status = ExecuteControl(
      connection_.borrowed ? kReleaseSavepoint : "COMMIT", "Commit");
  if (status.ok()) {
    active_ = false;
    tables_.CommitRunSeqs();
  }
  End();  // a failed COMMIT leaves the transaction open: roll it back
  return status;
}

// Holding the write lock (BEGIN IMMEDIATE), so no other connection can
// commit until this transaction ends.
absl::Status SqliteTransaction::CheckKnownRunSeqs() {
  SLUICE_ASSIGN_OR_RETURN(
      sqlite_internal::Statement version,
      connection_.statements.Prepare("PRAGMA data_version", "Begin"));
  SLUICE_ASSIGN_OR_RETURN(bool row, version.Step());
  const int64_t data_version = row ? version.Int(0) : -1;
  sqlite_internal::KnownRunSeqs& known = connection_.known_seqs;
  if (data_version != known.data_version) {
    known.seqs.clear();
    known.data_version = data_version;
  }
  return absl::OkStatus();
}

void SqliteTransaction::End() {
  if (active_) {
    active_ = false;
    if (!sqlite3_get_autocommit(connection_.db.get())) {
      if (connection_.borrowed) {
        // Undoes Sluice's writes only; the host's transaction goes on.
        ExecuteControl(kRollbackToSavepoint, "Rollback").IgnoreError();
        ExecuteControl(kReleaseSavepoint, "Rollback").IgnoreError();
      } else {
        ExecuteControl("ROLLBACK", "Rollback").IgnoreError();
      }
    }
  }
  if (holds_mutex_) {
    holds_mutex_ = false;
    connection_.owner.store(std::thread::id(), std::memory_order_relaxed);
    connection_.mu.Unlock();
  }
}

absl::Status SqliteTransaction::CheckUsable() const {
  if (!active_) {
    return absl::FailedPreconditionError(
        "sqlite transaction has already ended; begin a new one");
  }
  if (failed_) {
    return absl::FailedPreconditionError(
        "an earlier call of this sqlite transaction failed; drop the "
        "transaction (it rolls back) and retry in a new one");
  }
  if (sqlite3_get_autocommit(connection_.db.get())) {
    // SQLite rolls back by itself after some errors (I/O, disk full).
    return absl::AbortedError(
        "sqlite rolled the transaction back after an error; drop it and "
        "retry");
  }
  return absl::OkStatus();
}

absl::Status SqliteTransaction::ExecuteControl(std::string_view sql,
                                               std::string_view operation) {
  SLUICE_ASSIGN_OR_RETURN(Statement statement,
                          connection_.statements.Prepare(sql, operation));
  return statement.Run();
}

// --- Every operation: checked, forwarded, failure latched -------------------

absl::Status SqliteTransaction::LockFlowSlug(std::string_view) {
  // BEGIN IMMEDIATE already serializes every writer, in every process.
  return Guarded([] { return absl::OkStatus(); });
}

absl::StatusOr<std::optional<FlowRecord>> SqliteTransaction::GetFlow(
    std::string_view flow_slug) {
  return Guarded([&] { return tables_.GetFlow(flow_slug); });
}

absl::Status SqliteTransaction::InsertFlow(const FlowRecord& flow) {
  return Guarded([&] { return tables_.InsertFlow(flow); });
}

absl::StatusOr<std::vector<FlowRecord>> SqliteTransaction::ListFlows() {
  return Guarded([&] { return tables_.ListFlows(); });
}

absl::StatusOr<bool> SqliteTransaction::DeleteFlow(std::string_view flow_slug) {
  return Guarded([&] { return tables_.DeleteFlow(flow_slug); });
}

absl::Status SqliteTransaction::UpdateFlow(const FlowRecord& flow) {
  return Guarded([&] { return tables_.UpdateFlow(flow); });
}

absl::StatusOr<RunCounts> SqliteTransaction::CountRuns(
    std::string_view flow_slug) {
  return Guarded([&] { return tables_.CountRuns(flow_slug); });
}

absl::Status SqliteTransaction::LockAlias(std::string_view) {
  // As LockFlowSlug: BEGIN IMMEDIATE already serializes every writer.
  return Guarded([] { return absl::OkStatus(); });
}

absl::StatusOr<std::optional<AliasRecord>> SqliteTransaction::GetAlias(
    std::string_view alias) {
  return Guarded([&] { return tables_.GetAlias(alias); });
}

absl::Status SqliteTransaction::ExpectAlias(std::string_view alias,
                                            std::string_view active_slug) {
  return Guarded([&] { return tables_.ExpectAlias(alias, active_slug); });
}

absl::Status SqliteTransaction::PutAlias(const AliasRecord& alias) {
  return Guarded([&] { return tables_.PutAlias(alias); });
}

absl::StatusOr<std::vector<AliasRecord>> SqliteTransaction::ListAliases() {
  return Guarded([&] { return tables_.ListAliases(); });
}

absl::StatusOr<std::optional<QueueRecord>> SqliteTransaction::GetQueue(
    std::string_view name) {
  return Guarded([&] { return tables_.GetQueue(name); });
}

absl::StatusOr<bool> SqliteTransaction::QueueExists(std::string_view name) {
  return Guarded([&] { return tables_.QueueExists(name); });
}

absl::Status SqliteTransaction::CreateQueue(const QueueRecord& queue) {
  return Guarded([&] { return tables_.CreateQueue(queue); });
}

absl::StatusOr<bool> SqliteTransaction::DeleteQueue(std::string_view name) {
  return Guarded([&] { return tables_.DeleteQueue(name); });
}

absl::StatusOr<std::vector<QueueRecord>> SqliteTransaction::ListQueues() {
  return Guarded([&] { return tables_.ListQueues(); });
}

absl::Status SqliteTransaction::SetQueuePaused(std::string_view name,
                                               bool paused) {
  return Guarded([&] { return tables_.SetQueuePaused(name, paused); });
}

absl::Status SqliteTransaction::InsertRuns(
    std::span<RunRecord> runs, std::span<const Json* const> inputs) {
  return Guarded([&] {
    SLUICE_RETURN_IF_ERROR(CheckRunInputs(runs.size(), inputs.size()));
    return tables_.InsertRuns(runs, inputs);
  });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
SqliteTransaction::GetRuns(std::span<const RunId> run_ids, LockMode,
                           Fields fields) {
  // BEGIN IMMEDIATE already holds every row.
  return Guarded([&] { return tables_.GetRuns(run_ids, fields); });
}

absl::Status SqliteTransaction::UpdateRuns(std::span<RunRecord> runs) {
  return Guarded([&] { return tables_.UpdateRuns(runs); });
}

absl::StatusOr<std::vector<int>> SqliteTransaction::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  return Guarded([&] { return tables_.AddRunRemainingSteps(deltas); });
}

absl::StatusOr<std::vector<int>> SqliteTransaction::UpdateRunsAndCounters(
    std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  return Guarded([&] { return tables_.UpdateRunsAndCounters(runs, deltas); });
}

absl::StatusOr<std::vector<RunRecord>> SqliteTransaction::ListRuns(
    const RunQuery& query, Fields fields) {
  return Guarded([&] { return tables_.ListRuns(query, fields); });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
SqliteTransaction::FindRunsByKey(std::string_view flow_slug,
                                 std::span<const std::string> external_keys,
                                 Fields fields) {
  return Guarded(
      [&] { return tables_.FindRunsByKey(flow_slug, external_keys, fields); });
}

absl::StatusOr<std::vector<RunRecord>> SqliteTransaction::FindFinishedRuns(
    absl::Time finished_before, int limit) {
  return Guarded(
      [&] { return tables_.FindFinishedRuns(finished_before, limit); });
}

absl::StatusOr<int> SqliteTransaction::DeleteRuns(
    std::span<const RunId> run_ids) {
  return Guarded([&] { return tables_.DeleteRuns(run_ids); });
}

absl::Status SqliteTransaction::InsertStepStates(
    std::span<StepStateRecord> states) {
  return Guarded([&] { return tables_.InsertStepStates(states); });
}

absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
SqliteTransaction::GetStepStates(std::span<const RunId> run_ids,
                                 Fields fields) {
  return Guarded([&] { return tables_.GetStepStates(run_ids, fields); });
}

absl::Status SqliteTransaction::UpdateStepStates(
    std::span<StepStateRecord> states) {
  return Guarded([&] { return tables_.UpdateStepStates(states); });
}

absl::StatusOr<std::vector<StepCounters>> SqliteTransaction::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  return Guarded([&] { return tables_.AddStepCounters(deltas); });
}

absl::Status SqliteTransaction::InsertTasks(std::span<TaskRecord> tasks) {
  return Guarded([&] { return tables_.InsertTasks(tasks); });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
SqliteTransaction::GetTasks(std::span<const TaskKey> keys, Fields fields) {
  return Guarded([&] { return tables_.GetTasks(keys, fields); });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
SqliteTransaction::GetTasksByMessage(std::string_view queue,
                                     std::span<const int64_t> message_ids,
                                     Fields fields) {
  return Guarded(
      [&] { return tables_.GetTasksByMessage(queue, message_ids, fields); });
}

absl::StatusOr<std::vector<bool>> SqliteTransaction::UpdateTasks(
    std::span<TaskUpdate> updates) {
  return Guarded([&] { return tables_.UpdateTasks(updates); });
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTransaction::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, Fields fields) {
  return Guarded(
      [&] { return tables_.GetUnfinishedTasks(run_id, step_index, fields); });
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTransaction::ListTasks(
    const RunId& run_id) {
  return Guarded([&] { return tables_.ListTasks(run_id); });
}

absl::StatusOr<std::vector<StepOutputs>> SqliteTransaction::GetTaskOutputs(
    std::span<const StepRef> steps) {
  return Guarded([&] { return tables_.GetTaskOutputs(steps); });
}

absl::StatusOr<QueueCounts> SqliteTransaction::CountTasks(
    std::string_view queue, absl::Time now, TaskCounts which) {
  return Guarded([&] { return tables_.CountTasks(queue, now, which); });
}

absl::StatusOr<std::vector<TaskRecord>> SqliteTransaction::FindStalledTasks(
    const StalledQuery& query, Fields fields) {
  return Guarded([&] { return tables_.FindStalledTasks(query, fields); });
}

absl::Status SqliteTransaction::AppendAttempts(
    std::span<const AttemptRecord> attempts) {
  return Guarded([&] { return tables_.AppendAttempts(attempts); });
}

absl::StatusOr<std::vector<AttemptRecord>> SqliteTransaction::ListAttempts(
    const RunId& run_id) {
  return Guarded([&] { return tables_.ListAttempts(run_id); });
}

absl::StatusOr<std::optional<DedupeRecord>> SqliteTransaction::GetDedupe(
    std::string_view flow_slug, std::string_view key) {
  // BEGIN IMMEDIATE already holds every row.
  return Guarded([&] { return tables_.GetDedupe(flow_slug, key); });
}

absl::Status SqliteTransaction::PutDedupe(const DedupeRecord& entry) {
  return Guarded([&] { return tables_.PutDedupe(entry); });
}

absl::StatusOr<bool> SqliteTransaction::DeleteDedupe(std::string_view flow_slug,
                                                     std::string_view key,
                                                     const RunId& run_id) {
  return Guarded([&] { return tables_.DeleteDedupe(flow_slug, key, run_id); });
}

absl::StatusOr<int> SqliteTransaction::DeleteExpiredDedupe(absl::Time now,
                                                           int limit) {
  return Guarded([&] { return tables_.DeleteExpiredDedupe(now, limit); });
}

absl::StatusOr<std::vector<int64_t>> SqliteTransaction::AppendReports(
    std::span<const OutboxReport> reports) {
  return Guarded([&] { return tables_.AppendReports(reports); });
}

absl::StatusOr<std::vector<OutboxReport>> SqliteTransaction::TakeReports(
    std::span<const int64_t> report_ids) {
  return Guarded([&] { return tables_.TakeReports(report_ids); });
}

absl::StatusOr<std::vector<OutboxReport>> SqliteTransaction::TakeStaleReports(
    absl::Time created_before, int limit) {
  return Guarded(
      [&] { return tables_.TakeStaleReports(created_before, limit); });
}

absl::StatusOr<int64_t> SqliteTransaction::CountReports() {
  return Guarded([&] { return tables_.CountReports(); });
}

// --- Fan-out children ------------------------------------------------------

absl::Status SqliteTransaction::InsertChildLinks(
    std::span<ChildLinkRecord> links) {
  return Guarded([&] { return tables_.InsertChildLinks(links); });
}

absl::StatusOr<std::vector<ChildLinkRecord>> SqliteTransaction::GetChildLinks(
    const TaskKey& parent, Fields fields) {
  return Guarded([&] { return tables_.GetChildLinks(parent, fields); });
}

absl::StatusOr<ChildCounts> SqliteTransaction::CountChildLinks(
    const TaskKey& parent, int64_t up_to) {
  return Guarded([&] { return tables_.CountChildLinks(parent, up_to); });
}

absl::StatusOr<std::vector<bool>> SqliteTransaction::SettleChildLinks(
    std::span<ChildSettlement> settlements) {
  return Guarded([&] { return tables_.SettleChildLinks(settlements); });
}

absl::StatusOr<int64_t> SqliteTransaction::CancelPendingChildLinks(
    const TaskKey& parent, std::string_view error) {
  return Guarded(
      [&] { return tables_.CancelPendingChildLinks(parent, error); });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
SqliteTransaction::TakeStaleChildLinks(absl::Time pending_before,
                                       absl::Time now, int limit) {
  return Guarded(
      [&] { return tables_.TakeStaleChildLinks(pending_before, now, limit); });
}

absl::StatusOr<std::vector<ChildLinkRecord>>
SqliteTransaction::FindUncascadedChildLinks(int limit) {
  return Guarded([&] { return tables_.FindUncascadedChildLinks(limit); });
}

absl::Status SqliteTransaction::MarkChildLinksCascaded(
    std::span<const ChildLinkRecord> links) {
  return Guarded([&] { return tables_.MarkChildLinksCascaded(links); });
}

absl::StatusOr<std::vector<int64_t>> SqliteTransaction::AppendChildReports(
    std::span<const ChildReport> reports) {
  return Guarded([&] { return tables_.AppendChildReports(reports); });
}

absl::StatusOr<std::vector<ChildReport>> SqliteTransaction::PeekChildReports(
    int64_t after_id, int limit) {
  return Guarded([&] { return tables_.PeekChildReports(after_id, limit); });
}

absl::Status SqliteTransaction::DeleteChildReports(
    std::span<const int64_t> report_ids) {
  return Guarded([&] { return tables_.DeleteChildReports(report_ids); });
}

absl::StatusOr<int64_t> SqliteTransaction::CountChildReports() {
  return Guarded([&] { return tables_.CountChildReports(); });
}

absl::StatusOr<std::vector<int64_t>> SqliteTransaction::SendMessages(
    std::string_view queue, std::span<OutgoingMessage> messages,
    absl::Time now) {
  return Guarded([&] { return tables_.SendMessages(queue, messages, now); });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteTransaction::ReadMessages(
    std::string_view queue, absl::Time now, int limit, absl::Time visible_until,
    Fields fields) {
  return Guarded([&] {
    return tables_.ReadMessages(queue, now, limit, visible_until, fields);
  });
}

absl::Status SqliteTransaction::SetVisibility(
    std::string_view queue, std::span<const VisibilityUpdate> updates) {
  return Guarded([&] { return tables_.SetVisibility(queue, updates); });
}

absl::StatusOr<std::optional<absl::Time>> SqliteTransaction::NextVisibleAt(
    std::string_view queue, absl::Time now) {
  return Guarded([&] { return tables_.NextVisibleAt(queue, now); });
}

absl::Status SqliteTransaction::ArchiveMessages(
    std::string_view queue, std::span<const int64_t> message_ids,
    absl::Time now) {
  return Guarded(
      [&] { return tables_.ArchiveMessages(queue, message_ids, now); });
}

absl::Status SqliteTransaction::DeleteMessages(
    std::string_view queue, std::span<const int64_t> message_ids) {
  return Guarded([&] { return tables_.DeleteMessages(queue, message_ids); });
}

absl::StatusOr<std::optional<MessageLocation>> SqliteTransaction::LookupMessage(
    std::string_view queue, int64_t message_id) {
  return Guarded([&] { return tables_.LookupMessage(queue, message_id); });
}

absl::Status SqliteTransaction::UpsertWorker(const WorkerRecord& worker) {
  return Guarded([&] { return tables_.UpsertWorker(worker); });
}

absl::StatusOr<std::vector<WorkerRecord>> SqliteTransaction::ListWorkers() {
  return Guarded([&] { return tables_.ListWorkers(); });
}

absl::StatusOr<int> SqliteTransaction::DeleteInactiveWorkers(
    absl::Time inactive_before, int limit) {
  return Guarded(
      [&] { return tables_.DeleteInactiveWorkers(inactive_before, limit); });
}

// --- Host transactions ---

absl::Status SqliteTransaction::RunNative(const NativeWrite& write) {
  return Guarded([&]() -> absl::Status {
    absl::Status status =
        write(NativeConnection{"sqlite", connection_.db.get()});
    if (sqlite3_get_autocommit(connection_.db.get())) {
      return absl::FailedPreconditionError(
          "a native write ended the sqlite transaction it ran in (COMMIT or "
          "ROLLBACK); it must leave ending it to Sluice");
    }
    return status;
  });
}

// --- Schedules ---

absl::Status SqliteTransaction::PutSchedule(const ScheduleRecord& schedule) {
  return Guarded([&] { return tables_.PutSchedule(schedule); });
}

absl::StatusOr<std::vector<ScheduleRecord>> SqliteTransaction::ListSchedules(
    std::string_view group) {
  return Guarded([&] { return tables_.ListSchedules(group); });
}

absl::StatusOr<bool> SqliteTransaction::DeleteSchedule(std::string_view group,
                                                       std::string_view name) {
  return Guarded([&] { return tables_.DeleteSchedule(group, name); });
}

absl::StatusOr<bool> SqliteTransaction::AdvanceScheduleCursor(
    std::string_view group, std::string_view name, absl::Time expected,
    absl::Time next) {
  return Guarded([&] {
    return tables_.AdvanceScheduleCursor(group, name, expected, next);
  });
}

}  // namespace sluice::sqlite_internal
