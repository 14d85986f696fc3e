// A transaction on the Postgres backend.
//
// Begin() takes a pooled connection and queues BEGIN (READ COMMITTED); it
// travels with the transaction's first statement, so a transaction costs a
// round trip per statement whose result it needs, plus COMMIT
// (pg_connection.h). Writes the caller needn't wait for are queued and
// checked at the next such statement or at Commit(), which reports the first
// failure with its own code (kAlreadyExists, kNotFound...). Row locks follow
// docs/decisions/0011-postgres-backend.md: runs (ascending id), then step
// states, then tasks, then messages; claims take messages first, with SKIP
// LOCKED, and never wait for a task lock (TaskUpdate::skip_if_locked).
// Advisory locks: an alias (LockAlias) before a slug (LockFlowSlug), as
// backend.h asks; the two are in different key spaces (decision 0026).
//
// After any failed call every further call, Commit() included, fails with
// kFailedPrecondition; dropping the transaction rolls it back. A lost
// connection fails the call with kUnavailable; the connection is discarded
// and the next Begin() connects afresh. A failed Commit() applied nothing,
// except that a connection lost while COMMIT was in flight leaves its
// outcome unknown (kUnavailable, like any lost reply).
//
// Not thread-safe: used by the thread that began it. Begin() on a thread
// that holds a transaction of the same backend fails with
// kFailedPrecondition instead of waiting for a connection it holds itself.
// It must not outlive its backend.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_TRANSACTION_H_
#define SLUICE_BACKENDS_POSTGRES_PG_TRANSACTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pg_pool.h"
#include "pg_tables.h"
#include "sluice/backend.h"
#include "sluice/internal/checked_counters.h"
#include "sluice/internal/one_trip_claims.h"
#include "sluice/internal/one_trip_finishes.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/internal/one_trip_task_writes.h"
#include "sluice/internal/writes_keep_outputs.h"

namespace sluice::postgres_internal {

// The threads that hold an open transaction of one backend. Thread-safe.
class OpenTransactions {
 public:
  // False if `thread` holds one already.
  bool Add(std::thread::id thread) {
    absl::MutexLock lock(&mu_);
    return threads_.insert(thread).second;
  }
  void Remove(std::thread::id thread) {
    absl::MutexLock lock(&mu_);
    threads_.erase(thread);
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

// Offers internal::OneTripClaims: a claim's read of messages and tasks is
// one statement, and its task updates travel with COMMIT; a plain claim is
// one statement travelling with COMMIT. Offers
// internal::OneTripRunReads: a run's view is four reads in one round trip.
// Offers internal::OneTripFinishes: a finish's task updates and its runs'
// read share a round trip.
// Offers internal::OneTripTaskWrites: new tasks and their messages are one
// statement nobody waits for. Offers internal::CheckedCounterMoves: counter
// moves are checked in SQL, and nobody waits for them either.
class PostgresTransaction final : public Transaction,
                                  public internal::OneTripClaims,
                                  public internal::OneTripRunReads,
                                  public internal::OneTripFinishes,
                                  public internal::OneTripTaskWrites,
                                  public internal::CheckedCounterMoves,
                                  public internal::WritesKeepOutputs {
 public:
  // Waits for a pool connection. kFailedPrecondition if this thread holds a
  // transaction of the backend; kUnavailable if no connection can be had.
  // On a borrowed connection (ConnectionSource::borrowed) the transaction
  // is a SAVEPOINT in the host's transaction: Commit() releases it, a drop
  // rolls back to it, and the host's COMMIT or ROLLBACK decides.
  static absl::StatusOr<std::unique_ptr<Transaction>> Begin(
      ConnectionSource& pool, OpenTransactions& open);
  ~PostgresTransaction() override;

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
  absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas) override;

  absl::Status InsertTasks(std::span<TaskRecord> tasks) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields) override;
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<TaskUpdate> updates) override;
  // The updates and COMMIT in one round trip.
  absl::StatusOr<std::vector<bool>> UpdateTasksAndCommit(
      std::span<TaskUpdate> updates) override;
  // The claim, the next visible time and COMMIT in one round trip.
  absl::StatusOr<internal::ServerClaimed> ClaimAndCommit(
      const internal::ServerClaim& claim) override;
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

  // --- Fan-out children (pg_tables_children.cc) ---
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
  absl::Status SendMessagesAndInsertTasks(std::string_view queue,
                                          std::span<OutgoingMessage> messages,
                                          std::span<TaskRecord> tasks,
                                          absl::Time now) override;
  absl::StatusOr<std::optional<internal::RunWithParts>> ReadRunWithParts(
      const RunId& run_id) override;
  absl::Status UpdateRunsAndCheckCounters(
      std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas,
      std::span<const int> expected) override;
  absl::Status UpdateStepStatesAndCheckCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas,
      std::span<const StepCounters> expected) override;
  absl::Status AddRunRemainingStepsChecked(
      std::span<const RunCounterDelta> deltas,
      std::span<const int> expected) override;
  absl::Status AddStepCountersChecked(
      std::span<const StepCounterDelta> deltas,
      std::span<const StepCounters> expected) override;

  absl::StatusOr<Updated> UpdateTasksThenReadRuns(
      std::span<TaskUpdate> updates, std::span<const RunId> run_ids,
      LockMode lock, Fields fields) override;

  absl::StatusOr<internal::RunsWithSteps> ReadRunsWithSteps(
      std::span<const RunId> run_ids, LockMode lock, Fields fields) override;
  absl::StatusOr<internal::MessagesWithTasks> ReadMessagesWithTasks(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields task_fields) override;
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
  PostgresTransaction(ConnectionSource& pool, OpenTransactions& open,
                      std::unique_ptr<Connection> connection);

  // Runs `operation` (returning absl::Status or absl::StatusOr) if the
  // transaction is usable, and latches its failure: backend.h makes a
  // transaction unusable after any failed call.
  template <typename Operation>
  auto Guarded(Operation operation) -> decltype(operation());

  // COMMIT, or on a borrowed connection RELEASE SAVEPOINT.
  std::string CommitStatement() const;
  // Ends the transaction after its commit statement was sent: `status` is
  // how the round trip went, `commit` the commit statement's result.
  absl::Status Committed(absl::Status status, const Result& commit);
  // OK while the transaction can take calls; kFailedPrecondition once it
  // has ended or a call has failed.
  absl::Status CheckUsable() const;
  // Rolls back unless committed, then hands the connection back.
  void End();

  ConnectionSource& pool_;
  OpenTransactions& open_;
  std::thread::id thread_;
  std::unique_ptr<Connection> connection_;
  PgTables tables_;
  bool active_ = true;   // no COMMIT or ROLLBACK yet
  bool failed_ = false;  // a call failed: only dropping remains
};

template <typename Operation>
auto PostgresTransaction::Guarded(Operation operation)
    -> decltype(operation()) {
  if (absl::Status usable = CheckUsable(); !usable.ok()) return usable;
  auto result = operation();
  if (!result.ok()) failed_ = true;
  return result;
}

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_TRANSACTION_H_
