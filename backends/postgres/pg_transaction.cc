#include "pg_transaction.h"

#include <utility>

#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::postgres_internal {

namespace {

// A borrowed connection's transaction (pg_borrowed.h).
constexpr char kSavepoint[] = "sluice_host";

}  // namespace

PostgresTransaction::PostgresTransaction(ConnectionSource& pool,
                                         OpenTransactions& open,
                                         std::unique_ptr<Connection> connection)
    : pool_(pool),
      open_(open),
      thread_(std::this_thread::get_id()),
      connection_(std::move(connection)),
      tables_(*connection_) {}

PostgresTransaction::~PostgresTransaction() { End(); }

absl::StatusOr<std::unique_ptr<Transaction>> PostgresTransaction::Begin(
    ConnectionSource& pool, OpenTransactions& open) {
  const std::thread::id thread = std::this_thread::get_id();
  if (!open.Add(thread)) {
    return absl::FailedPreconditionError(
        "this thread already has an open transaction of this postgres "
        "backend; commit or drop it before beginning another");
  }
  absl::StatusOr<std::unique_ptr<Connection>> connection = pool.Acquire();
  if (!connection.ok()) {
    open.Remove(thread);
    return connection.status();
  }
  // BEGIN (or SAVEPOINT) travels with the first statement.
  (*connection)
      ->SendControl(pool.borrowed()
                        ? StrCat("SAVEPOINT ", kSavepoint)
                        : std::string("BEGIN ISOLATION LEVEL READ COMMITTED"),
                    {"Begin", {}});
  return std::unique_ptr<Transaction>(
      new PostgresTransaction(pool, open, std::move(*connection)));
}

absl::Status PostgresTransaction::Commit() {
  SLUICE_RETURN_IF_ERROR(CheckUsable());
  // COMMIT travels with the writes still queued, and drains them.
  absl::StatusOr<Result> commit =
      connection_->QueryControl(CommitStatement(), {"Commit", {}});
  if (!commit.ok()) return Committed(commit.status(), Result());
  return Committed(absl::OkStatus(), *commit);
}

absl::StatusOr<std::vector<bool>> PostgresTransaction::UpdateTasksAndCommit(
    std::span<TaskUpdate> updates) {
  SLUICE_RETURN_IF_ERROR(CheckUsable());
  const std::string commit_sql = CommitStatement();
  Result commit;
  const PgTables::Control then{commit_sql, &commit};
  absl::StatusOr<std::vector<bool>> applied =
      tables_.UpdateTasks(updates, &then);
  SLUICE_RETURN_IF_ERROR(Committed(applied.status(), commit));
  return applied;
}

absl::StatusOr<internal::ServerClaimed> PostgresTransaction::ClaimAndCommit(
    const internal::ServerClaim& claim) {
  SLUICE_RETURN_IF_ERROR(CheckUsable());
  const std::string commit_sql = CommitStatement();
  Result commit;
  absl::StatusOr<internal::ServerClaimed> claimed =
      tables_.ClaimOnServer(claim, {commit_sql, &commit});
  SLUICE_RETURN_IF_ERROR(Committed(claimed.status(), commit));
  return claimed;
}

std::string PostgresTransaction::CommitStatement() const {
  return pool_.borrowed() ? StrCat("RELEASE SAVEPOINT ", kSavepoint)
                          : std::string("COMMIT");
}

absl::Status PostgresTransaction::Committed(absl::Status status,
                                            const Result& commit) {
  if (status.ok() &&
      commit.command_status() !=
          std::string_view(pool_.borrowed() ? "RELEASE" : "COMMIT")) {
    // The server had already aborted the transaction.
    status = absl::AbortedError(
        "postgres Commit: the server rolled the transaction back; retry it");
  }
  if (status.ok()) active_ = false;
  failed_ = !status.ok();
  End();
  return status;
}

void PostgresTransaction::End() {
  if (connection_ == nullptr) return;
  if (active_) {
    active_ = false;
    // Also ends a transaction whose COMMIT was skipped after an error.
    if (pool_.borrowed()) {
      connection_->RollbackToSavepoint(kSavepoint);
    } else {
      connection_->Rollback();
    }
  }
  pool_.Release(std::move(connection_));
  open_.Remove(thread_);
}

