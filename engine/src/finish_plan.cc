// The retry policy of a task, and the plan of one attempt's result.
#include "finish_plan.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "run_options.h"
#include "sluice/errors.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "utf8.h"

namespace sluice {

TaskPolicy EffectivePolicy(const CompiledStep& step, const TaskRecord& task) {
  TaskPolicy policy{.max_attempts = step.max_attempts,
                    .timeout = step.timeout,
                    .backoff = Backoff{step.backoff, step.base_delay}};
  if (task.options.is_null()) return policy;
  TaskOverrides overrides = ParseTaskOverrides(task.options);
  if (overrides.max_attempts) policy.max_attempts = *overrides.max_attempts;
  if (overrides.timeout) policy.timeout = *overrides.timeout;
  if (overrides.backoff) policy.backoff = *overrides.backoff;
  return policy;
}

absl::Duration BackoffDelay(const Backoff& backoff, int used) {
  // floor(base * 2^used), computed in microseconds; capped so large attempt
  // counts can't overflow.
  int64_t base = absl::ToInt64Microseconds(backoff.delay);
  int64_t cap = absl::ToInt64Microseconds(kMaxRetryDelay);
  int64_t delay = base;
  if (backoff.kind == BackoffKind::kExponential) {
    for (int i = 0; i < used && delay < cap; ++i) delay *= 2;
  }
  return absl::Microseconds(std::min(delay, cap));
}

absl::Duration BackoffDelay(const CompiledStep& step, int used) {
  return BackoffDelay(Backoff{step.backoff, step.base_delay}, used);
}

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

namespace finish_internal {
namespace {

// Handlers write error text; storage needs valid UTF-8.
std::string FailureMessage(const absl::Status& status) {
  std::string message = ToValidUtf8(ToStd(status.message()));
  if (message.empty())
    message = StrCat("handler failed (", status.ToString(), ")");
  return message;
}

// Ends a started task as cancelled: its run asked it to stop. A report
// (kind kFailed, read back as cancelled by the task's status) lets the run
// settle once nothing of it is started.
void PlanCancelled(TaskRecord& next, Plan& plan, absl::Time now,
                   std::string error) {
  next.status = TaskStatus::kCancelled;
  next.finished_at = now;
  next.error = error;
  plan.disposition = ResultDisposition::kCancelled;
  plan.report = ReportKind::kFailed;
  plan.archive = true;
  plan.attempt.outcome = AttemptOutcome::kCancelled;
  plan.attempt.error = std::move(error);
}

}  // namespace

// Plans the failure of one started attempt: retried after its backoff,
// cancelled when its run asked it to stop, else failed for good.
void PlanFailure(const absl::Status& failure, const TaskPolicy& policy,
                 TaskRecord& next, Plan& plan, absl::Time now) {
  std::string error = FailureMessage(failure);
  // Cancellation wins over revival: a task whose run asked it to stop ends
  // cancelled whatever it failed with; a handler returning kCancelled says
  // it honoured the request.
  if (next.cancel_requested) {
    PlanCancelled(next, plan, now, std::move(error));
    return;
  }
  next.error = error;
  plan.attempt.error = error;
  bool retry =
      !IsNonRetryable(failure) && BudgetUsed(next) < policy.max_attempts;
  if (!retry) {
    next.status = TaskStatus::kFailed;
    next.finished_at = now;
    plan.disposition = ResultDisposition::kFailed;
    plan.report = ReportKind::kFailed;
    plan.archive = true;
    plan.attempt.outcome = AttemptOutcome::kFailed;
    return;
  }
  absl::Duration delay = BackoffDelay(policy.backoff, BudgetUsed(next));
  if (std::optional<absl::Duration> chosen = RetryDelayOf(failure)) {
    absl::Status valid = ValidateRetryDelay(*chosen);
    if (valid.ok()) {
      delay = *chosen;
    } else {
      StrAppend(&next.error, " (retry delay ignored: ", valid.message(), ")");
      plan.attempt.error = next.error;
    }
  }
  next.status = TaskStatus::kQueued;
  next.started_at.reset();
  plan.disposition = ResultDisposition::kRetrying;
  plan.visible_at = now + delay;
  plan.attempt.outcome = AttemptOutcome::kRetried;
}

// Plans a handler's output: completed, or failed if it can't be stored or
// a map step can't map over it. Returns the failure to plan instead, if any.
absl::Status PlanOutput(const Json& output, const CompiledStep& step,
                        size_t max_payload_bytes, TaskRecord& next, Plan& plan,
                        absl::Time now) {
  absl::Status valid =
      CheckJsonPayload(output, "handler output", max_payload_bytes);
  if (!valid.ok()) return NonRetryable(ToStd(valid.message()));
  next.output = output;
  next.finished_at = now;
  plan.archive = true;
  if (step.feeds_map && !output.is_array()) {
    next.status = TaskStatus::kFailed;
    next.error = StrCat("[TYPE_VIOLATION] Produced ", JsonTypeName(output),
                        " instead of array");
    plan.disposition = ResultDisposition::kFailed;
    plan.report = ReportKind::kTypeViolation;
    plan.attempt.outcome = AttemptOutcome::kFailed;
    plan.attempt.error = next.error;
    return absl::OkStatus();
  }
  // Completion wins over a pending cancel request.
  next.status = TaskStatus::kCompleted;
  plan.disposition = ResultDisposition::kCompleted;
  plan.report = ReportKind::kCompleted;
  plan.attempt.outcome = AttemptOutcome::kCompleted;
  return absl::OkStatus();
}

// Counts a stored result toward its step's metrics.
void Tally(const Plan& plan, const TaskRecord& task, absl::Time now,
           StepTally& tally) {
  StepTally::Entry& e = tally.For(task.flow_slug, plan.step->shape->slug);
  switch (plan.disposition) {
    case ResultDisposition::kCompleted:
      ++e.completed;
      e.latency_seconds.push_back(ToSeconds(now - task.queued_at));
      break;
    case ResultDisposition::kRetrying:
      ++e.retried;
      break;
    case ResultDisposition::kFailed:
      ++e.failed;
      break;
    default:
      break;
  }
}

}  // namespace finish_internal
}  // namespace sluice
