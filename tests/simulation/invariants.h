// The rules a simulated store must obey after every step, checked from a
// snapshot read straight from the real backend. Each broken rule is a
// Violation named by a short stable id (see docs/simulation.md).
#ifndef SLUICE_TESTS_SIMULATION_INVARIANTS_H_
#define SLUICE_TESTS_SIMULATION_INVARIANTS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "sim_backend.h"
#include "sim_flows.h"
#include "store_snapshot.h"

namespace sluice::simulation {

struct Violation {
  std::string invariant;  // e.g. "step-remaining-tasks"
  std::string detail;     // which run, step or task, and what was found
};

// Names a run in messages ("r3"); the simulator numbers runs as it starts
// them, so a name means the same run in every replay of a seed.
using RunNamer = std::function<std::string(const RunId&)>;

class InvariantChecker {
 public:
  // `flows` must outlive the checker.
  InvariantChecker(const std::vector<SimFlow>& flows, RunNamer namer);

  // Says that the simulator asked to cancel `run` (only such runs may end
  // cancelled).
  void NoteCancelRequested(const RunId& run) { cancel_requested_.insert(run); }

  // Checks `store`, and what changed since the previous Check. Runs that
  // disappear are allowed only if the step pruned with `prune_cutoff` and
  // they had ended before it. Returns the first violation found.
  std::optional<Violation> Check(
      const StoreSnapshot& store, const ReportLedger& ledger,
      std::optional<absl::Time> prune_cutoff = std::nullopt);

  // Once faults stopped and the simulator drove everything it could: every
  // run ended and no report is left to apply.
  std::optional<Violation> CheckSettled(const StoreSnapshot& store);

 private:
  struct SeenRun {
    RunStatus status = RunStatus::kStarted;
    std::optional<absl::Time> finished_at;
    std::optional<Json> output;
  };
  struct SeenTask {
    TaskStatus status = TaskStatus::kQueued;
    int attempts = 0;
    std::optional<Json> output;
  };
  // What Check needs to know about one run beyond its snapshot.
  struct RunContext {
    const RunSnapshot* run = nullptr;
    const SimFlow* flow = nullptr;
    std::string name;
    // Per step: completed tasks whose completion report is still pending.
    std::vector<int> pending_completions;
  };

  std::optional<Violation> CheckLedger(const ReportLedger& ledger);
  std::optional<Violation> CheckVanished(
      const StoreSnapshot& store, std::optional<absl::Time> prune_cutoff);
  std::optional<Violation> CheckReports(const StoreSnapshot& store);
  std::optional<Violation> CheckRun(const RunContext& context);
  std::optional<Violation> CheckEndedRun(const RunContext& context);
  std::optional<Violation> CheckCounters(const RunContext& context);
  std::optional<Violation> CheckStep(const RunContext& context, int step);
  std::optional<Violation> CheckTask(const RunContext& context,
                                     const TaskSnapshot& task);
  std::optional<Violation> CheckHistory(const RunContext& context);
  std::string TaskName(const TaskKey& key) const;
  const SimFlow* FlowNamed(std::string_view slug) const;

  const std::vector<SimFlow>& flows_;
  RunNamer namer_;
  absl::flat_hash_set<RunId> cancel_requested_;
  absl::flat_hash_map<RunId, SeenRun> seen_runs_;
  absl::flat_hash_map<TaskKey, SeenTask> seen_tasks_;
  // The runs of the last snapshot checked. A run carried into the next
  // snapshot unchanged (the same object) passed every check already; holding
  // them keeps their addresses from being reused by new snapshots.
  std::vector<std::shared_ptr<const RunSnapshot>> last_runs_;
  absl::flat_hash_set<const RunSnapshot*> checked_;
};

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_INVARIANTS_H_