absl::Status PostgresTransaction::CheckUsable() const {
  if (!active_ || connection_ == nullptr) {
    return absl::FailedPreconditionError(
        "postgres transaction has already ended; begin a new one");
  }
  if (failed_) {
    return absl::FailedPreconditionError(
        "an earlier call of this postgres transaction failed; drop the "
        "transaction (it rolls back) and retry in a new one");
  }
  return absl::OkStatus();
}

// --- Every operation: checked, forwarded, failure latched -------------------

absl::Status PostgresTransaction::LockFlowSlug(std::string_view flow_slug) {
  return Guarded([&] { return tables_.LockFlowSlug(flow_slug); });
}

absl::StatusOr<std::optional<FlowRecord>> PostgresTransaction::GetFlow(
    std::string_view flow_slug) {
  return Guarded([&] { return tables_.GetFlow(flow_slug); });
}

absl::Status PostgresTransaction::InsertFlow(const FlowRecord& flow) {
  return Guarded([&] { return tables_.InsertFlow(flow); });
}

absl::StatusOr<std::vector<FlowRecord>> PostgresTransaction::ListFlows() {
  return Guarded([&] { return tables_.ListFlows(); });
}

absl::StatusOr<bool> PostgresTransaction::DeleteFlow(
    std::string_view flow_slug) {
  return Guarded([&] { return tables_.DeleteFlow(flow_slug); });
}

absl::Status PostgresTransaction::UpdateFlow(const FlowRecord& flow) {
  return Guarded([&] { return tables_.UpdateFlow(flow); });
}

absl::StatusOr<RunCounts> PostgresTransaction::CountRuns(
    std::string_view flow_slug) {
  return Guarded([&] { return tables_.CountRuns(flow_slug); });
}

absl::Status PostgresTransaction::LockAlias(std::string_view alias) {
  return Guarded([&] { return tables_.LockAlias(alias); });
}

absl::StatusOr<std::optional<AliasRecord>> PostgresTransaction::GetAlias(
    std::string_view alias) {
  return Guarded([&] { return tables_.GetAlias(alias); });
}

absl::Status PostgresTransaction::ExpectAlias(std::string_view alias,
                                              std::string_view active_slug) {
  return Guarded([&] { return tables_.ExpectAlias(alias, active_slug); });
}

absl::Status PostgresTransaction::PutAlias(const AliasRecord& alias) {
  return Guarded([&] { return tables_.PutAlias(alias); });
}

absl::StatusOr<std::vector<AliasRecord>> PostgresTransaction::ListAliases() {
  return Guarded([&] { return tables_.ListAliases(); });
}

absl::StatusOr<std::optional<QueueRecord>> PostgresTransaction::GetQueue(
    std::string_view name) {
  return Guarded([&] { return tables_.GetQueue(name); });
}

absl::StatusOr<bool> PostgresTransaction::QueueExists(std::string_view name) {
  return Guarded([&] { return tables_.QueueExists(name); });
}

absl::Status PostgresTransaction::CreateQueue(const QueueRecord& queue) {
  return Guarded([&] { return tables_.CreateQueue(queue); });
}

absl::StatusOr<std::vector<QueueRecord>> PostgresTransaction::ListQueues() {
  return Guarded([&] { return tables_.ListQueues(); });
}

absl::Status PostgresTransaction::SetQueuePaused(std::string_view name,
                                                 bool paused) {
  return Guarded([&] { return tables_.SetQueuePaused(name, paused); });
}

absl::StatusOr<bool> PostgresTransaction::DeleteQueue(std::string_view name) {
  return Guarded([&] { return tables_.DeleteQueue(name); });
}

