// An optional capability of a Transaction: everything a run's view shows
// read in one call, so that a backend whose calls are round trips to a
// server sends the four reads in one trip (the dashboard's run page and
// `sluice runs show` read it).
//
// Engine::GetRun finds it with dynamic_cast and falls back to the separate
// Transaction calls where a transaction lacks it, as for OneTripClaims
// (one_trip_claims.h); the backend interface (backend.h) is unchanged.
#ifndef SLUICE_INTERNAL_ONE_TRIP_READS_H_
#define SLUICE_INTERNAL_ONE_TRIP_READS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::internal {

struct RunWithParts {
  RunRecord run;
  std::vector<StepStateRecord> steps;
  std::vector<TaskRecord> tasks;
  std::vector<AttemptRecord> attempts;
};

class OneTripRunReads {
 public:
  // GetRuns({run_id}, kNone, kAll), GetStepStates({run_id}, kAll),
  // ListTasks(run_id) and ListAttempts(run_id): the same results, or
  // nullopt where the run does not exist.
  virtual absl::StatusOr<std::optional<RunWithParts>> ReadRunWithParts(
      const RunId& run_id) = 0;

 protected:
  ~OneTripRunReads() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_READS_H_
