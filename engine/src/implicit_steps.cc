#include "sluice/internal/implicit_steps.h"

#include <utility>

namespace sluice::internal {

bool HasImplicitStep(const FlowShape& shape) {
  return shape.steps.size() == 1 &&
         shape.steps.front().kind == StepKind::kSingle;
}

namespace {

// ImplicitStepState without the completed step's output. IsImplicit
// (below) compares with these same fields without building the record.
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

// Compares field by field with what DerivedWithoutOutput builds: every
// start and finish of a one-step run asks, and building the record costs
// more than the comparison. The engine parts test holds the two together.
bool IsImplicit(const StepStateRecord& state, const FlowShape& shape,
                const RunRecord& run) {
  const bool completed = run.status == RunStatus::kCompleted;
  if (!HasImplicitStep(shape) ||
      (!completed && run.status != RunStatus::kStarted) ||
      !state.unreadable.empty()) {
    return false;
  }
  const bool output_fits =
      state.status == StepStatus::kCompleted || !state.output.has_value();
  return output_fits && state.step_index == 0 &&
         state.status ==
             (completed ? StepStatus::kCompleted : StepStatus::kStarted) &&
         state.remaining_deps == 0 && state.initial_tasks == 1 &&
         state.remaining_tasks == (completed ? 0 : 1) && state.error.empty() &&
         state.skip_reason == SkipReason::kNone &&
         state.started_at == run.started_at &&
         (completed ? state.finished_at == run.finished_at
                    : !state.finished_at.has_value());
}

void AddImplicitStepState(const FlowShape& shape, const RunRecord& run,
                          std::vector<StepStateRecord>& states) {
  if (!states.empty()) return;
  if (std::optional<StepStateRecord> s = ImplicitStepState(shape, run)) {
    states.push_back(*std::move(s));
  }
}

}  // namespace sluice::internal
