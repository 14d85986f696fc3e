// Engine::FinishTasks and Engine::ExtendLeases: what a worker reports about
// the tasks it claimed.
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "utf8.h"

namespace sluice {

absl::Duration BackoffDelay(const CompiledStep& step, int attempts) {
  // floor(base * 2^attempts), computed in microseconds; capped so large
  // attempt counts can't overflow.
  int64_t base = absl::ToInt64Microseconds(step.base_delay);
  int64_t cap = absl::ToInt64Microseconds(kMaxRetryDelay);
  int64_t delay = base;
  for (int i = 0; i < attempts && delay < cap; ++i) delay *= 2;
  return absl::Microseconds(std::min(delay, cap));
}

namespace {

absl::Status ValidateKeys(std::span<const TaskKey> keys,
                          std::string_view what) {
  absl::flat_hash_set<TaskKey> seen;
  for (const TaskKey& key : keys) {
    if (key.run_id.IsNil() || key.step_index < 0 || key.task_index < 0) {
      return absl::InvalidArgumentError(
          StrCat(what, ": task key (run ", key.run_id.ToString(), ", step ",
                 key.step_index, ", task ", key.task_index, ") is invalid"));
    }
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          StrCat(what, ": task (run ", key.run_id.ToString(), ", step ",
                 key.step_index, ", task ", key.task_index,
                 ") appears twice in one call"));
    }
  }
  return absl::OkStatus();
}

// The planned write for one result, and what must follow if it applies.
struct Plan {
  size_t result = 0;
  ResultDisposition disposition = ResultDisposition::kStale;
  std::optional<ReportKind> report;
  bool archive = false;
  std::optional<absl::Time> visible_at;  // for a retry
};

// Handlers write error text; storage needs valid UTF-8.
std::string FailureMessage(const absl::Status& status) {
  std::string message = ToValidUtf8(ToStd(status.message()));
  if (message.empty())
    message = StrCat("handler failed (", status.ToString(), ")");
  return message;
}

}  // namespace