absl::Status PostgresTransaction::InsertRuns(
    std::span<RunRecord> runs, std::span<const Json* const> inputs) {
  return Guarded([&] {
    SLUICE_RETURN_IF_ERROR(CheckRunInputs(runs.size(), inputs.size()));
    return tables_.InsertRuns(runs, inputs);
  });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
PostgresTransaction::GetRuns(std::span<const RunId> run_ids, LockMode lock,
                             Fields fields) {
  return Guarded([&] { return tables_.GetRuns(run_ids, lock, fields); });
}

absl::Status PostgresTransaction::UpdateRuns(std::span<RunRecord> runs) {
  return Guarded([&] { return tables_.UpdateRuns(runs); });
}

absl::StatusOr<std::vector<int>> PostgresTransaction::AddRunRemainingSteps(
    std::span<const RunCounterDelta> deltas) {
  return Guarded([&] { return tables_.AddRunRemainingSteps(deltas); });
}

absl::StatusOr<std::vector<int>> PostgresTransaction::UpdateRunsAndCounters(
    std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas) {
  return Guarded([&] { return tables_.UpdateRunsAndCounters(runs, deltas); });
}

absl::Status PostgresTransaction::UpdateRunsAndCheckCounters(
    std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas,
    std::span<const int> expected) {
  return Guarded([&] {
    return tables_.UpdateRunsAndCheckCounters(runs, deltas, expected);
  });
}

absl::Status PostgresTransaction::UpdateStepStatesAndCheckCounters(
    std::span<StepStateRecord> states, std::span<const StepCounterDelta> deltas,
    std::span<const StepCounters> expected) {
  return Guarded([&] {
    return tables_.UpdateStepStatesAndCheckCounters(states, deltas, expected);
  });
}

absl::Status PostgresTransaction::AddRunRemainingStepsChecked(
    std::span<const RunCounterDelta> deltas, std::span<const int> expected) {
  return Guarded(
      [&] { return tables_.AddRunRemainingStepsChecked(deltas, expected); });
}

absl::Status PostgresTransaction::AddStepCountersChecked(
    std::span<const StepCounterDelta> deltas,
    std::span<const StepCounters> expected) {
  return Guarded(
      [&] { return tables_.AddStepCountersChecked(deltas, expected); });
}

absl::StatusOr<std::vector<RunRecord>> PostgresTransaction::ListRuns(
    const RunQuery& query, Fields fields) {
  return Guarded([&] { return tables_.ListRuns(query, fields); });
}

absl::StatusOr<std::vector<std::optional<RunRecord>>>
PostgresTransaction::FindRunsByKey(std::string_view flow_slug,
                                   std::span<const std::string> external_keys,
                                   Fields fields) {
  return Guarded(
      [&] { return tables_.FindRunsByKey(flow_slug, external_keys, fields); });
}

absl::StatusOr<std::vector<RunRecord>> PostgresTransaction::FindFinishedRuns(
    absl::Time finished_before, int limit) {
  return Guarded(
      [&] { return tables_.FindFinishedRuns(finished_before, limit); });
}

absl::StatusOr<int> PostgresTransaction::DeleteRuns(
    std::span<const RunId> run_ids) {
  return Guarded([&] { return tables_.DeleteRuns(run_ids); });
}

absl::Status PostgresTransaction::InsertStepStates(
    std::span<StepStateRecord> states) {
  return Guarded([&] { return tables_.InsertStepStates(states); });
}

absl::StatusOr<std::vector<std::vector<StepStateRecord>>>
PostgresTransaction::GetStepStates(std::span<const RunId> run_ids,
                                   Fields fields) {
  return Guarded([&] { return tables_.GetStepStates(run_ids, fields); });
}

absl::Status PostgresTransaction::UpdateStepStates(
    std::span<StepStateRecord> states) {
  return Guarded([&] { return tables_.UpdateStepStates(states); });
}

absl::StatusOr<std::vector<StepCounters>> PostgresTransaction::AddStepCounters(
    std::span<const StepCounterDelta> deltas) {
  return Guarded([&] { return tables_.AddStepCounters(deltas); });
}

absl::StatusOr<std::vector<StepCounters>>
PostgresTransaction::UpdateStepStatesAndCounters(
    std::span<StepStateRecord> states,
    std::span<const StepCounterDelta> deltas) {
  return Guarded(
      [&] { return tables_.UpdateStepStatesAndCounters(states, deltas); });
}

absl::Status PostgresTransaction::InsertTasks(std::span<TaskRecord> tasks) {
  return Guarded([&] { return tables_.InsertTasks(tasks); });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
PostgresTransaction::GetTasks(std::span<const TaskKey> keys, Fields fields) {
  return Guarded([&] { return tables_.GetTasks(keys, fields); });
}

absl::StatusOr<std::vector<std::optional<TaskRecord>>>
PostgresTransaction::GetTasksByMessage(std::string_view queue,
                                       std::span<const int64_t> message_ids,
                                       Fields fields) {
  return Guarded(
      [&] { return tables_.GetTasksByMessage(queue, message_ids, fields); });
}

absl::StatusOr<std::vector<bool>> PostgresTransaction::UpdateTasks(
    std::span<TaskUpdate> updates) {
  return Guarded([&] { return tables_.UpdateTasks(updates); });
}

absl::StatusOr<std::vector<TaskRecord>> PostgresTransaction::GetUnfinishedTasks(
    const RunId& run_id, std::optional<int> step_index, Fields fields) {
  return Guarded(
      [&] { return tables_.GetUnfinishedTasks(run_id, step_index, fields); });
}

absl::StatusOr<std::vector<TaskRecord>> PostgresTransaction::ListTasks(
    const RunId& run_id) {
  return Guarded([&] { return tables_.ListTasks(run_id); });
}

absl::StatusOr<std::vector<StepOutputs>> PostgresTransaction::GetTaskOutputs(
    std::span<const StepRef> steps) {
  return Guarded([&] { return tables_.GetTaskOutputs(steps); });
}

absl::StatusOr<std::vector<TaskRecord>> PostgresTransaction::FindStalledTasks(
    const StalledQuery& query, Fields fields) {
  return Guarded([&] { return tables_.FindStalledTasks(query, fields); });
}

absl::StatusOr<QueueCounts> PostgresTransaction::CountTasks(
    std::string_view queue, absl::Time now, TaskCounts which) {
  return Guarded([&] { return tables_.CountTasks(queue, now, which); });
}

absl::Status PostgresTransaction::AppendAttempts(
    std::span<const AttemptRecord> attempts) {
  return Guarded([&] { return tables_.AppendAttempts(attempts); });
}

absl::StatusOr<std::vector<AttemptRecord>> PostgresTransaction::ListAttempts(
    const RunId& run_id) {
  return Guarded([&] { return tables_.ListAttempts(run_id); });
}

absl::StatusOr<std::optional<DedupeRecord>> PostgresTransaction::GetDedupe(
    std::string_view flow_slug, std::string_view key) {
  return Guarded([&] { return tables_.GetDedupe(flow_slug, key); });
}

absl::Status PostgresTransaction::PutDedupe(const DedupeRecord& entry) {
  return Guarded([&] { return tables_.PutDedupe(entry); });
}

absl::StatusOr<bool> PostgresTransaction::DeleteDedupe(
    std::string_view flow_slug, std::string_view key, const RunId& run_id) {
  return Guarded([&] { return tables_.DeleteDedupe(flow_slug, key, run_id); });
}

absl::StatusOr<int> PostgresTransaction::DeleteExpiredDedupe(absl::Time now,
                                                             int limit) {
  return Guarded([&] { return tables_.DeleteExpiredDedupe(now, limit); });
}

absl::StatusOr<std::vector<int64_t>> PostgresTransaction::AppendReports(
    std::span<const OutboxReport> reports) {
  return Guarded([&] { return tables_.AppendReports(reports); });
}

absl::StatusOr<std::vector<OutboxReport>> PostgresTransaction::TakeReports(
    std::span<const int64_t> report_ids) {
  return Guarded([&] { return tables_.TakeReports(report_ids); });
}

absl::StatusOr<std::vector<OutboxReport>> PostgresTransaction::TakeStaleReports(
    absl::Time created_before, int limit) {
  return Guarded(
      [&] { return tables_.TakeStaleReports(created_before, limit); });
}

absl::StatusOr<int64_t> PostgresTransaction::CountReports() {
  return Guarded([&] { return tables_.CountReports(); });
}

}  // namespace sluice::postgres_internal
