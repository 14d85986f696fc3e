#include "sim_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::simulation {

// Records what the transaction appends and takes; hands it to the ledger
// only if the commit succeeds, since a rolled-back take applied nothing.
class SimBackend::Tx : public ForwardingTransaction {
 public:
  Tx(std::unique_ptr<Transaction> target, SimBackend& owner)
      : ForwardingTransaction(std::move(target)), owner_(owner) {}

  absl::StatusOr<std::vector<int64_t>> AppendReports(
      std::span<const OutboxReport> reports) override {
    absl::StatusOr<std::vector<int64_t>> ids =
        ForwardingTransaction::AppendReports(reports);
    if (ids.ok()) {
      for (size_t i = 0; i < ids->size() && i < reports.size(); ++i) {
        appended_.emplace_back((*ids)[i], reports[i].task);
        touched_.push_back(reports[i].task.run_id);
      }
    }
    return ids;
  }
  absl::StatusOr<std::vector<OutboxReport>> TakeReports(
      std::span<const int64_t> report_ids) override {
    return Took(ForwardingTransaction::TakeReports(report_ids));
  }
  absl::StatusOr<std::vector<OutboxReport>> TakeStaleReports(
      absl::Time created_before, int limit) override {
    return Took(ForwardingTransaction::TakeStaleReports(created_before, limit));
  }
  absl::Status InsertRuns(std::span<RunRecord> runs,
                          std::span<const Json* const> inputs) override {
    for (const RunRecord& r : runs) touched_.push_back(r.run_id);
    return ForwardingTransaction::InsertRuns(runs, inputs);
  }
  absl::Status UpdateRuns(std::span<RunRecord> runs) override {
    for (const RunRecord& r : runs) touched_.push_back(r.run_id);
    return ForwardingTransaction::UpdateRuns(runs);
  }
  absl::StatusOr<std::vector<int>> AddRunRemainingSteps(
      std::span<const RunCounterDelta> deltas) override {
    for (const RunCounterDelta& d : deltas) touched_.push_back(d.run_id);
    return ForwardingTransaction::AddRunRemainingSteps(deltas);
  }
  absl::StatusOr<std::vector<int>> UpdateRunsAndCounters(
      std::span<RunRecord> runs,
      std::span<const RunCounterDelta> deltas) override {
    for (const RunRecord& r : runs) touched_.push_back(r.run_id);
    return ForwardingTransaction::UpdateRunsAndCounters(runs, deltas);
  }
  absl::StatusOr<int> DeleteRuns(std::span<const RunId> run_ids) override {
    touched_.insert(touched_.end(), run_ids.begin(), run_ids.end());
    return ForwardingTransaction::DeleteRuns(run_ids);
  }
  absl::Status InsertStepStates(std::span<StepStateRecord> states) override {
    for (const StepStateRecord& s : states) touched_.push_back(s.run_id);
    return ForwardingTransaction::InsertStepStates(states);
  }
  absl::Status UpdateStepStates(std::span<StepStateRecord> states) override {
    for (const StepStateRecord& s : states) touched_.push_back(s.run_id);
    return ForwardingTransaction::UpdateStepStates(states);
  }
  absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas) override {
    for (const StepCounterDelta& d : deltas) touched_.push_back(d.step.run_id);
    return ForwardingTransaction::AddStepCounters(deltas);
  }
  absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas) override {
    for (const StepStateRecord& s : states) touched_.push_back(s.run_id);
    return ForwardingTransaction::UpdateStepStatesAndCounters(states, deltas);
  }
  absl::Status InsertTasks(std::span<TaskRecord> tasks) override {
    for (const TaskRecord& t : tasks) touched_.push_back(t.key.run_id);
    return ForwardingTransaction::InsertTasks(tasks);
  }
  absl::StatusOr<std::vector<bool>> UpdateTasks(
      std::span<TaskUpdate> updates) override {
    for (const TaskUpdate& u : updates) touched_.push_back(u.task.key.run_id);
    return ForwardingTransaction::UpdateTasks(updates);
  }
  absl::Status ArchiveMessages(std::string_view queue,
                               std::span<const int64_t> message_ids,
                               absl::Time now) override {
    for (int64_t id : message_ids) ended_.emplace_back(queue, id);
    return ForwardingTransaction::ArchiveMessages(queue, message_ids, now);
  }
  absl::Status DeleteMessages(std::string_view queue,
                              std::span<const int64_t> message_ids) override {
    for (int64_t id : message_ids) ended_.emplace_back(queue, id);
    return ForwardingTransaction::DeleteMessages(queue, message_ids);
  }
  absl::Status Commit() override {
    absl::Status status = ForwardingTransaction::Commit();
    if (status.ok()) Record();
    return status;
  }

 protected:
  absl::Status BeforeCall(std::string_view) override {
    return owner_.MaybeFail();
  }

 private:
  absl::StatusOr<std::vector<OutboxReport>> Took(
      absl::StatusOr<std::vector<OutboxReport>> reports) {
    if (reports.ok()) {
      for (const OutboxReport& r : *reports) {
        taken_.push_back(r.report_id);
        touched_.push_back(r.task.run_id);
      }
    }
    return reports;
  }

  void Record() {
    owner_.touched_.insert(owner_.touched_.end(), touched_.begin(),
                           touched_.end());
    owner_.ended_.insert(owner_.ended_.end(), ended_.begin(), ended_.end());
    ReportLedger& ledger = owner_.ledger_;
    for (const auto& [id, key] : appended_) {
      ledger.appended[id] = key;
      if (++ledger.reports_per_task[key] == 2) {
        ledger.reported_twice.push_back(key);
      }
    }
    for (int64_t id : taken_) {
      if (!ledger.appended.contains(id)) ledger.taken_unknown.push_back(id);
      if (++ledger.times_taken[id] == 2) ledger.taken_twice.push_back(id);
    }
  }

  SimBackend& owner_;
  std::vector<std::pair<int64_t, TaskKey>> appended_;
  std::vector<int64_t> taken_;
  std::vector<RunId> touched_;
  std::vector<std::pair<std::string, int64_t>> ended_;
};

std::unique_ptr<Transaction> SimBackend::Wrap(std::unique_ptr<Transaction> tx) {
  return std::make_unique<Tx>(std::move(tx), *this);
}

std::vector<RunId> SimBackend::TakeTouchedRuns() {
  std::vector<RunId> touched = std::move(touched_);
  touched_.clear();
  return touched;
}

std::vector<std::pair<std::string, int64_t>> SimBackend::TakeEndedMessages() {
  std::vector<std::pair<std::string, int64_t>> ended = std::move(ended_);
  ended_.clear();
  return ended;
}

absl::Status SimBackend::MaybeFail() {
  // One draw per call whatever the rate, so turning faults off does not
  // shift the failure stream of a seed.
  bool fail = random_.Chance(failure_rate_);
  if (!fail) return absl::OkStatus();
  ++injected_;
  return absl::UnavailableError(
      absl::StrCat("injected failure ", injected_, ": backend unavailable"));
}

}  // namespace sluice::simulation
