// A one-step flow's step state is not stored while its run's row already
// says it: started while the run is started, completed once the run
// completed (docs/decisions/0069). Every other state (failed, skipped,
// cancelled, a step reopened by RetryRun, one started later than its run)
// is stored as before, and a stored state always wins. Whoever reads step
// states adds the derived one where none is stored: the engine, and the
// simulation's checker, which reads the backend directly.
#ifndef SLUICE_INTERNAL_IMPLICIT_STEPS_H_
#define SLUICE_INTERNAL_IMPLICIT_STEPS_H_

#include <optional>
#include <vector>

#include "sluice/flow.h"
#include "sluice/records.h"

namespace sluice::internal {

// Whether runs of `shape` leave their step state unstored while it is
// derivable: one step, of one task (not a map, not a Wait).
bool HasImplicitStep(const FlowShape& shape);

// The step state a run of `shape` (HasImplicitStep) has when none is
// stored: started while `run` is started; completed once it completed,
// with the run's output for the step if `run.output` was read. nullopt for
// a run in any other state, whose step state is stored.
std::optional<StepStateRecord> ImplicitStepState(const FlowShape& shape,
                                                 const RunRecord& run);

// Whether `state` is what ImplicitStepState derives from `run`, outputs
// aside (a completed step's output is in the run's), so it need not be
// stored.
bool IsImplicit(const StepStateRecord& state, const FlowShape& shape,
                const RunRecord& run);

// Adds to `states` (one run's stored step states) the derived state if
// none is stored and `shape` has an implicit step.
void AddImplicitStepState(const FlowShape& shape, const RunRecord& run,
                          std::vector<StepStateRecord>& states);

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_IMPLICIT_STEPS_H_
