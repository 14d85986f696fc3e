#include "sluice/internal/implicit_steps.h"

#include <utility>

namespace sluice::internal {

bool HasImplicitStep(const FlowShape& shape) {
  return shape.steps.size() == 1 &&
         shape.steps.front().kind == StepKind::kSingle;
}

namespace {

// ImplicitStepState without the completed step's output, which IsImplicit
// ignores: a finish checks every completing job, and need not copy it.
std::optional<StepStateRecord> DerivedWithoutOutput(const FlowShape& shape,
                                                    const RunRecord& run) {
  if (!HasImplicitStep(shape) || (run.status != RunStatus::kStarted &&
                                  run.status != RunStatus::kCompleted)) {
    return std::nullopt;
  }
  StepStateRecord s;
  s.run_id = run.run_id;
  s.step_index = 0;
  s.step_slug = shape.steps.front().slug;
  s.initial_tasks = 1;
  s.started_at = run.started_at;
  if (run.status == RunStatus::kStarted) {
    s.status = StepStatus::kStarted;
    s.remaining_tasks = 1;
    return s;
  }
  s.status = StepStatus::kCompleted;
  s.remaining_tasks = 0;
  s.finished_at = run.finished_at;
  return s;
}

}  // namespace

std::optional<StepStateRecord> ImplicitStepState(const FlowShape& shape,
                                                 const RunRecord& run) {
  std::optional<StepStateRecord> s = DerivedWithoutOutput(shape, run);
  if (s && s->status == StepStatus::kCompleted && run.output.has_value() &&
      run.output->is_object()) {
    if (const Json* output =
            run.output->as_object().if_contains(s->step_slug)) {
      s->output = *output;
    }
  }
  return s;
}

bool IsImplicit(const StepStateRecord& state, const FlowShape& shape,
                const RunRecord& run) {
  const std::optional<StepStateRecord> derived =
      DerivedWithoutOutput(shape, run);
  if (!derived || !state.unreadable.empty()) return false;
  const bool output_fits =
      state.status == StepStatus::kCompleted || !state.output.has_value();
  return output_fits && state.step_index == derived->step_index &&
         state.status == derived->status &&
         state.remaining_deps == derived->remaining_deps &&
         state.initial_tasks == derived->initial_tasks &&
         state.remaining_tasks == derived->remaining_tasks &&
         state.error == derived->error &&
         state.skip_reason == derived->skip_reason &&
         state.started_at == derived->started_at &&
         state.finished_at == derived->finished_at;
}

void AddImplicitStepState(const FlowShape& shape, const RunRecord& run,
                          std::vector<StepStateRecord>& states) {
  if (!states.empty()) return;
  if (std::optional<StepStateRecord> s = ImplicitStepState(shape, run)) {
    states.push_back(*std::move(s));
  }
}

}  // namespace sluice::internal
