#include "sluice/internal/implicit_steps.h"

#include <utility>

namespace sluice::internal {

bool HasImplicitStep(const FlowShape& shape) {
  return shape.steps.size() == 1 &&
         shape.steps.front().kind == StepKind::kSingle;
}

namespace {

// What a one-step run's row says of the step's state where it varies with
// the run: started with its one task open, or completed. The other fields
// are fixed: step 0, one task, no dependencies, no error or skip, the
// run's start time. Nullopt when the state is not derived (another shape,
// or a run that failed or was cancelled, whose step state is stored).
struct DerivedFields {
  StepStatus status;
  int remaining_tasks;
  bool finished;  // then the step's finish time is the run's
};

std::optional<DerivedFields> DerivedFieldsOf(const FlowShape& shape,
                                             const RunRecord& run) {
  if (!HasImplicitStep(shape)) return std::nullopt;
  switch (run.status) {
    case RunStatus::kStarted:
      return DerivedFields{StepStatus::kStarted, 1, false};
    case RunStatus::kCompleted:
      return DerivedFields{StepStatus::kCompleted, 0, true};
    default:
      return std::nullopt;
  }
}

// ImplicitStepState without the completed step's output.
std::optional<StepStateRecord> DerivedWithoutOutput(const FlowShape& shape,
                                                    const RunRecord& run) {
  std::optional<DerivedFields> derived = DerivedFieldsOf(shape, run);
  if (!derived) return std::nullopt;
  StepStateRecord s;
  s.run_id = run.run_id;
  s.step_index = 0;
  s.step_slug = shape.steps.front().slug;
  s.status = derived->status;
  s.initial_tasks = 1;
  s.remaining_tasks = derived->remaining_tasks;
  s.started_at = run.started_at;
  if (derived->finished) s.finished_at = run.finished_at;
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

// Compares with DerivedWithoutOutput's record field by field instead of
// building it: every start and finish of a one-step run asks, and building
// the record costs more than the comparison. The engine parts test holds
// the two together.
bool IsImplicit(const StepStateRecord& state, const FlowShape& shape,
                const RunRecord& run) {
  std::optional<DerivedFields> derived = DerivedFieldsOf(shape, run);
  if (!derived || !state.unreadable.empty()) return false;
  const bool output_fits =
      state.status == StepStatus::kCompleted || !state.output.has_value();
  return output_fits && state.step_index == 0 &&
         state.status == derived->status && state.remaining_deps == 0 &&
         state.initial_tasks == 1 &&
         state.remaining_tasks == derived->remaining_tasks &&
         state.error.empty() && state.skip_reason == SkipReason::kNone &&
         state.started_at == run.started_at &&
         (derived->finished ? state.finished_at == run.finished_at
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
