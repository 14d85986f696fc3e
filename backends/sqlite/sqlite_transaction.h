// A transaction on the SQLite backend.
//
// Begin() takes the connection's mutex and runs BEGIN IMMEDIATE, so the
// transaction holds SQLite's write lock from its start: transactions are
// serializable, nothing is ever skipped as "held by another transaction",
// and LockMode / LockFlowSlug need no extra work. Lock order: the
// connection's mutex, then SQLite's write lock; nothing else is locked.
// Commit() or destruction ends the transaction (ROLLBACK unless committed)
// and releases the mutex. On a borrowed host connection
// (SqliteBackend::Borrow) the transaction is a SAVEPOINT inside the host's
// open transaction instead: Commit() releases it, a drop rolls back to it,
// and the host's COMMIT or ROLLBACK decides.
//
// After any failed call every further call, Commit() included, fails with
// kFailedPrecondition, so a batch that failed part-way (a duplicate key in
// its third row) can never be committed; dropping the transaction rolls it
// all back. The table operations themselves live in SqliteTables.
//
// Not thread-safe: used by the thread that began it (backend.h), which also
// ends it (Commit() or drop): it holds an absl::Mutex, and absl's
// debug-build deadlock detection aborts on an unlock by another thread.
// Begin() on a thread that already holds a transaction of the same backend
// fails with kFailedPrecondition instead of waiting for itself. It must not
// outlive its backend.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_TRANSACTION_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_TRANSACTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/internal/writes_keep_outputs.h"
#include "sqlite_backend.h"
#include "sqlite_statement.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {

class SqliteTransaction final : public Transaction,
                                public internal::WritesKeepOutputs {
 public:
  // Waits for the connection's mutex (other threads' transactions), then for
  // SQLite's write lock (other processes, up to the busy timeout).
  // kFailedPrecondition if this thread holds the mutex already.
  static absl::StatusOr<std::unique_ptr<Transaction>> Begin(
      SqliteBackend::Connection& connection);
  ~SqliteTransaction() override;

  absl::Status Commit() override;

  absl::Status LockFlowSlug(std::string_view flow_slug) override;
  absl::StatusOr<std::optional<FlowRecord>> GetFlow(
      std::string_view flow_slug) override;
  absl::Status InsertFlow(const FlowRecord& flow) override;
  absl::StatusOr<std::vector<FlowRecord>> ListFlows() override;
  absl::StatusOr<bool> DeleteFlow(std::string_view flow_slug) override;
  absl::Status UpdateFlow(const FlowRecord& flow) override;
  absl::StatusOr<RunCounts> CountRuns(std::string_view flow_slug) override;
  absl::Status LockAlias(std::string_view alias) override;
  absl::StatusOr<std::optional<AliasRecord>> GetAlias(
      std::string_view alias) override;
  absl::Status ExpectAlias(std::string_view alias,
                           std::string_view active_slug) override;
  absl::Status PutAlias(const AliasRecord& alias) override;
  absl::StatusOr<std::vector<AliasRecord>> ListAliases() override;
  absl::StatusOr<bool> DeleteQueue(std::string_view name) override;
  absl::StatusOr<std::optional<QueueRecord>> GetQueue(
      std::string_view name) override;
  absl::StatusOr<bool> QueueExists(std::string_view name) override;
  absl::Status CreateQueue(const QueueRecord& queue) override;
  absl::StatusOr<std::vector<QueueRecord>> ListQueues() override;
  absl::Status SetQueuePaused(std::string_view name, bool paused) override;

  using Transaction::InsertRuns;
  absl::Status InsertRuns(std::span<RunRecord> runs,
                          std::span<const Json* const> inputs) override;
  absl::StatusOr<std::vector<std::optional<RunRecord>>> GetRuns(
      std::span<const RunId> run_ids, LockMode lock, Fields fields) override;
  absl::Status UpdateRuns(std::span<RunRecord> runs) override;
  absl::StatusOr<std::vector<int>> AddRunRemainingSteps(
      std::span<const RunCounterDelta> deltas) override;
  absl::StatusOr<std::vector<int>> UpdateRunsAndCounters(
      std::span<RunRecord> runs,
      std::span<const RunCounterDelta> deltas) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunQuery& query,
                                                  Fields fields) override;
  absl::StatusOr<std::vector<std::optional<RunRecord>>> FindRunsByKey(
      std::string_view flow_slug, std::span<const std::string> external_keys,
      Fields fields) override;
  absl::StatusOr<std::vector<RunRecord>> FindFinishedRuns(
      absl::Time finished_before, int limit) override;
  absl::StatusOr<int> DeleteRuns(std::span<const RunId> run_ids) override;

  absl::Status InsertStepStates(std::span<StepStateRecord> states) override;
  absl::StatusOr<std::vector<std::vector<StepStateRecord>>> GetStepStates(
      std::span<const RunId> run_ids, Fields fields) override;
  absl::Status UpdateStepStates(std::span<StepStateRecord> states) override;
  absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas) override;

  absl::Status InsertTasks(std::span<TaskRecord> tasks) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields) override;
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<TaskUpdate> updates) override;
  absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index,
      Fields fields) override;
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(
      const RunId& run_id) override;
  absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
      std::span<const StepRef> steps) override;
  absl::StatusOr<QueueCounts> CountTasks(std::string_view queue, absl::Time now,
                                         TaskCounts which) override;
  absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(
      const StalledQuery& query, Fields fields) override;

  absl::Status AppendAttempts(std::span<const AttemptRecord> attempts) override;
  absl::StatusOr<std::vector<AttemptRecord>> ListAttempts(
      const RunId& run_id) override;

  absl::StatusOr<std::optional<DedupeRecord>> GetDedupe(
      std::string_view flow_slug, std::string_view key) override;
  absl::Status PutDedupe(const DedupeRecord& entry) override;
  absl::StatusOr<bool> DeleteDedupe(std::string_view flow_slug,
                                    std::string_view key,
                                    const RunId& run_id) override;
  absl::StatusOr<int> DeleteExpiredDedupe(absl::Time now, int limit) override;

  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports) override;
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids) override;
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit) override;
  absl::StatusOr<int64_t> CountReports() override;

  // --- Fan-out children (sqlite_tables_children.cc) ---
  absl::Status InsertChildLinks(std::span<ChildLinkRecord> links) override;
  absl::StatusOr<std::vector<ChildLinkRecord>> GetChildLinks(
      const TaskKey& parent, Fields fields) override;
  absl::StatusOr<ChildCounts> CountChildLinks(const TaskKey& parent,
                                              int64_t up_to) override;
  absl::StatusOr<std::vector<bool>> SettleChildLinks(
      std::span<ChildSettlement> settlements) override;
  absl::StatusOr<int64_t> CancelPendingChildLinks(
      const TaskKey& parent, std::string_view error) override;
  absl::StatusOr<std::vector<ChildLinkRecord>> TakeStaleChildLinks(
      absl::Time pending_before, absl::Time now, int limit) override;
  absl::StatusOr<std::vector<ChildLinkRecord>> FindUncascadedChildLinks(
      int limit) override;
  absl::Status MarkChildLinksCascaded(
      std::span<const ChildLinkRecord> links) override;
  absl::StatusOr<std::vector<int64_t>> AppendChildReports(
      std::span<const ChildReport> reports) override;
  absl::StatusOr<std::vector<ChildReport>> PeekChildReports(int64_t after_id,
                                                            int limit) override;
  absl::Status DeleteChildReports(std::span<const int64_t> report_ids) override;
  absl::StatusOr<int64_t> CountChildReports() override;

  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<OutgoingMessage> messages,
      absl::Time now) override;
  absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields fields) override;
  absl::Status SetVisibility(
      std::string_view queue,
      std::span<const VisibilityUpdate> updates) override;
  absl::StatusOr<std::optional<absl::Time>> NextVisibleAt(
      std::string_view queue, absl::Time now) override;
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now) override;
  absl::Status DeleteMessages(std::string_view queue,
                              std::span<const int64_t> message_ids) override;
  absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id) override;

  absl::Status UpsertWorker(const WorkerRecord& worker) override;
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers() override;
  absl::StatusOr<int> DeleteInactiveWorkers(absl::Time inactive_before,
                                            int limit) override;

  // --- Host transactions ---
  absl::Status RunNative(const NativeWrite& write) override;
  // --- Schedules ---
  absl::Status PutSchedule(const ScheduleRecord& schedule) override;
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(
      std::string_view group) override;
  absl::StatusOr<bool> DeleteSchedule(std::string_view group,
                                      std::string_view name) override;
  absl::StatusOr<bool> AdvanceScheduleCursor(std::string_view group,
                                             std::string_view name,
                                             absl::Time expected,
                                             absl::Time next) override;

 private:
  // REQUIRES: the caller holds connection.mu; the transaction releases it.
  explicit SqliteTransaction(SqliteBackend::Connection& connection);

  // Runs `operation` (returning absl::Status or absl::StatusOr) if the
  // transaction is usable, and latches its failure: backend.h makes a
  // transaction unusable after any failed call.
  template <typename Operation>
  auto Guarded(Operation operation) -> decltype(operation());

  // OK while the transaction can take calls. kFailedPrecondition once it has
  // ended or a call has failed; kAborted if SQLite rolled it back by itself.
  absl::Status CheckUsable() const;
  // A borrowed connection's Begin(): a savepoint in the host's transaction.
  absl::Status BeginSavepoint();
  // Forgets the connection's known run seqs if another connection has
  // committed since they were kept.
  absl::Status CheckKnownRunSeqs();
  // BEGIN / COMMIT / ROLLBACK.
  absl::Status ExecuteControl(std::string_view sql, std::string_view operation);
  // Rolls back unless done, then releases the connection's mutex.
  void End();

  SqliteBackend::Connection& connection_;
  SqliteTables tables_;
  bool active_ = false;      // BEGIN succeeded; no COMMIT or ROLLBACK yet
  bool failed_ = false;      // a call failed: only dropping remains
  bool holds_mutex_ = true;  // connection_.mu is held by this transaction
};

template <typename Operation>
auto SqliteTransaction::Guarded(Operation operation) -> decltype(operation()) {
  if (absl::Status usable = CheckUsable(); !usable.ok()) return usable;
  auto result = operation();
  if (!result.ok()) failed_ = true;
  return result;
}

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_TRANSACTION_H_
