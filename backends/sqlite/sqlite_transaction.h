// A transaction on the SQLite backend.
//
// Begin() takes the connection's mutex and runs BEGIN IMMEDIATE, so the
// transaction holds SQLite's write lock from its start: transactions are
// serializable, nothing is ever skipped as "held by another transaction",
// and LockMode / LockFlowSlug need no extra work. Lock order: the
// connection's mutex, then SQLite's write lock; nothing else is locked.
// Commit() or destruction ends the transaction (ROLLBACK unless committed)
// and releases the mutex.
//
// After any failed call every further call, Commit() included, fails with
// kFailedPrecondition, so a batch that failed part-way (a duplicate key in
// its third row) can never be committed; dropping the transaction rolls it
// all back. The table operations themselves live in SqliteTables.
//
// Not thread-safe: one thread at a time (backend.h). Because it holds an
// absl::Mutex, it must also end (Commit() or drop) on the thread that began
// it: absl's debug-build deadlock detection aborts on an unlock by another
// thread. It must not outlive its backend.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_TRANSACTION_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_TRANSACTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sqlite_backend.h"
#include "sqlite_statement.h"
#include "sqlite_tables.h"

namespace sluice::sqlite_internal {

class SqliteTransaction final : public Transaction {
 public:
  // Waits for the connection's mutex (other threads' transactions), then for
  // SQLite's write lock (other processes, up to the busy timeout).
  static absl::StatusOr<std::unique_ptr<Transaction>> Begin(
      SqliteBackend::Connection& connection);
  ~SqliteTransaction() override;

  absl::Status Commit() override;

  absl::Status LockFlowSlug(std::string_view flow_slug) override;
  absl::StatusOr<std::optional<FlowRecord>> GetFlow(
      std::string_view flow_slug) override;
  absl::Status InsertFlow(const FlowRecord& flow) override;
  absl::StatusOr<std::vector<FlowRecord>> ListFlows() override;
  absl::StatusOr<std::optional<QueueRecord>> GetQueue(
      std::string_view name) override;
  absl::StatusOr<bool> QueueExists(std::string_view name) override;
  absl::Status CreateQueue(const QueueRecord& queue) override;

  absl::Status InsertRuns(std::span<const RunRecord> runs) override;
  absl::StatusOr<std::optional<RunRecord>> GetRun(const RunId& run_id,
                                                  LockMode lock) override;
  absl::Status UpdateRun(const RunRecord& run) override;
  absl::StatusOr<int> AddRunRemainingSteps(const RunId& run_id,
                                           int delta) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(std::string_view flow_slug,
                                                  int limit) override;

  absl::Status InsertStepStates(
      std::span<const StepStateRecord> states) override;
  absl::StatusOr<std::vector<StepStateRecord>> GetStepStates(
      const RunId& run_id) override;
  absl::Status UpdateStepStates(
      std::span<const StepStateRecord> states) override;
  absl::StatusOr<int> AddStepRemainingTasks(const RunId& run_id, int step_index,
                                            int delta) override;
  absl::StatusOr<int> AddStepRemainingDeps(const RunId& run_id, int step_index,
                                           int delta) override;

  absl::Status InsertTasks(std::span<const TaskRecord> tasks) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, TaskFields fields) override;
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      TaskFields fields) override;
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<const TaskUpdate> updates) override;
  absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index,
      TaskFields fields) override;
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(
      const RunId& run_id) override;
  absl::StatusOr<std::vector<std::optional<Json>>> GetTaskOutputs(
      const RunId& run_id, int step_index) override;
  absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(absl::Time now,
                                                           int limit) override;

  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports) override;
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids) override;
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit) override;
  absl::StatusOr<int64_t> CountReports() override;

  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<const OutgoingMessage> messages,
      absl::Time now) override;
  absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until) override;
  absl::Status SetVisibility(
      std::string_view queue,
      std::span<const VisibilityUpdate> updates) override;
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now) override;
  absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id) override;

  absl::Status UpsertWorker(const WorkerRecord& worker) override;
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers() override;

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
