// Wait steps (docs/decisions/0030-signals.md): a task that no handler runs.
// Its message stays hidden until the wait's timeout, so the only claim that
// ever reads it is the one that applies the timeout policy; a signal
// completes it before that.
#ifndef SLUICE_ENGINE_WAIT_STEPS_H_
#define SLUICE_ENGINE_WAIT_STEPS_H_

#include <string>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "compiled_flow.h"
#include "ledger.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice {

// When a Wait step without a timeout would become visible: far enough that
// no claim reads it, near enough for every backend's timestamps.
inline absl::Time WaitForever() {
  return absl::FromCivil(absl::CivilSecond(9999, 1, 1, 0, 0, 0),
                         absl::UTCTimeZone());
}

// When the message of a Wait step's task that started waiting at `start`
// becomes visible: when its timeout fires.
inline absl::Time WaitVisibleAt(const CompiledStep& step, absl::Time start) {
  const std::optional<absl::Duration>& timeout = step.shape->wait.timeout;
  return timeout ? start + *timeout : WaitForever();
}

// The error a Wait step's task records when its timeout fires. On a task
// completed with the timeout output it stays as a note, which is also how a
// later signal tells a timed-out wait from a signalled one.
inline std::string WaitTimeoutError(const CompiledStep& step) {
  const WaitSpec& wait = step.shape->wait;
  std::string error = "timed out waiting for a signal";
  if (wait.timeout) {
    error += " after " + absl::FormatDuration(*wait.timeout);
  }
  if (wait.on_timeout == WaitTimeoutPolicy::kComplete) {
    error += "; completed with the step's timeout output";
  }
  return error;
}

// The update that ends a queued Wait task: completed with `output` by a
// signal (`worker_id` empty), or by its timeout policy at a claim by
// `worker_id`. The end counts as one attempt, recorded in the ledger.
struct WaitEnd {
  TaskUpdate update;
  AttemptRecord attempt;
  ReportKind report = ReportKind::kCompleted;
};
inline WaitEnd EndWait(const TaskRecord& task, const CompiledStep& step,
                       std::optional<Json> signal, std::string worker_id,
                       absl::Time now) {
  WaitEnd end;
  end.update.expected_status = task.status;
  end.update.expected_attempts = task.attempts;
  TaskRecord& next = end.update.task;
  next = task;
  next.attempts = task.attempts + 1;
  next.started_at = now;
  next.finished_at = now;
  next.stall_at.reset();
  next.worker_id = std::move(worker_id);
  if (signal) {
    next.status = TaskStatus::kCompleted;
    next.output = std::move(*signal);
    next.error.clear();
  } else if (step.shape->wait.on_timeout == WaitTimeoutPolicy::kComplete) {
    next.status = TaskStatus::kCompleted;
    next.output = step.shape->wait.timeout_output;
    next.error = WaitTimeoutError(step);
  } else {
    next.status = TaskStatus::kFailed;
    next.output.reset();
    next.error = WaitTimeoutError(step);
    end.report = ReportKind::kFailed;
  }
  end.attempt = EndedAttempt(
      next,
      next.status == TaskStatus::kCompleted ? AttemptOutcome::kCompleted
                                            : AttemptOutcome::kFailed,
      now, next.status == TaskStatus::kFailed ? next.error : "");
  return end;
}

}  // namespace sluice

#endif  // SLUICE_ENGINE_WAIT_STEPS_H_
