// Typed reads and writes of the SQLite backend's tables, run on the
// connection's open transaction. Lives as long as that transaction:
// SqliteTransaction owns the transaction, checks that it is usable before
// each call, and latches failures (see sqlite_transaction.h). Each method
// has the contract of the Transaction method of the same name (backend.h).
//
// Step states and tasks are keyed by their run's seq (sqlite_schema_parts.h).
// The transaction holds SQLite's write lock, so a run's seq can't change
// under it: the seqs it has looked up or assigned are remembered until it
// ends, and a batch looks up only the runs it hasn't seen, in one query.
//
// Sources: flows, queues, workers and run seqs in sqlite_tables.cc; the
// v5 calls (aliases, flow updates and deletion, run counts, queue deletion)
// in sqlite_tables_versions.cc; runs,
// step states and retention in sqlite_tables_runs.cc; listing runs and
// finding them by key in sqlite_tables_listing.cc; tasks and the outbox in
// sqlite_tables_tasks.cc; fan-out child links and reports in
// sqlite_tables_children.cc; queue messages in sqlite_tables_messages.cc; the
// attempts ledger, the dedupe registry and counts in sqlite_tables_jobs.cc.
//
// REQUIRES: the connection's mutex is held and a transaction is open.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/internal/counter_batch.h"
#include "sluice/records.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal {

// The run id of each record, in order.
template <typename Record, typename Projection>
std::vector<RunId> RunIdsOf(std::span<const Record> records,
                            Projection run_id_of) {
  std::vector<RunId> run_ids;
  run_ids.reserve(records.size());
  for (const Record& record : records) run_ids.push_back(run_id_of(record));
  return run_ids;
}

// The seqs of runs as of a connection's last commit, kept across its
// transactions so that a task's updates need not look its run up again
// (decision 0088). Valid while no other connection has committed since:
// `data_version` is `PRAGMA data_version` as its transactions last read it,
// which other connections' commits change and the connection's own do not.
struct KnownRunSeqs {
  // Forgotten all at once past this many, rather than tracking age.
  static constexpr size_t kMaxRuns = 100'000;
  absl::flat_hash_map<RunId, int64_t> seqs;
  int64_t data_version = -1;
};

class SqliteTables {
 public:
  // `known`, if given, holds the seqs committed before this transaction
  // began (checked against other connections' commits by the caller), and
  // CommitRunSeqs adds this transaction's to it.
  explicit SqliteTables(StatementCache& statements,
                        KnownRunSeqs* known = nullptr)
      : statements_(statements), known_(known) {}

  // After this transaction committed: its lookups, inserts and deletes of
  // runs, applied to the connection's known seqs, if it keeps them.
  void CommitRunSeqs();

  absl::StatusOr<std::optional<FlowRecord>> GetFlow(std::string_view flow_slug);
  absl::Status InsertFlow(const FlowRecord& flow);
  absl::StatusOr<std::vector<FlowRecord>> ListFlows();
  absl::StatusOr<bool> DeleteFlow(std::string_view flow_slug);
  absl::Status UpdateFlow(const FlowRecord& flow);
  absl::StatusOr<RunCounts> CountRuns(std::string_view flow_slug);
  absl::StatusOr<std::optional<AliasRecord>> GetAlias(std::string_view alias);
  absl::Status ExpectAlias(std::string_view alias,
                           std::string_view active_slug);
  absl::Status PutAlias(const AliasRecord& alias);
  absl::StatusOr<std::vector<AliasRecord>> ListAliases();
  absl::StatusOr<std::optional<QueueRecord>> GetQueue(std::string_view name);
  absl::StatusOr<bool> QueueExists(std::string_view name);
  absl::Status CreateQueue(const QueueRecord& queue);
  absl::StatusOr<std::vector<QueueRecord>> ListQueues();
  absl::Status SetQueuePaused(std::string_view name, bool paused);
  absl::StatusOr<bool> DeleteQueue(std::string_view name);

  absl::Status InsertRuns(std::span<const RunRecord> runs,
                          std::span<const Json* const> inputs);
  absl::StatusOr<std::vector<std::optional<RunRecord>>> GetRuns(
      std::span<const RunId> run_ids, Fields fields);
  absl::Status UpdateRuns(std::span<const RunRecord> runs);
  absl::StatusOr<std::vector<int>> AddRunRemainingSteps(
      std::span<const RunCounterDelta> deltas);
  absl::StatusOr<std::vector<int>> UpdateRunsAndCounters(
      std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunQuery& query,
                                                  Fields fields);
  absl::StatusOr<std::vector<std::optional<RunRecord>>> FindRunsByKey(
      std::string_view flow_slug, std::span<const std::string> external_keys,
      Fields fields);
  absl::StatusOr<std::vector<RunRecord>> FindFinishedRuns(
      absl::Time finished_before, int limit);
  absl::StatusOr<int> DeleteRuns(std::span<const RunId> run_ids);

