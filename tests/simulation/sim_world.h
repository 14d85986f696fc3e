// The simulator's world: the store, the engine and the simulated workers,
// and one method per kind of step. Internal to simulator.cc and
// sim_actions.cc.
#ifndef SLUICE_TESTS_SIMULATION_SIM_WORLD_H_
#define SLUICE_TESTS_SIMULATION_SIM_WORLD_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "invariants.h"
#include "sim_backend.h"
#include "sim_flows.h"
#include "sim_random.h"
#include "simulator.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "store_snapshot.h"

namespace sluice::simulation {

// A claimed task whose handler has run; its result is reported at
// `report_at`, or never if the handler hangs.
struct InFlight {
  ClaimedTask task;
  absl::StatusOr<StepResult> outcome;
  absl::Time report_at;
  bool hangs = false;
};

struct SimWorker {
  std::string id;
  size_t flow = 0;  // index into the flows; a worker serves one flow's queue
  bool deployed = false;
  std::vector<InFlight> in_flight;
  std::vector<TaskResult> unsent;  // FinishTasks failed; send again
  std::vector<int64_t> unapplied;  // report ids not pushed yet
};

// How a seed behaves, drawn once from it.
struct SimProfile {
  double fault_rate = 0;     // backend calls that fail while faults are on
  double handler_fails = 0;  // attempts that fail (retryable)
  double handler_fatal = 0;  // attempts that fail for good
  double handler_hangs = 0;  // attempts whose handler never returns
  // Attempts that return a value the engine must refuse: NaN, or a non-array
  // where a map step needs one.
  double handler_poison = 0;
  int workers = 1;
  int crash_weight = 0;
};

class World {
 public:
  explicit World(const SimOptions& options);

  // Runs the seed and returns what happened.
  SimResult Run();

 private:
  // --- simulator.cc: setup, the step loop, checks, settling ---
  void CreateEngine();
  SimWorker NewWorker(size_t flow);
  void Trace(std::string line);
  bool Step(int number);  // false once a violation is found
  // Checks the invariants; `full` reads every run again instead of carrying
  // over the ended runs nothing wrote to.
  bool CheckNow(std::optional<absl::Time> prune_cutoff = std::nullopt,
                bool full = false);
  bool Settle();
  bool SettleRound();
  // Records an engine call's failure: injected ones are expected, any other
  // is a violation. Returns false for a violation.
  bool Expect(const absl::Status& status, int64_t injected_before,
              std::string_view call);
  std::string RunName(const RunId& id) const;
  std::string TaskName(const TaskKey& key, int attempt) const;
  void Fail(std::string invariant, std::string detail);

  // --- sim_actions.cc: one method per kind of step ---
  bool StartRuns();
  bool ClaimTasks(SimWorker& worker);
  bool ReportResults(SimWorker& worker, bool all_due);
  bool Heartbeat(SimWorker& worker);
  bool PushReports(SimWorker& worker);
  bool SweepReports();
  bool RecoverStalled();
  bool CancelRun();
  bool Crash();
  bool ReplaceWorker(SimWorker& worker);
  bool PruneRuns(std::optional<absl::Time>& cutoff);
  bool Deploy(SimWorker& worker);
  InFlight RunHandler(const ClaimedTask& task);

  SimOptions options_;
  SimResult result_;
  SimRandom random_;
  SimRandom ids_random_;
  SimProfile profile_;
  ManualClock clock_;
  absl::Time start_time_;
  std::vector<SimFlow> flows_;
  std::unique_ptr<Backend> store_;
  std::unique_ptr<Backend> interposed_;
  std::unique_ptr<SimBackend> faulty_;
  std::unique_ptr<Engine> engine_;
  std::vector<SimWorker> workers_;
  int next_worker_ = 1;
  std::vector<RunId> runs_;  // in start order
  absl::flat_hash_map<RunId, int> run_numbers_;
  absl::flat_hash_set<std::pair<TaskKey, int>> claimed_attempts_;
  std::vector<RunId> started_runs_;  // started, as of the last check
  StoreSnapshot last_store_;
  // Which run each task message belongs to, from the snapshots read so far.
  absl::flat_hash_map<std::pair<std::string, int64_t>, RunId> message_runs_;
  InvariantChecker checker_;
  bool faults_on_ = false;
  // In the settle phase handlers neither fail nor hang, results are sent at
  // once, and every report is pushed.
  bool settling_ = false;
  int step_ = 0;
};

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_SIM_WORLD_H_
