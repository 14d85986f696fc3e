// The simulator over many seeds: every invariant holds after every step, and
// a seed replays exactly. `sluice-sim --seeds N` runs millions the same way.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simulation/simulator.h"

namespace sluice::simulation {
namespace {

// Seeds the test runs: sized to stay well under a minute in the Debug
// AddressSanitizer build on two cores (docs/simulation.md has the figures).
constexpr uint64_t kSeeds = 2000;

std::vector<std::string> TraceOf(uint64_t seed) {
  std::vector<std::string> lines;
  SimOptions options;
  options.seed = seed;
  options.trace = [&lines](std::string_view line) { lines.emplace_back(line); };
  SimResult result = Simulate(options);
  EXPECT_FALSE(result.violation.has_value()) << "seed " << seed;
  return lines;
}

TEST(Simulation, ManySeeds_KeepEveryInvariant) {
  SimResult totals;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SimResult r = Simulate({.seed = seed});
    ASSERT_FALSE(r.violation.has_value())
        << "seed " << seed << " broke " << r.violation->invariant
        << " after step " << r.failed_step << ": " << r.violation->detail
        << "\nreplay: sluice-sim --seed " << seed << " --trace";
    totals.runs_started += r.runs_started;
    totals.runs_completed += r.runs_completed;
    totals.runs_failed += r.runs_failed;
    totals.runs_cancelled += r.runs_cancelled;
    totals.tasks_claimed += r.tasks_claimed;
    totals.crashes += r.crashes;
    totals.injected_failures += r.injected_failures;
  }
  // The seeds reach every ending and every kind of fault.
  EXPECT_GT(totals.runs_completed, totals.runs_started / 2);
  EXPECT_GT(totals.runs_failed, 0);
  EXPECT_GT(totals.runs_cancelled, 0);
  EXPECT_GT(totals.crashes, 0);
  EXPECT_GT(totals.injected_failures, 0);
  EXPECT_GT(totals.tasks_claimed, totals.runs_started);
}

TEST(Simulation, SameSeed_ReplaysTheSameTrace) {
  std::vector<std::string> first = TraceOf(7);
  std::vector<std::string> second = TraceOf(7);
  EXPECT_GT(first.size(), 100u);
  EXPECT_EQ(first, second);
}

TEST(Simulation, DifferentSeeds_TakeDifferentPaths) {
  EXPECT_NE(TraceOf(7), TraceOf(8));
}

}  // namespace
}  // namespace sluice::simulation
