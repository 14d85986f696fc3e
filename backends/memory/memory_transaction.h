// The memory backend's Transaction.
#ifndef SLUICE_BACKENDS_MEMORY_MEMORY_TRANSACTION_H_
#define SLUICE_BACKENDS_MEMORY_MEMORY_TRANSACTION_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "memory_state.h"
#include "sluice/backend.h"

namespace sluice::memory {

// An exclusive transaction: it holds the backend's lock while open, changes
// the store in place and logs each change, so a rollback replays the log
// backwards. Open until Commit() succeeds or a call fails; a failed call
// rolls back everything at once and releases the lock. Once not open, every
// call returns kFailedPrecondition. Destroying an open transaction rolls it
// back.
//
// Thread-safety: used by the thread that began it, which must not Begin()
// another transaction on the same backend while this one is open.
class MemoryTransaction final : public Transaction {
 public:
  // REQUIRES: the calling thread does not hold state.mu.
  explicit MemoryTransaction(MemoryBackend::State& state);
  MemoryTransaction(const MemoryTransaction&) = delete;
  MemoryTransaction& operator=(const MemoryTransaction&) = delete;
  ~MemoryTransaction() override;

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

  // --- Fan-out children ---
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
  absl::StatusOr<std::optional<absl::Time>> NextVisibleAt(
      std::string_view queue, absl::Time now) override;
  absl::Status SetVisibility(
      std::string_view queue,
      std::span<const VisibilityUpdate> updates) override;
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
  enum class Phase { kOpen, kCommitted, kFailed };

  // Runs `op` (returning a Status or StatusOr) if the transaction is open;
  // if `op` fails, rolls the whole transaction back first.
  template <typename Op>
  auto Apply(Op op) -> decltype(op());
  absl::Status NotOpenError() const;
  // The queue named, or kNotFound.
  absl::StatusOr<MessageQueue*> FindQueue(std::string_view name);

  // REQUIRES: open. Valid while the transaction holds the lock.
  MemoryStore& store();
  UndoLog& undo();

  // The lock is held across calls, from Acquire() to Release(), which the
  // thread-safety analysis cannot follow; store() and undo() assert it
  // instead.
  void Acquire() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Rolls back what is in the undo log, then releases the lock.
  void RollBackAndRelease();
  void Release() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  MemoryBackend::State& state_;
  Phase phase_ = Phase::kOpen;
};

// Defined here so each of the .cc files that implement the methods can use it.
template <typename Op>
auto MemoryTransaction::Apply(Op op) -> decltype(op()) {
  if (phase_ != Phase::kOpen) return NotOpenError();
  auto result = op();
  if (!result.ok()) {
    // The call may have changed part of what it was asked to: take back
    // everything now, so nothing of it can leak into a later transaction.
    RollBackAndRelease();
    phase_ = Phase::kFailed;
  }
  return result;
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_MEMORY_TRANSACTION_H_
