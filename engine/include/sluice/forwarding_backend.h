// Forwarding wrappers: a Backend and Transaction that pass every call to
// another one. Override BeforeCall() to observe or fail calls: a test that
// counts calls or fails the Nth one is a few lines (see
// tests/conformance/fault_injection_test.cc).
#ifndef SLUICE_FORWARDING_BACKEND_H_
#define SLUICE_FORWARDING_BACKEND_H_

#include <memory>
#include <string_view>
#include <utility>

#include "sluice/backend.h"
#include "sluice/internal/status_macros.h"

namespace sluice {

class ForwardingTransaction : public Transaction {
 public:
  explicit ForwardingTransaction(std::unique_ptr<Transaction> target)
      : target_(std::move(target)) {}

  absl::Status Commit() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("Commit"));
    return target_->Commit();
  }
  absl::Status LockFlowSlug(std::string_view flow_slug) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("LockFlowSlug"));
    return target_->LockFlowSlug(flow_slug);
  }
  absl::StatusOr<std::optional<FlowRecord>> GetFlow(
      std::string_view flow_slug) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetFlow"));
    return target_->GetFlow(flow_slug);
  }
  absl::Status InsertFlow(const FlowRecord& flow) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("InsertFlow"));
    return target_->InsertFlow(flow);
  }
  absl::StatusOr<std::vector<FlowRecord>> ListFlows() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListFlows"));
    return target_->ListFlows();
  }
  absl::StatusOr<bool> DeleteFlow(std::string_view flow_slug) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteFlow"));
    return target_->DeleteFlow(flow_slug);
  }
  absl::Status UpdateFlow(const FlowRecord& flow) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateFlow"));
    return target_->UpdateFlow(flow);
  }
  absl::StatusOr<RunCounts> CountRuns(std::string_view flow_slug) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CountRuns"));
    return target_->CountRuns(flow_slug);
  }
  absl::Status LockAlias(std::string_view alias) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("LockAlias"));
    return target_->LockAlias(alias);
  }
  absl::StatusOr<std::optional<AliasRecord>> GetAlias(
      std::string_view alias) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetAlias"));
    return target_->GetAlias(alias);
  }
  absl::Status ExpectAlias(std::string_view alias,
                           std::string_view active_slug) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ExpectAlias"));
    return target_->ExpectAlias(alias, active_slug);
  }
  absl::Status PutAlias(const AliasRecord& alias) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("PutAlias"));
    return target_->PutAlias(alias);
  }
  absl::StatusOr<std::vector<AliasRecord>> ListAliases() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListAliases"));
    return target_->ListAliases();
  }
  absl::StatusOr<bool> DeleteQueue(std::string_view name) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteQueue"));
    return target_->DeleteQueue(name);
  }
  absl::StatusOr<std::optional<QueueRecord>> GetQueue(
      std::string_view name) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetQueue"));
    return target_->GetQueue(name);
  }
  absl::StatusOr<bool> QueueExists(std::string_view name) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("QueueExists"));
    return target_->QueueExists(name);
  }
  absl::Status CreateQueue(const QueueRecord& queue) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CreateQueue"));
    return target_->CreateQueue(queue);
  }
  using Transaction::InsertRuns;
  absl::Status InsertRuns(std::span<RunRecord> runs,
                          std::span<const Json* const> inputs) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("InsertRuns"));
    return target_->InsertRuns(runs, inputs);
  }
  absl::StatusOr<std::vector<std::optional<RunRecord>>> GetRuns(
      std::span<const RunId> run_ids, LockMode lock, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetRuns"));
    return target_->GetRuns(run_ids, lock, fields);
  }
  absl::Status UpdateRuns(std::span<RunRecord> runs) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateRuns"));
    return target_->UpdateRuns(runs);
  }
  absl::StatusOr<std::vector<int>> AddRunRemainingSteps(
      std::span<const RunCounterDelta> deltas) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AddRunRemainingSteps"));
    return target_->AddRunRemainingSteps(deltas);
  }
  absl::StatusOr<std::vector<int>> UpdateRunsAndCounters(
      std::span<RunRecord> runs,
      std::span<const RunCounterDelta> deltas) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateRunsAndCounters"));
    return target_->UpdateRunsAndCounters(runs, deltas);
  }
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunQuery& query,
                                                  Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListRuns"));
    return target_->ListRuns(query, fields);
  }
  absl::StatusOr<std::vector<std::optional<RunRecord>>> FindRunsByKey(
      std::string_view flow_slug, std::span<const std::string> external_keys,
      Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("FindRunsByKey"));
    return target_->FindRunsByKey(flow_slug, external_keys, fields);
  }
  absl::StatusOr<QueueCounts> CountTasks(std::string_view queue, absl::Time now,
                                         TaskCounts which) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CountTasks"));
    return target_->CountTasks(queue, now, which);
  }
  absl::Status AppendAttempts(
      std::span<const AttemptRecord> attempts) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AppendAttempts"));
    return target_->AppendAttempts(attempts);
  }
  absl::StatusOr<std::vector<AttemptRecord>> ListAttempts(
      const RunId& run_id) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListAttempts"));
    return target_->ListAttempts(run_id);
  }
  absl::StatusOr<std::optional<DedupeRecord>> GetDedupe(
      std::string_view flow_slug, std::string_view key) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetDedupe"));
    return target_->GetDedupe(flow_slug, key);
  }
  absl::Status PutDedupe(const DedupeRecord& entry) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("PutDedupe"));
    return target_->PutDedupe(entry);
  }
  absl::StatusOr<bool> DeleteDedupe(std::string_view flow_slug,
                                    std::string_view key,
                                    const RunId& run_id) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteDedupe"));
    return target_->DeleteDedupe(flow_slug, key, run_id);
  }
  absl::StatusOr<int> DeleteExpiredDedupe(absl::Time now, int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteExpiredDedupe"));
    return target_->DeleteExpiredDedupe(now, limit);
  }
  absl::StatusOr<std::vector<QueueRecord>> ListQueues() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListQueues"));
    return target_->ListQueues();
  }
  absl::Status SetQueuePaused(std::string_view name, bool paused) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("SetQueuePaused"));
    return target_->SetQueuePaused(name, paused);
  }
  absl::StatusOr<std::optional<absl::Time>> NextVisibleAt(
      std::string_view queue, absl::Time now) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("NextVisibleAt"));
    return target_->NextVisibleAt(queue, now);
  }
  absl::StatusOr<std::vector<RunRecord>> FindFinishedRuns(
      absl::Time finished_before, int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("FindFinishedRuns"));
    return target_->FindFinishedRuns(finished_before, limit);
  }
  absl::StatusOr<int> DeleteRuns(std::span<const RunId> run_ids) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteRuns"));
    return target_->DeleteRuns(run_ids);
  }
  absl::Status InsertStepStates(std::span<StepStateRecord> states) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("InsertStepStates"));
    return target_->InsertStepStates(states);
  }
  absl::StatusOr<std::vector<std::vector<StepStateRecord>>> GetStepStates(
      std::span<const RunId> run_ids, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetStepStates"));
    return target_->GetStepStates(run_ids, fields);
  }
  absl::Status UpdateStepStates(std::span<StepStateRecord> states) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateStepStates"));
    return target_->UpdateStepStates(states);
  }
  absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AddStepCounters"));
    return target_->AddStepCounters(deltas);
  }
  absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateStepStatesAndCounters"));
    return target_->UpdateStepStatesAndCounters(states, deltas);
  }
  absl::Status InsertTasks(std::span<TaskRecord> tasks) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("InsertTasks"));
    return target_->InsertTasks(tasks);
  }
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasks(
      std::span<const TaskKey> keys, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetTasks"));
    return target_->GetTasks(keys, fields);
  }
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> GetTasksByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetTasksByMessage"));
    return target_->GetTasksByMessage(queue, message_ids, fields);
  }
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<TaskUpdate> updates) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpdateTasks"));
    return target_->UpdateTasks(updates);
  }
  absl::StatusOr<std::vector<TaskRecord>> GetUnfinishedTasks(
      const RunId& run_id, std::optional<int> step_index,
      Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetUnfinishedTasks"));
    return target_->GetUnfinishedTasks(run_id, step_index, fields);
  }
  absl::StatusOr<std::vector<TaskRecord>> ListTasks(
      const RunId& run_id) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListTasks"));
    return target_->ListTasks(run_id);
  }
  absl::StatusOr<std::vector<StepOutputs>> GetTaskOutputs(
      std::span<const StepRef> steps) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetTaskOutputs"));
    return target_->GetTaskOutputs(steps);
  }
  absl::StatusOr<std::vector<TaskRecord>> FindStalledTasks(
      const StalledQuery& query, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("FindStalledTasks"));
    return target_->FindStalledTasks(query, fields);
  }
  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AppendReports"));
    return target_->AppendReports(reports);
  }
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("TakeReports"));
    return target_->TakeReports(report_ids);
  }
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("TakeStaleReports"));
    return target_->TakeStaleReports(created_before, limit);
  }
  absl::StatusOr<int64_t> CountReports() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CountReports"));
    return target_->CountReports();
  }
  // --- Fan-out children ---
  absl::Status InsertChildLinks(std::span<ChildLinkRecord> links) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("InsertChildLinks"));
    return target_->InsertChildLinks(links);
  }
  absl::StatusOr<std::vector<ChildLinkRecord>> GetChildLinks(
      const TaskKey& parent, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("GetChildLinks"));
    return target_->GetChildLinks(parent, fields);
  }
  absl::StatusOr<ChildCounts> CountChildLinks(const TaskKey& parent,
                                              int64_t up_to) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CountChildLinks"));
    return target_->CountChildLinks(parent, up_to);
  }
  absl::StatusOr<std::vector<bool>> SettleChildLinks(
      std::span<ChildSettlement> settlements) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("SettleChildLinks"));
    return target_->SettleChildLinks(settlements);
  }
  absl::StatusOr<int64_t> CancelPendingChildLinks(
      const TaskKey& parent, std::string_view error) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CancelPendingChildLinks"));
    return target_->CancelPendingChildLinks(parent, error);
  }
  absl::StatusOr<std::vector<ChildLinkRecord>> TakeStaleChildLinks(
      absl::Time pending_before, absl::Time now, int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("TakeStaleChildLinks"));
    return target_->TakeStaleChildLinks(pending_before, now, limit);
  }
  absl::StatusOr<std::vector<ChildLinkRecord>> FindUncascadedChildLinks(
      int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("FindUncascadedChildLinks"));
    return target_->FindUncascadedChildLinks(limit);
  }
  absl::Status MarkChildLinksCascaded(
      std::span<const ChildLinkRecord> links) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("MarkChildLinksCascaded"));
    return target_->MarkChildLinksCascaded(links);
  }
  absl::StatusOr<std::vector<int64_t>> AppendChildReports(
      std::span<const ChildReport> reports) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AppendChildReports"));
    return target_->AppendChildReports(reports);
  }
  absl::StatusOr<std::vector<ChildReport>> PeekChildReports(
      int64_t after_id, int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("PeekChildReports"));
    return target_->PeekChildReports(after_id, limit);
  }
  absl::Status DeleteChildReports(
      std::span<const int64_t> report_ids) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteChildReports"));
    return target_->DeleteChildReports(report_ids);
  }
  absl::StatusOr<int64_t> CountChildReports() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("CountChildReports"));
    return target_->CountChildReports();
  }
  absl::StatusOr<std::vector<int64_t>> SendMessages(
      std::string_view queue, std::span<OutgoingMessage> messages,
      absl::Time now) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("SendMessages"));
    return target_->SendMessages(queue, messages, now);
  }
  absl::StatusOr<std::vector<MessageRecord>> ReadMessages(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields fields) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ReadMessages"));
    return target_->ReadMessages(queue, now, limit, visible_until, fields);
  }
  absl::Status SetVisibility(
      std::string_view queue,
      std::span<const VisibilityUpdate> updates) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("SetVisibility"));
    return target_->SetVisibility(queue, updates);
  }
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ArchiveMessages"));
    return target_->ArchiveMessages(queue, message_ids, now);
  }
  absl::Status DeleteMessages(std::string_view queue,
                              std::span<const int64_t> message_ids) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteMessages"));
    return target_->DeleteMessages(queue, message_ids);
  }
  absl::StatusOr<std::optional<MessageLocation>> LookupMessage(
      std::string_view queue, int64_t message_id) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("LookupMessage"));
    return target_->LookupMessage(queue, message_id);
  }
  absl::Status UpsertWorker(const WorkerRecord& worker) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("UpsertWorker"));
    return target_->UpsertWorker(worker);
  }
  absl::StatusOr<std::vector<WorkerRecord>> ListWorkers() override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListWorkers"));
    return target_->ListWorkers();
  }
  absl::StatusOr<int> DeleteInactiveWorkers(absl::Time inactive_before,
                                            int limit) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteInactiveWorkers"));
    return target_->DeleteInactiveWorkers(inactive_before, limit);
  }

  // --- Host transactions ---
  absl::Status RunNative(const NativeWrite& write) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("RunNative"));
    return target_->RunNative(write);
  }

  // --- Schedules ---
  absl::Status PutSchedule(const ScheduleRecord& schedule) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("PutSchedule"));
    return target_->PutSchedule(schedule);
  }
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(
      std::string_view group) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("ListSchedules"));
    return target_->ListSchedules(group);
  }
  absl::StatusOr<bool> DeleteSchedule(std::string_view group,
                                      std::string_view name) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("DeleteSchedule"));
    return target_->DeleteSchedule(group, name);
  }
  absl::StatusOr<bool> AdvanceScheduleCursor(std::string_view group,
                                             std::string_view name,
                                             absl::Time expected,
                                             absl::Time next) override {
    SLUICE_RETURN_IF_ERROR(BeforeCall("AdvanceScheduleCursor"));
    return target_->AdvanceScheduleCursor(group, name, expected, next);
  }

 protected:
  // Runs before every call, named by its method. A non-OK status is returned
  // in place of the call, which then never reaches the target.
  virtual absl::Status BeforeCall(std::string_view method) {
    (void)method;
    return absl::OkStatus();
  }
  Transaction& target() { return *target_; }

 private:
  std::unique_ptr<Transaction> target_;
};

class ForwardingBackend : public Backend {
 public:
  // `target` must outlive this backend.
  explicit ForwardingBackend(Backend& target) : target_(target) {}

  int interface_version() const override { return target_.interface_version(); }
  std::string_view name() const override { return target_.name(); }
  absl::StatusOr<std::unique_ptr<Transaction>> Begin() override {
    SLUICE_RETURN_IF_ERROR(BeforeBegin());
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, target_.Begin());
    return Wrap(std::move(tx));
  }
  std::unique_ptr<QueueWatch> WatchQueue(std::string_view queue,
                                         std::function<void()> poke) override {
    return target_.WatchQueue(queue, std::move(poke));
  }

 protected:
  // Runs before Begin(); a non-OK status is returned in its place.
  virtual absl::Status BeforeBegin() { return absl::OkStatus(); }
  // Wraps each transaction; the default forwards it unchanged.
  virtual std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) {
    return tx;
  }
  Backend& target() { return target_; }

 private:
  Backend& target_;
};

}  // namespace sluice

#endif  // SLUICE_FORWARDING_BACKEND_H_
