// The simulator over many seeds: every invariant holds after every step, and
// a seed replays exactly. `sluice-sim --seeds N` runs millions the same way.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "simulation/simulator.h"

namespace sluice::simulation {
namespace {

// The test runs 2,000 seeds of 60 steps and at most 8 runs each, in 8 shards
// that ctest runs two at a time: about 50 ms of CPU a seed in the Debug
// AddressSanitizer build, so under a minute on two cores. sluice-sim runs
// longer seeds (150 steps, 16 runs) and as many as you like.
constexpr int kShards = 8;
constexpr uint64_t kSeedsPerShard = 250;
constexpr int kSteps = 60;
constexpr int kMaxRuns = 8;

std::vector<std::string> TraceOf(uint64_t seed) {
  std::vector<std::string> lines;
  SimOptions options;
  options.seed = seed;
  options.trace = [&lines](std::string_view line) { lines.emplace_back(line); };
  SimResult result = Simulate(options);
  EXPECT_FALSE(result.violation.has_value()) << "seed " << seed;
  return lines;
}

class SimulationSeeds : public ::testing::TestWithParam<int> {};

TEST_P(SimulationSeeds, EverySeed_KeepsEveryInvariant) {
  SimResult totals;
  uint64_t first = static_cast<uint64_t>(GetParam()) * kSeedsPerShard + 1;
  for (uint64_t seed = first; seed < first + kSeedsPerShard; ++seed) {
    SimResult r =
        Simulate({.seed = seed, .steps = kSteps, .max_runs = kMaxRuns});
    ASSERT_FALSE(r.violation.has_value())
        << "seed " << seed << " broke " << r.violation->invariant
        << " after step " << r.failed_step << ": " << r.violation->detail
        << "\nreplay: sluice-sim --seed " << seed << " --steps " << kSteps
        << " --max-runs " << kMaxRuns << " --trace";
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

INSTANTIATE_TEST_SUITE_P(Shards, SimulationSeeds, ::testing::Range(0, kShards));

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
