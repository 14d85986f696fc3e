// An optional capability of a Transaction: a finish's task updates and the
// read of the runs its completions may apply to, in one call, so that a
// backend whose calls are round trips sends them in one trip. The runs are
// named before the updates' results are known: those of every completion
// the finish writes, applied or not (an update another transaction beat
// leaves its run read, and locked if `lock` says so, for nothing).
//
// The engine finds it with dynamic_cast and falls back to UpdateTasks and
// a later read where a transaction lacks it, as for one_trip_reads.h.
#ifndef SLUICE_INTERNAL_ONE_TRIP_FINISHES_H_
#define SLUICE_INTERNAL_ONE_TRIP_FINISHES_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/internal/one_trip_reads.h"

namespace sluice::internal {

class OneTripFinishes {
 public:
  struct Updated {
    std::vector<bool> applied;  // as UpdateTasks returns it
    RunsWithSteps runs;         // as ReadRunsWithSteps returns it
  };
  // UpdateTasks(updates), then ReadRunsWithSteps(run_ids, lock, fields):
  // the same results.
  virtual absl::StatusOr<Updated> UpdateTasksThenReadRuns(
      std::span<TaskUpdate> updates, std::span<const RunId> run_ids,
      LockMode lock, Fields fields) = 0;

 protected:
  ~OneTripFinishes() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_FINISHES_H_
