// A deterministic simulator: from one seed it drives the engine on the
// memory backend with many simulated workers (starts, claims, results,
// failures, handler timeouts, heartbeats, cancels, clock jumps, engine
// crashes, injected backend failures), checks the invariants after every
// step, then stops the faults and drives until every run has ended.
//
// Everything is a function of the seed: time comes from a ManualClock, run
// ids from a seeded source, and nothing runs on another thread, so a failing
// seed fails the same way, at the same step, every time.
//
//   SimResult result = Simulate({.seed = 42});
//   if (result.violation) { ... result.failed_step, result.violation->invariant
//   }
#ifndef SLUICE_TESTS_SIMULATION_SIMULATOR_H_
#define SLUICE_TESTS_SIMULATION_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "invariants.h"
#include "sluice/backend.h"

namespace sluice::simulation {

struct SimOptions {
  uint64_t seed = 1;
  int steps = 150;         // random steps before the settle phase
  int max_runs = 16;       // runs started at most
  int settle_rounds = 60;  // rounds of the settle phase before giving up
  // Receives one line per step (and the engine's log lines) when set.
  std::function<void(std::string_view)> trace;
  // Placed between the fault injector and the store when set; tests use it
  // to corrupt what the engine reads or writes and see the checker notice.
  std::function<std::unique_ptr<Backend>(Backend& store)> interpose;
};

struct SimResult {
  uint64_t seed = 0;
  std::optional<Violation> violation;
  int failed_step = -1;  // the step after which the violation was seen
  int steps = 0;         // steps taken, the settle phase's included
  int runs_started = 0;
  int runs_completed = 0;
  int runs_failed = 0;
  int runs_cancelled = 0;
  int tasks_claimed = 0;
  int crashes = 0;
  int64_t injected_failures = 0;
};

SimResult Simulate(const SimOptions& options);

}  // namespace sluice::simulation

#endif  // SLUICE_TESTS_SIMULATION_SIMULATOR_H_
