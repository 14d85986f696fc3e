// Typed reads and writes of the Postgres backend's tables, on the
// connection's open transaction. Each method has the contract of the
// Transaction method of the same name (backend.h); PostgresTransaction
// checks that the transaction is usable before each call and latches
// failures.
//
// Writes whose result the caller doesn't need (Status-only methods) are
// queued on the connection's pipeline and checked at the next statement
// whose result is needed, or at COMMIT (pg_connection.h). Their failures
// surface there, with the code they would have had. Writes that must find
// their rows (UpdateRuns, UpdateStepStates) check in SQL, so a miss aborts
// the transaction on the server.
//
// Sources: flows, aliases, queues, workers and notifications in
// pg_tables.cc; runs,
// step states and retention in pg_tables_runs.cc; counter moves, alone or
// with their record, returned or checked, in pg_tables_counted.cc; tasks and
// the outbox in pg_tables_tasks.cc; fan-out child links and reports in
// pg_tables_children.cc; queue messages in pg_tables_messages.cc; the
// attempts ledger, the dedupe registry, queue pausing and task counts in
// pg_tables_jobs.cc.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_TABLES_H_
#define SLUICE_BACKENDS_POSTGRES_PG_TABLES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pg_connection.h"
#include "sluice/backend.h"
#include "sluice/internal/one_trip_claims.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/records.h"

namespace sluice::postgres_internal {

class PgTables {
 public:
  explicit PgTables(Connection& connection) : connection_(connection) {}

