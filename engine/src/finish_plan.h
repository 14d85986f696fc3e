// How a finish plans the result of one started attempt: the task's next
// state, and what must follow if its write applies (finish.cc).
#ifndef SLUICE_ENGINE_FINISH_PLAN_H_
#define SLUICE_ENGINE_FINISH_PLAN_H_

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "ledger.h"
#include "metrics_registry.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"

namespace sluice::finish_internal {

// The planned write for one result, and what must follow if it applies.
struct Plan {
  size_t result = 0;
  ResultDisposition disposition = ResultDisposition::kStale;
  std::optional<ReportKind> report;
  bool archive = false;
  std::optional<absl::Time> visible_at;  // for a retry
  AttemptRecord attempt;                 // the ledger entry
  const CompiledStep* step = nullptr;    // for the metrics
};

// Plans the failure of one started attempt: retried after its backoff,
// cancelled when its run asked it to stop, else failed for good.
void PlanFailure(const absl::Status& failure, const TaskPolicy& policy,
                 TaskRecord& next, Plan& plan, absl::Time now);

// Plans a handler's output: completed, or failed if it can't be stored or
// a map step can't map over it. Returns the failure to plan instead, if any.
absl::Status PlanOutput(const Json& output, const CompiledStep& step,
                        size_t max_payload_bytes, TaskRecord& next, Plan& plan,
                        absl::Time now);

// Counts a stored result toward its step's metrics.
void Tally(const Plan& plan, const TaskRecord& task, absl::Time now,
           StepTally& tally);

// Appends to `updates` and `plans` the write and plan for a result whose
// task `t` (as read, moved from; or as its claim stored it, copied) still
// runs the result's attempt.
template <typename Record>
absl::Status PlanResult(FlowLookup& flows, const EngineOptions& options,
                        const TaskResult& result, size_t index, Record&& t,
                        absl::Time now, std::vector<TaskUpdate>& updates,
                        std::vector<Plan>& plans) {
  SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
  const CompiledStep& step = flow->step(t.key.step_index);
  TaskPolicy policy = EffectivePolicy(step, t);
  const bool cancel_seen = t.cancel_requested;
  Plan& plan = plans.emplace_back(Plan{.result = index, .step = &step});
  plan.attempt = EndedAttempt(t, AttemptOutcome::kFailed, now);
  // Built in place: a task record is large, and moving it costs.
  TaskUpdate& u = updates.emplace_back();
  u.task = std::forward<Record>(t);
  u.expected_status = TaskStatus::kStarted;
  u.expected_attempts = result.attempt;
  TaskRecord& next = u.task;
  next.stall_at.reset();
  absl::Status failure = result.outcome.status();
  if (result.outcome.ok()) {
    // A FanOut without children completes at once with no results.
    static const Json* const kNoResults = new Json(boost::json::array());
    const Json& output =
        result.outcome->is_fan_out() ? *kNoResults : result.outcome->output();
    failure =
        PlanOutput(output, step, options.max_payload_bytes, next, plan, now);
  }
  if (!failure.ok()) PlanFailure(failure, policy, next, plan, now);
  // Neither the read nor the claim's record took a lock. A cancel request
  // that landed since must fail this write (decisions 0055, 0078), so that
  // the result is planned again from a fresh read.
  u.expected_cancel_requested = cancel_seen;
  return absl::OkStatus();
}

}  // namespace sluice::finish_internal

#endif  // SLUICE_ENGINE_FINISH_PLAN_H_
