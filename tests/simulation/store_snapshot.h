// Everything the store holds, read straight from the real backend (never
// through the simulator's fault-injecting wrapper): runs with their step
// states and tasks, where each task's message is, and the outbox reports not
// yet applied.
#ifndef SLUICE_TESTS_SIMULATION_STORE_SNAPSHOT_H_
#define SLUICE_TESTS_SIMULATION_STORE_SNAPSHOT_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/backend.h"

namespace sluice::simulation {

struct TaskSnapshot {
  TaskRecord task;
  bool message_found = false;
  bool message_archived = false;
};

struct RunSnapshot {
  RunRecord run;
  std::vector<StepStateRecord> steps;  // by step index
  std::vector<TaskSnapshot> tasks;     // by step, then task index
};

struct StoreSnapshot {
  // Oldest first. Shared, so an unchanged run is carried from one snapshot to
  // the next without copying (and the checker can tell it is unchanged).
  std::vector<std::shared_ptr<const RunSnapshot>> runs;
  std::vector<OutboxReport> pending_reports;
};

// Reads the store in one transaction that it rolls back: the pending
// reports are read by taking them, and the rollback puts them back.
//
// Without `previous`, reads every run. With it, reads again only the runs in
// `touched` (those committed transactions wrote to since `previous`; a run
// not yet in `previous` is new) and carries every other run over as it was:
// a run changes only if something writes to it.
absl::StatusOr<StoreSnapshot> ReadStore(Backend& backend,
                                        const StoreSnapshot* previous = nullptr,
                                        const std::vector<RunId>& touched = {});

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_STORE_SNAPSHOT_H_
