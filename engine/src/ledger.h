// Attempts ledger entries: one per ended attempt, written in the same
// transaction as the transition that ended it (docs/decisions/0018), except
// the attempt that completes its task through FinishTasks: the task row
// holds all of that entry, so it is derived when the ledger is read
// (docs/decisions/0067).
#ifndef SLUICE_ENGINE_LEDGER_H_
#define SLUICE_ENGINE_LEDGER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "sluice/records.h"

namespace sluice {

// The entry for the attempt `task` (as it was while started) ended with.
inline AttemptRecord EndedAttempt(const TaskRecord& task,
                                  AttemptOutcome outcome, absl::Time now,
                                  std::string error = "") {
  AttemptRecord a;
  a.task = task.key;
  a.attempt = task.attempts;
  a.worker_id = task.worker_id;
  a.started_at = task.started_at;
  a.finished_at = now;
  a.outcome = outcome;
  a.error = std::move(error);
  return a;
}

// Adds to `attempts` (one run's stored ledger, by task then attempt) the
// entry of each completed task's last attempt that is not stored, derived
// from the task row; keeps the order.
void AddDerivedAttempts(const std::vector<TaskRecord>& tasks,
                        std::vector<AttemptRecord>& attempts);

}  // namespace sluice

#endif  // SLUICE_ENGINE_LEDGER_H_