  absl::Status InsertStepStates(std::span<const StepStateRecord> states);
  absl::StatusOr<std::vector<std::vector<StepStateRecord>>> GetStepStates(
      std::span<const RunId> run_ids, Fields fields);
  absl::Status UpdateStepStates(std::span<const StepStateRecord> states);
  absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas);

  absl::Status InsertTasks(std::span<const TaskRecord> tasks);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields);
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<const TaskUpdate> updates);
  absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index, Fields fields);
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(const RunId& run_id);
  absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
      std::span<const StepRef> steps);
  absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(
      const StalledQuery& query, Fields fields);
  absl::StatusOr<QueueCounts> CountTasks(std::string_view queue, absl::Time now,
                                         TaskCounts which);

  absl::Status AppendAttempts(std::span<const AttemptRecord> attempts);
  absl::StatusOr<std::vector<AttemptRecord>> ListAttempts(const RunId& run_id);

  absl::StatusOr<std::optional<DedupeRecord>> GetDedupe(
      std::string_view flow_slug, std::string_view key);
  absl::Status PutDedupe(const DedupeRecord& entry);
  absl::StatusOr<bool> DeleteDedupe(std::string_view flow_slug,
                                    std::string_view key, const RunId& run_id);
  absl::StatusOr<int> DeleteExpiredDedupe(absl::Time now, int limit);

  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports);
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids);
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit);
  absl::StatusOr<int64_t> CountReports();

  // Fan-out children (sqlite_tables_children.cc).
  absl::Status InsertChildLinks(std::span<const ChildLinkRecord> links);
  absl::StatusOr<std::vector<ChildLinkRecord>> GetChildLinks(
      const TaskKey& parent, Fields fields);
  absl::StatusOr<ChildCounts> CountChildLinks(const TaskKey& parent,
                                              int64_t up_to);
  absl::StatusOr<std::vector<bool>> SettleChildLinks(
      std::span<const ChildSettlement> settlements);
  absl::StatusOr<int64_t> CancelPendingChildLinks(const TaskKey& parent,
                                                  std::string_view error);
  absl::StatusOr<std::vector<ChildLinkRecord>> TakeStaleChildLinks(
      absl::Time pending_before, absl::Time now, int limit);
  absl::StatusOr<std::vector<ChildLinkRecord>> FindUncascadedChildLinks(
      int limit);
  absl::Status MarkChildLinksCascaded(std::span<const ChildLinkRecord> links);
  absl::StatusOr<std::vector<int64_t>> AppendChildReports(
      std::span<const ChildReport> reports);
  absl::StatusOr<std::vector<ChildReport>> PeekChildReports(int64_t after_id,
                                                            int limit);
  absl::Status DeleteChildReports(std::span<const int64_t> report_ids);
  absl::StatusOr<int64_t> CountChildReports();

  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<const OutgoingMessage> messages,
      absl::Time now);
  absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields fields);
  absl::Status SetVisibility(std::string_view queue,
                             std::span<const VisibilityUpdate> updates);
  absl::StatusOr<std::optional<absl::Time>> NextVisibleAt(
      std::string_view queue, absl::Time now);
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now);
  absl::Status DeleteMessages(std::string_view queue,
                              std::span<const int64_t> message_ids);
  absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id);

  absl::Status UpsertWorker(const WorkerRecord& worker);
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers();
  absl::StatusOr<int> DeleteInactiveWorkers(absl::Time inactive_before,
                                            int limit);

  // Schedules (sqlite_tables_schedules.cc).
  absl::Status PutSchedule(const ScheduleRecord& schedule);
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(
      std::string_view group);
  absl::StatusOr<bool> DeleteSchedule(std::string_view group,
                                      std::string_view name);
  absl::StatusOr<bool> AdvanceScheduleCursor(std::string_view group,
                                             std::string_view name,
                                             absl::Time expected,
                                             absl::Time next);

 private:
  absl::StatusOr<Statement> Prepare(std::string_view sql,
                                    std::string_view operation) {
    return statements_.Prepare(sql, operation);
  }
  // The seq of each run, in order; nullopt where there is no such run.
  absl::StatusOr<std::vector<std::optional<int64_t>>> FindRunSeqs(
      std::span<const RunId> run_ids);
  // The seq of each run, in order; kNotFound naming the first run that does
  // not exist.
  absl::StatusOr<std::vector<int64_t>> RequireRunSeqs(
      std::span<const RunId> run_ids, std::string_view operation);
  // kNotFound naming `queue` unless it is registered.
  absl::Status RequireQueue(std::string_view queue, std::string_view operation);
  // The registered queue; kNotFound naming it if there is none.
  absl::StatusOr<QueueRecord> RequireQueueRecord(std::string_view queue,
                                                 std::string_view operation);
  // Deletes the live messages of `queue` named, first copying them to the
  // archive with `archived_at` when it is set; skips ids not live.
  absl::Status EndMessages(std::string_view queue,
                           std::span<const int64_t> message_ids,
                           std::optional<absl::Time> archived_at,
                           std::string_view operation);
  // A message a claim's read chose, with its FIFO seq for the merge.
  struct ChosenMessage {
    int64_t seq = 0;
    MessageRecord message;
  };
  // Appends the rows of one of the claim's choices (sqlite_sql.h
  // kChooseReady and the like) to `chosen`.
  absl::Status Choose(std::string_view sql, std::string_view queue,
                      absl::Time now, int limit, Fields fields,
                      std::vector<ChosenMessage>& chosen);
  // The next `count` FIFO seqs of `queue`: the last one reserved.
  absl::StatusOr<int64_t> ReserveSeqs(std::string_view queue, int64_t count,
                                      std::string_view operation);
  // Every remaining row of `query` as a task, fields chosen by `fields`.
  absl::StatusOr<std::vector<TaskRecord>> QueryTasks(Statement& query,
                                                     Fields fields);
  // After an update that added `batch`'s sums to the runs of `rows` (seq in
  // its first cell, key = slot): each delta's new remaining_steps, in order.
  absl::StatusOr<std::vector<int>> ReadBackRemainingSteps(
      const BoundRows& rows, internal::CounterBatch<int64_t, 1>& batch,
      std::span<const RunCounterDelta> deltas, std::string_view operation);

  StatementCache& statements_;
  KnownRunSeqs* const known_;
  // Seqs of runs that exist, as this transaction looked them up or
  // inserted them.
  absl::flat_hash_map<RunId, int64_t> run_seqs_;
  // Runs this transaction deleted.
  std::vector<RunId> deleted_runs_;
};

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_
