// Typed reads and writes of the SQLite backend's tables, run on the
// connection's open transaction. Lives as long as that transaction:
// SqliteTransaction owns the transaction, checks that it is usable before
// each call, and latches failures (see sqlite_transaction.h). Each method
// has the contract of the Transaction method of the same name (backend.h).
//
// REQUIRES: the connection's mutex is held and a transaction is open.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/records.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal {

class SqliteTables {
 public:
  explicit SqliteTables(StatementCache& statements) : statements_(statements) {}

  absl::StatusOr<std::optional<FlowRecord>> GetFlow(std::string_view flow_slug);
  absl::Status InsertFlow(const FlowRecord& flow);
  absl::StatusOr<std::vector<FlowRecord>> ListFlows();
  absl::StatusOr<std::optional<QueueRecord>> GetQueue(std::string_view name);
  absl::StatusOr<bool> QueueExists(std::string_view name);
  absl::Status CreateQueue(const QueueRecord& queue);

  absl::Status InsertRuns(std::span<const RunRecord> runs);
  absl::StatusOr<std::optional<RunRecord>> GetRun(const RunId& run_id,
                                                  LockMode lock);
  absl::Status UpdateRun(const RunRecord& run);
  absl::StatusOr<int> AddRunRemainingSteps(const RunId& run_id, int delta);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(std::string_view flow_slug,
                                                  int limit);

  absl::Status InsertStepStates(std::span<const StepStateRecord> states);
  absl::StatusOr<std::vector<StepStateRecord>> GetStepStates(
      const RunId& run_id);
  absl::Status UpdateStepStates(std::span<const StepStateRecord> states);
  absl::StatusOr<int> AddStepRemainingTasks(const RunId& run_id, int step_index,
                                            int delta);
  absl::StatusOr<int> AddStepRemainingDeps(const RunId& run_id, int step_index,
                                           int delta);

  absl::Status InsertTasks(std::span<const TaskRecord> tasks);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, TaskFields fields);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      TaskFields fields);
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<const TaskUpdate> updates);
  absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index, TaskFields fields);
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(const RunId& run_id);
  absl::StatusOr<std::vector<std::optional<Json>>> GetTaskOutputs(
      const RunId& run_id, int step_index);
  absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(absl::Time now,
                                                           int limit);

  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports);
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids);
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit);
  absl::StatusOr<int64_t> CountReports();

  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<const OutgoingMessage> messages,
      absl::Time now);
  absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until);
  absl::Status SetVisibility(std::string_view queue,
                             std::span<const VisibilityUpdate> updates);
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now);
  absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id);

  absl::Status UpsertWorker(const WorkerRecord& worker);
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers();

 private:
  absl::StatusOr<Statement> Prepare(std::string_view sql,
                                    std::string_view operation) {
    return statements_.Prepare(sql, operation);
  }
  // The seq of run `run_id` (kNotFound if there is no such run). Remembers
  // the last answer: a batch's rows usually belong to one run, and a run's
  // seq never changes.
  absl::StatusOr<int64_t> RunSeqOf(const RunId& run_id,
                                   std::string_view operation);
  // kNotFound naming `queue` unless it is registered.
  absl::Status RequireQueue(std::string_view queue, std::string_view operation);
  // Every remaining row of `query` as a task, fields chosen by `fields`.
  absl::StatusOr<std::vector<TaskRecord>> QueryTasks(Statement& query,
                                                     TaskFields fields);
  // Adds `delta` to a step's counter with `add_sql`, then reads it back
  // with `get_sql`.
  absl::StatusOr<int> AddStepCounter(std::string_view add_sql,
                                     std::string_view get_sql,
                                     std::string_view operation,
                                     const RunId& run_id, int step_index,
                                     int delta);

  StatementCache& statements_;
  RunId last_run_id_;
  std::optional<int64_t> last_run_seq_;
};

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_TABLES_H_
