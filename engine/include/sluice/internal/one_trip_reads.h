// An optional capability of a Transaction: reads that the engine needs
// together, made in one call, so that a backend whose calls are round trips
// to a server sends them in one trip:
// - everything a run's view shows (the dashboard's run page and `sluice
//   runs show`; Engine::GetRun);
// - runs with their step states, the runs locked first (applying reports,
//   when a finish applies its completions and on the outbox path).
//
// The engine finds it with dynamic_cast and falls back to the separate
// Transaction calls where a transaction lacks it, as for OneTripClaims
// (one_trip_claims.h); the backend interface (backend.h) is unchanged.
#ifndef SLUICE_INTERNAL_ONE_TRIP_READS_H_
#define SLUICE_INTERNAL_ONE_TRIP_READS_H_

#include <optional>
#include <span>
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

struct RunsWithSteps {
  std::vector<std::optional<RunRecord>> runs;
  std::vector<std::vector<StepStateRecord>> steps;  // one list per run id
};

class OneTripRunReads {
 public:
  // GetRuns({run_id}, kNone, kAll), GetStepStates({run_id}, kAll),
  // ListTasks(run_id) and ListAttempts(run_id): the same results, or
  // nullopt where the run does not exist.
  virtual absl::StatusOr<std::optional<RunWithParts>> ReadRunWithParts(
      const RunId& run_id) = 0;
  // GetRuns(run_ids, lock, fields), then GetStepStates(run_ids, fields)
  // once those locks are held: the same results. The steps of a run that
  // came back nullopt (missing, or skipped by kSkipLocked) were read without
  // its lock; callers ignore them.
  virtual absl::StatusOr<RunsWithSteps> ReadRunsWithSteps(
      std::span<const RunId> run_ids, LockMode lock, Fields fields) = 0;

 protected:
  ~OneTripRunReads() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_READS_H_