  absl::Status LockFlowSlug(std::string_view flow_slug);
  absl::StatusOr<std::optional<FlowRecord>> GetFlow(std::string_view flow_slug);
  absl::Status InsertFlow(const FlowRecord& flow);
  absl::StatusOr<std::vector<FlowRecord>> ListFlows();
  absl::StatusOr<bool> DeleteFlow(std::string_view flow_slug);
  absl::Status UpdateFlow(const FlowRecord& flow);
  absl::StatusOr<RunCounts> CountRuns(std::string_view flow_slug);
  absl::Status LockAlias(std::string_view alias);
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
      std::span<const RunId> run_ids, LockMode lock, Fields fields);
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
  absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
      std::span<const StepStateRecord> states,
      std::span<const StepCounterDelta> deltas);
  // internal::CheckedCounterMoves: sent, not waited for.
  absl::Status AddRunRemainingStepsChecked(
      std::span<const RunCounterDelta> deltas, std::span<const int> expected);
  absl::Status UpdateRunsAndCheckCounters(
      std::span<const RunRecord> runs, std::span<const RunCounterDelta> deltas,
      std::span<const int> expected);
  absl::Status AddStepCountersChecked(std::span<const StepCounterDelta> deltas,
                                      std::span<const StepCounters> expected);
  absl::Status UpdateStepStatesAndCheckCounters(
      std::span<const StepStateRecord> states,
      std::span<const StepCounterDelta> deltas,
      std::span<const StepCounters> expected);

  absl::Status InsertTasks(std::span<const TaskRecord> tasks);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields);
  // A transaction control statement (COMMIT) to send behind the last
  // statement of a call, and where its result goes.
  struct Control {
    std::string_view sql;
    Result* result;
  };
  // With `then`, its statement follows the last update in the same round
  // trip (and is sent alone if there is nothing to update).
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<const TaskUpdate> updates, const Control* then = nullptr);
  // UpdateTasks, then ReadRunsWithSteps in the last update's round trip
  // (internal::OneTripFinishes).
  absl::StatusOr<std::vector<bool>> UpdateTasksThenReadRuns(
      std::span<const TaskUpdate> updates, std::span<const RunId> run_ids,
      LockMode lock, Fields fields, internal::RunsWithSteps& read);
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
  // A run, its step states, tasks and attempts, in one round trip
  // (internal::OneTripRunReads).
  absl::StatusOr<std::optional<internal::RunWithParts>> ReadRunWithParts(
      const RunId& run_id);
  // Runs (locked as asked) and their step states, in one round trip.
  // A statement sent ahead of a read in its round trip, and where its
  // result goes.
  struct Lead {
    Connection::Statement statement;
    Result* result;
  };
  absl::StatusOr<internal::RunsWithSteps> ReadRunsWithSteps(
      std::span<const RunId> run_ids, LockMode lock, Fields fields,
      const Lead* lead = nullptr);

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

  // Fan-out children (pg_tables_children.cc).
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

  // SendMessages, then InsertTasks with each task's message_id the id of
  // the message beside it: one statement, queued without waiting (a
  // failure surfaces at the next wait or COMMIT). kInternal if the counts
  // differ.
  absl::Status SendMessagesAndInsertTasks(
      std::string_view queue, std::span<const OutgoingMessage> messages,
      std::span<const TaskRecord> tasks, absl::Time now);
  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<const OutgoingMessage> messages,
      absl::Time now);
  absl::StatusOr<internal::MessagesWithTasks> ReadMessagesWithTasks(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields task_fields);
  // OneTripClaims::ClaimAndCommit but the transaction's end: `then`
  // (COMMIT) follows in the same round trip.
  absl::StatusOr<internal::ServerClaimed> ClaimOnServer(
      const internal::ServerClaim& claim, const Control& then);
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

  // Schedules (pg_tables_schedules.cc).
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
  // Runs to read in the round trip of a batch's last task update.
  struct RunReads {
    std::span<const RunId> run_ids;
    LockMode lock;
    Fields fields;
    internal::RunsWithSteps* read;
  };
  absl::StatusOr<std::vector<bool>> UpdateTasksWith(
      std::span<const TaskUpdate> updates, const Control* then,
      const RunReads* reads);

  // Queues a write whose result nobody waits for.
  void Send(std::string_view sql, const Params& params,
            std::string_view operation, std::string_view queue = {}) {
    connection_.Send(sql, params, {std::string(operation), std::string(queue)});
  }
  absl::StatusOr<Result> Query(std::string_view sql, const Params& params,
                               std::string_view operation,
                               std::string_view queue = {}) {
    return connection_.Query(sql, params,
                             {std::string(operation), std::string(queue)});
  }
  // InsertTasks's $1..$20: one array per column.
  static Params TaskColumns(std::span<const TaskRecord> tasks);
  // Every row of `result` as an attempt.
  static absl::StatusOr<std::vector<AttemptRecord>> ReadAttempts(
      const Result& result);
  // Every row of `result` as a task, columns from `first`.
  static absl::StatusOr<std::vector<TaskRecord>> ReadTasks(const Result& result,
                                                           Fields fields,
                                                           int first = 0);
  // Reads up to `limit` messages of `queue` with `sql` (a read of
  // QueueSql's); nullopt for a limit of 0 or less once the queue is known
  // to exist.
  absl::StatusOr<std::optional<Result>> ReadFromQueue(
      std::string_view operation, std::string_view queue, std::string_view sql,
      absl::Time now, int limit, absl::Time visible_until);
  // Notes `now`: SetVisibility wakes watchers of messages visible by then.
  void SawTime(absl::Time now);
  // Queues pg_notify for `queue`'s watchers, once per transaction (the
  // server delivers it at commit).
  void NotifyQueue(std::string_view queue);

  // `sql` for a batch of `rows`: its one-row shape for one (pg_one_row.h).
  std::string_view ForRows(std::string_view sql, size_t rows) {
    return rows == 1 ? connection_.OneRowOf(sql) : sql;
  }
  // Whether this transaction inserted the run of every row (a task or a
  // step state): its inserts then skip the check that each run exists.
  template <typename Rows>
  bool InsertedHere(const Rows& rows) const {
    for (const auto& row : rows) {
      if (!runs_inserted_.contains(RunOf(row))) return false;
    }
    return true;
  }
  static const RunId& RunOf(const TaskRecord& task) { return task.key.run_id; }
  static const RunId& RunOf(const StepStateRecord& state) {
    return state.run_id;
  }

  Connection& connection_;
  // The runs InsertRuns queued in this transaction. One that failed ends
  // the transaction, so each is there for every later statement.
  absl::flat_hash_set<RunId> runs_inserted_;
  std::optional<absl::Time> latest_now_;
  absl::flat_hash_set<std::string> notified_queues_;
};

}  // namespace sluice::postgres_internal

#endif  // SLUICE_BACKENDS_POSTGRES_PG_TABLES_H_
