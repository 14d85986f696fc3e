// The one place that turns a task's effective settings into deadlines and
// retry delays. Claim, heartbeat, results and stall recovery all use it, so
// they always agree.
#ifndef SLUICE_ENGINE_LEASE_H_
#define SLUICE_ENGINE_LEASE_H_

#include <optional>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "compiled_flow.h"
#include "sluice/backend.h"
#include "sluice/engine.h"

namespace sluice {

// A task's effective attempt settings: its own overrides (TaskRecord
// options), else its step's, else its flow's.
struct TaskPolicy {
  int max_attempts = 1;  // per budget (attempts - budget_start)
  absl::Duration timeout;
  Backoff backoff;
};
TaskPolicy EffectivePolicy(const CompiledStep& step, const TaskRecord& task);

// Attempts of the task's current budget used so far.
inline int BudgetUsed(const TaskRecord& task) {
  return task.attempts - task.budget_start;
}

struct LeaseTimes {
  absl::Time deadline;       // the handler should be done by now
  absl::Time visible_until;  // the task's message stays hidden until then
  absl::Time stall_at;       // stall recovery may take the task back after
};

// `timeout` is the effective one (EffectivePolicy); `now` is the claim or
// heartbeat time.
//
// The lease rule stall recovery relies on (StalledQuery): while a task is
// started, its message stays in its queue, and every write of its
// visibility keeps it at most max(stall_at, the write's time) +
// claim_grace. A lease's visible_until is stall_at - recovery_grace +
// claim_grace (recovery_grace >= claim_grace >= 0); a claim that reads the
// message of a task already started hides it until max(stall_at, now +
// claim_grace). Nothing else moves a started task's message later.
inline LeaseTimes ComputeLease(absl::Duration timeout, absl::Time now,
                               const EngineOptions& options) {
  return LeaseTimes{
      .deadline = now + timeout,
      .visible_until = now + timeout + options.claim_grace,
      .stall_at = now + timeout + options.recovery_grace,
  };
}

// Whether attempt `attempt` still holds `task` (as read): the task is
// started and that claim is its latest. Anything else makes a worker's
// report about it stale.
inline bool AttemptHolds(const std::optional<TaskRecord>& task, int attempt) {
  return task && task->status == TaskStatus::kStarted &&
         task->attempts == attempt;
}

// Checks the task keys of a worker call (`what` names it): each valid, none
// twice.
absl::Status ValidateKeys(std::span<const TaskKey> keys, std::string_view what);

// The retry delay after `used` attempts of the budget failed: exponential
// waits floor(delay * 2^used), fixed waits delay; both capped at the longest
// retry delay a handler may choose.
absl::Duration BackoffDelay(const Backoff& backoff, int used);
// The step's own backoff (no task overrides).
absl::Duration BackoffDelay(const CompiledStep& step, int used);

}  // namespace sluice

#endif  // SLUICE_ENGINE_LEASE_H_