absl::StatusOr<FinishOutcome> Engine::FinishTasks(
    std::span<const TaskResult> results) {
  std::vector<TaskKey> keys;
  keys.reserve(results.size());
  for (const TaskResult& r : results) {
    if (r.attempt < 1) {
      return absl::InvalidArgumentError(
          StrCat("FinishTasks: attempt ", r.attempt, " is invalid (>= 1)"));
    }
    keys.push_back(r.key);
  }
  SLUICE_RETURN_IF_ERROR(ValidateKeys(keys, "FinishTasks"));
  FinishOutcome outcome;
  outcome.dispositions.assign(results.size(), ResultDisposition::kStale);
  if (results.empty()) return outcome;

  const EngineOptions& options = impl_->options();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx->GetTasks(keys, Fields::kNoPayloads));
  std::vector<TaskUpdate> updates;
  std::vector<Plan> plans;
  updates.reserve(results.size());
  plans.reserve(results.size());
  FlowLookup flows(*impl_, *tx);
  absl::flat_hash_map<std::string, std::vector<int64_t>> late_archives;
  for (size_t i = 0; i < results.size(); ++i) {
    const TaskResult& result = results[i];
    if (!tasks[i]) continue;  // deleted: nothing to do
    TaskRecord& t = *tasks[i];
    if (t.status != TaskStatus::kStarted || t.attempts != result.attempt) {
      // A late result: only an ended task's message needs archiving.
      if (IsTerminal(t.status)) {
        late_archives[t.queue_name].push_back(t.message_id);
      }
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
    const CompiledStep& step = flow->step(t.key.step_index);
    Plan plan{.result = i};
    TaskUpdate u{.task = std::move(t),
                 .expected_status = TaskStatus::kStarted,
                 .expected_attempts = result.attempt};
    TaskRecord& next = u.task;
    next.stall_at.reset();
    absl::Status failure = result.outcome.status();
    if (result.outcome.ok()) {
      const Json& output = *result.outcome;
      absl::Status valid =
          CheckJsonPayload(output, "handler output", options.max_payload_bytes);
      if (!valid.ok()) {
        failure = NonRetryable(ToStd(valid.message()));
      } else if (step.feeds_map && !output.is_array()) {
        next.status = TaskStatus::kFailed;
        next.output = output;
        next.error = StrCat("[TYPE_VIOLATION] Produced ", JsonTypeName(output),
                            " instead of array");
        next.finished_at = now;
        plan.disposition = ResultDisposition::kFailed;
        plan.report = ReportKind::kTypeViolation;
        plan.archive = true;
      } else {
        next.status = TaskStatus::kCompleted;
        next.output = output;
        next.finished_at = now;
        plan.disposition = ResultDisposition::kCompleted;
        plan.report = ReportKind::kCompleted;
        plan.archive = true;
      }
    }
    if (!failure.ok()) {
      next.error = FailureMessage(failure);
      bool retry =
          !IsNonRetryable(failure) && next.attempts < step.max_attempts;
      if (retry) {
        absl::Duration delay = BackoffDelay(step, next.attempts);
        if (std::optional<absl::Duration> chosen = RetryDelayOf(failure)) {
          absl::Status valid = ValidateRetryDelay(*chosen);
          if (valid.ok()) {
            delay = *chosen;
          } else {
            StrAppend(&next.error, " (retry delay ignored: ", valid.message(),
                      ")");
          }
        }
        next.status = TaskStatus::kQueued;
        next.started_at.reset();
        plan.disposition = ResultDisposition::kRetrying;
        plan.visible_at = now + delay;
      } else {
        next.status = TaskStatus::kFailed;
        next.finished_at = now;
        plan.disposition = ResultDisposition::kFailed;
        plan.report = ReportKind::kFailed;
        plan.archive = true;
      }
    }
    updates.push_back(std::move(u));
    plans.push_back(plan);
  }

  std::vector<OutboxReport> reports;
  reports.reserve(updates.size());
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> retries;
  absl::flat_hash_map<std::string, std::vector<int64_t>> archives =
      std::move(late_archives);
  TransactionEffects effects;
  if (!updates.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            tx->UpdateTasks(updates));
    for (size_t u = 0; u < updates.size(); ++u) {
      if (!applied[u]) continue;  // another transaction got there first
      const Plan& plan = plans[u];
      const TaskRecord& t = updates[u].task;
      outcome.dispositions[plan.result] = plan.disposition;
      if (plan.archive) archives[t.queue_name].push_back(t.message_id);
      if (plan.visible_at) {
        retries[t.queue_name].push_back({t.message_id, *plan.visible_at});
        if (*plan.visible_at <= now)
          effects.queues_to_wake.insert(t.queue_name);
      }
      if (plan.report) {
        reports.push_back(OutboxReport{.task = t.key,
                                       .flow_slug = t.flow_slug,
                                       .kind = *plan.report,
                                       .created_at = now});
      }
    }
  }
  for (auto& [queue, updates_for_queue] : retries) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(queue, updates_for_queue));
  }
  for (auto& [queue, ids] : archives) {
    SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(queue, ids, now));
  }
  if (!reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(outcome.report_ids, tx->AppendReports(reports));
  }
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  return outcome;
}

absl::StatusOr<std::vector<bool>> Engine::ExtendLeases(
    std::span<const Lease> leases) {
  std::vector<TaskKey> keys;
  keys.reserve(leases.size());
  for (const Lease& l : leases) keys.push_back(l.key);
  SLUICE_RETURN_IF_ERROR(ValidateKeys(keys, "ExtendLeases"));
  std::vector<bool> owned(leases.size(), false);
  if (leases.empty()) return owned;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx->GetTasks(keys, Fields::kNoPayloads));
  std::vector<TaskUpdate> updates;
  std::vector<size_t> index;
  std::vector<absl::Time> visible_until;
  FlowLookup flows(*impl_, *tx);
  for (size_t i = 0; i < leases.size(); ++i) {
    if (!tasks[i] || tasks[i]->status != TaskStatus::kStarted ||
        tasks[i]->attempts != leases[i].attempt) {
      continue;
    }
    TaskRecord& t = *tasks[i];
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
    LeaseTimes lease =
        ComputeLease(flow->step(t.key.step_index), now, impl_->options());
    TaskUpdate u{.task = t,
                 .expected_status = t.status,
                 .expected_attempts = t.attempts};
    u.task.stall_at = lease.stall_at;
    updates.push_back(std::move(u));
    index.push_back(i);
    visible_until.push_back(lease.visible_until);
  }
  if (updates.empty()) return owned;
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx->UpdateTasks(updates));
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> visibility;
  for (size_t u = 0; u < updates.size(); ++u) {
    if (!applied[u]) continue;
    owned[index[u]] = true;
    const TaskRecord& t = updates[u].task;
    visibility[t.queue_name].push_back({t.message_id, visible_until[u]});
  }
  for (auto& [queue, v] : visibility) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(queue, v));
  }
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return owned;
}

}  // namespace sluice
