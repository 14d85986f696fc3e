// An optional capability of a Transaction: counter moves checked by the
// backend where it writes them. The engine works out, with the runs locked,
// what each counter must be after its move; the returning calls
// (UpdateRunsAndCounters, UpdateStepStatesAndCounters, AddRunRemainingSteps,
// AddStepCounters) hand the new counters back for the engine to compare,
// which costs a backend whose calls are round trips one trip each. These
// take the expected counters instead and return nothing, so such a backend
// sends them without waiting. One per delta, as the returning calls would
// return them: a row moved twice is checked at its last delta.
//
// A row that does not exist fails the transaction with kNotFound ("run ...
// does not exist"); a counter that differs fails it with kInternal, naming
// the run or step, the counter and both values. Either failure surfaces at
// the latest at Commit, and nothing is changed.
//
// The engine finds it with dynamic_cast and uses the returning calls where
// a transaction lacks it, as for one_trip_claims.h.
#ifndef SLUICE_INTERNAL_CHECKED_COUNTERS_H_
#define SLUICE_INTERNAL_CHECKED_COUNTERS_H_

#include <span>

#include "absl/status/status.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::internal {

class CheckedCounterMoves {
 public:
  virtual absl::Status UpdateRunsAndCheckCounters(
      std::span<RunRecord> runs, std::span<const RunCounterDelta> deltas,
      std::span<const int> expected) = 0;
  virtual absl::Status UpdateStepStatesAndCheckCounters(
      std::span<StepStateRecord> states,
      std::span<const StepCounterDelta> deltas,
      std::span<const StepCounters> expected) = 0;
  virtual absl::Status AddRunRemainingStepsChecked(
      std::span<const RunCounterDelta> deltas,
      std::span<const int> expected) = 0;
  virtual absl::Status AddStepCountersChecked(
      std::span<const StepCounterDelta> deltas,
      std::span<const StepCounters> expected) = 0;

 protected:
  ~CheckedCounterMoves() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_CHECKED_COUNTERS_H_
