// Engine::ExtendLeases and Engine::ReleaseTasks: a worker's heartbeat over
// the tasks it holds, and giving back tasks it will not run.
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine_impl.h"
#include "lease.h"
#include "ledger.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "taken_back.h"

namespace sluice {
namespace {

// Leases whose extension did not apply (states[] still kLost). A cancel
// request that landed after ExtendLeases read its tasks fails the write
// (the write waited for it); re-read those tasks so the heartbeat reports
// the request rather than a lost lease.
absl::Status NoteCancelRequests(Transaction& tx, std::span<const Lease> leases,
                                std::span<const size_t> lease_of_update,
                                const std::vector<bool>& applied,
                                std::vector<LeaseState>& states) {
  std::vector<TaskKey> keys;
  std::vector<size_t> lease_of_key;
  for (size_t u = 0; u < applied.size(); ++u) {
    if (applied[u]) continue;
    keys.push_back(leases[lease_of_update[u]].key);
    lease_of_key.push_back(lease_of_update[u]);
  }
  if (keys.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx.GetTasks(keys, Fields::kNoPayloads));
  for (size_t k = 0; k < keys.size(); ++k) {
    const size_t lease = lease_of_key[k];
    if (AttemptHolds(tasks[k], leases[lease].attempt) &&
        tasks[k]->cancel_requested) {
      states[lease] = LeaseState::kCancelRequested;
    }
  }
  return absl::OkStatus();
}

// The releases of the tasks `leases` still hold, in lease order.
struct Releases {
  std::vector<TaskUpdate> updates;
  std::vector<AttemptRecord> entries;  // one per update
  std::vector<size_t> lease_of;        // one per update
};

// Reads the leases' tasks and plans each release: back to the queue, or
// cancelled when its run asked. Each write expects the request flag that was
// read, so a request landing after the read fails it instead of being
// cleared.
absl::Status PlanReleases(Transaction& tx, std::span<const Lease> leases,
                          absl::Time now, Releases& out) {
  std::vector<TaskKey> keys;
  for (const Lease& l : leases) keys.push_back(l.key);
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx.GetTasks(keys, Fields::kNoPayloads));
  for (size_t i = 0; i < leases.size(); ++i) {
    if (!AttemptHolds(tasks[i], leases[i].attempt)) continue;  // stale
    TaskRecord& t = *tasks[i];
    TaskUpdate u{.task = t,
                 .expected_status = TaskStatus::kStarted,
                 .expected_attempts = t.attempts,
                 .expected_cancel_requested = t.cancel_requested};
    TaskRecord& next = u.task;
    next.stall_at.reset();
    if (t.cancel_requested) {
      next.status = TaskStatus::kCancelled;
      next.finished_at = now;
      out.entries.push_back(EndedAttempt(t, AttemptOutcome::kCancelled, now));
    } else {
      // No attempt used: the budget moves up with `attempts`, which still
      // grows so that this claim's late results stay fenced off.
      next.status = TaskStatus::kQueued;
      next.started_at.reset();
      next.budget_start = t.budget_start + 1;
      out.entries.push_back(EndedAttempt(t, AttemptOutcome::kReleased, now));
    }
    out.updates.push_back(std::move(u));
    out.lease_of.push_back(i);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<LeaseState>> Engine::ExtendLeases(
    std::span<const Lease> leases) {
  std::vector<TaskKey> keys;
  keys.reserve(leases.size());
  for (const Lease& l : leases) keys.push_back(l.key);
  SLUICE_RETURN_IF_ERROR(ValidateKeys(keys, "ExtendLeases"));
  std::vector<LeaseState> states(leases.size(), LeaseState::kLost);
  if (leases.empty()) return states;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx->GetTasks(keys, Fields::kNoPayloads));
  std::vector<TaskUpdate> updates;
  std::vector<size_t> index;
  std::vector<absl::Time> visible_until;
  FlowLookup flows(*impl_, *tx);
  for (size_t i = 0; i < leases.size(); ++i) {
    if (!AttemptHolds(tasks[i], leases[i].attempt)) continue;
    TaskRecord& t = *tasks[i];
    if (t.cancel_requested) {
      // Owned, but not extended: a handler that ignores the request loses
      // its lease, and stall recovery then cancels the task.
      states[i] = LeaseState::kCancelRequested;
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
    TaskPolicy policy = EffectivePolicy(flow->step(t.key.step_index), t);
    LeaseTimes lease = ComputeLease(policy.timeout, now, impl_->options());
    // The read took no lock: a cancel request that lands before this write
    // must fail it, not be cleared by it.
    TaskUpdate u{.task = t,
                 .expected_status = t.status,
                 .expected_attempts = t.attempts,
                 .expected_cancel_requested = false};
    u.task.stall_at = lease.stall_at;
    updates.push_back(std::move(u));
    index.push_back(i);
    visible_until.push_back(lease.visible_until);
  }
  if (updates.empty()) return states;
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx->UpdateTasks(updates));
  SLUICE_RETURN_IF_ERROR(
      NoteCancelRequests(*tx, leases, index, applied, states));
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> visibility;
  for (size_t u = 0; u < updates.size(); ++u) {
    if (!applied[u]) continue;
    states[index[u]] = LeaseState::kOwned;
    const TaskRecord& t = updates[u].task;
    visibility[t.queue_name].push_back({t.message_id, visible_until[u]});
  }
  for (auto& [queue, v] : visibility) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(queue, v));
  }
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return states;
}

absl::Status Engine::ReleaseTasks(std::span<const Lease> leases) {
  std::vector<TaskKey> keys;
  keys.reserve(leases.size());
  for (const Lease& l : leases) {
    if (l.attempt < 1) {
      return absl::InvalidArgumentError(
          StrCat("ReleaseTasks: attempt ", l.attempt, " is invalid (>= 1)"));
    }
    keys.push_back(l.key);
  }
  SLUICE_RETURN_IF_ERROR(ValidateKeys(keys, "ReleaseTasks"));
  if (leases.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  Releases releases;
  SLUICE_RETURN_IF_ERROR(PlanReleases(*tx, leases, now, releases));
  if (releases.updates.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          tx->UpdateTasks(releases.updates));
  // A cancel request that landed after the read failed its task's write:
  // plan those once more from a fresh read.
  std::vector<Lease> raced;
  for (size_t u = 0; u < applied.size(); ++u) {
    if (!applied[u]) raced.push_back(leases[releases.lease_of[u]]);
  }
  Releases again;
  if (!raced.empty()) {
    SLUICE_RETURN_IF_ERROR(PlanReleases(*tx, raced, now, again));
  }
  if (!again.updates.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied_again,
                            tx->UpdateTasks(again.updates));
    for (size_t u = 0; u < again.updates.size(); ++u) {
      releases.updates.push_back(std::move(again.updates[u]));
      releases.entries.push_back(std::move(again.entries[u]));
      applied.push_back(applied_again[u]);
    }
  }
  TransactionEffects effects;
  SLUICE_ASSIGN_OR_RETURN(TakenBack taken,
                          WriteTakenBack(*tx, releases.updates, applied,
                                         releases.entries, now, effects));
  const std::vector<int64_t>& report_ids = taken.report_ids;
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  // The push path; the reconcile path catches them if this fails.
  if (absl::Status s = ApplyReports(report_ids); !s.ok()) {
    impl_->Log(LogLevel::kWarning,
               StrCat("release: applying reports failed (", s.ToString(),
                      "); the sweeper will apply them"));
  }
  return absl::OkStatus();
}

}  // namespace sluice
