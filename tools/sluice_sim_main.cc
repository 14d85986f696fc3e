// sluice-sim: runs seeds of the deterministic simulator (docs/simulation.md).
//
//   sluice-sim --seeds N [--first S] [--jobs J]   run seeds S .. S+N-1; print
//                                                  the first failing seed
//   sluice-sim --seed S [--trace]                 run (replay) one seed
//
// Exits 0 when every seed passed, 1 when one failed, 2 on bad arguments.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "simulator.h"

namespace sluice::simulation {
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  sluice-sim --seeds N [--first S] [--jobs J] [--steps K] [--max-runs R]\n"
    "      runs seeds S .. S+N-1 (S defaults to 1) and prints the first\n"
    "      failing seed with the invariant it broke\n"
    "  sluice-sim --seed S [--trace] [--steps K] [--max-runs R]\n"
    "      runs one seed; --trace prints every step\n";

struct Args {
  std::optional<uint64_t> seed;
  uint64_t seeds = 0;
  uint64_t first = 1;
  int jobs = 1;
  bool trace = false;
  SimOptions sim;
};

bool ParseNumber(const std::string& flag, const char* text, uint64_t min,
                 uint64_t max, uint64_t* out) {
  if (!absl::SimpleAtoi(text, out) || *out < min || *out > max) {
    std::fprintf(stderr,
                 "sluice-sim: %s needs a number from %llu to %llu, not "
                 "\"%s\"\n",
                 flag.c_str(), static_cast<unsigned long long>(min),
                 static_cast<unsigned long long>(max), text);
    return false;
  }
  return true;
}

std::optional<Args> ParseArgs(int argc, char** argv) {
  Args args;
  constexpr uint64_t kAny = std::numeric_limits<uint64_t>::max();
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--trace") {
      args.trace = true;
      continue;
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "sluice-sim: %s needs a value\n%s", flag.c_str(),
                   kUsage);
      return std::nullopt;
    }
    const char* value = argv[++i];
    uint64_t n = 0;
    if (flag == "--seed") {
      if (!ParseNumber(flag, value, 0, kAny, &n)) return std::nullopt;
      args.seed = n;
    } else if (flag == "--seeds") {
      if (!ParseNumber(flag, value, 0, kAny, &n)) return std::nullopt;
      args.seeds = n;
    } else if (flag == "--first") {
      if (!ParseNumber(flag, value, 0, kAny, &n)) return std::nullopt;
      args.first = n;
    } else if (flag == "--jobs") {
      if (!ParseNumber(flag, value, 1, 256, &n)) return std::nullopt;
      args.jobs = static_cast<int>(n);
    } else if (flag == "--steps") {
      if (!ParseNumber(flag, value, 0, 1'000'000, &n)) return std::nullopt;
      args.sim.steps = static_cast<int>(n);
    } else if (flag == "--max-runs") {
      if (!ParseNumber(flag, value, 1, 10'000, &n)) return std::nullopt;
      args.sim.max_runs = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "sluice-sim: unknown option %s\n%s", flag.c_str(),
                   kUsage);
      return std::nullopt;
    }
  }
  if (args.seed.has_value() == (args.seeds > 0)) {
    std::fprintf(stderr, "sluice-sim: give either --seed S or --seeds N\n%s",
                 kUsage);
    return std::nullopt;
  }
  if (args.trace && !args.seed) {
    std::fprintf(stderr, "sluice-sim: --trace goes with --seed S\n");
    return std::nullopt;
  }
  return args;
}

void PrintFailure(const SimResult& r, const SimOptions& options) {
  std::printf("seed %llu FAILED after step %d: %s\n  %s\n",
              static_cast<unsigned long long>(r.seed), r.failed_step,
              r.violation->invariant.c_str(), r.violation->detail.c_str());
  std::string sizes;
  SimOptions defaults;
  if (options.steps != defaults.steps) {
    sizes += " --steps " + std::to_string(options.steps);
  }
  if (options.max_runs != defaults.max_runs) {
    sizes += " --max-runs " + std::to_string(options.max_runs);
  }
  std::printf("replay: sluice-sim --seed %llu%s --trace\n",
              static_cast<unsigned long long>(r.seed), sizes.c_str());
}

int RunOne(const Args& args) {
  SimOptions options = args.sim;
  options.seed = *args.seed;
  if (args.trace) {
    options.trace = [](std::string_view line) {
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
    };
  }
  SimResult r = Simulate(options);
  if (r.violation) {
    PrintFailure(r, options);
    return 1;
  }
  std::printf(
      "seed %llu passed: %d steps, %d runs (%d completed, %d failed, %d "
      "cancelled), %d claims, %d crashes, %lld injected failures\n",
      static_cast<unsigned long long>(r.seed), r.steps, r.runs_started,
      r.runs_completed, r.runs_failed, r.runs_cancelled, r.tasks_claimed,
      r.crashes, static_cast<long long>(r.injected_failures));
  return 0;
}

// Runs the seeds on `jobs` threads (one simulation per thread at a time;
// each is single-threaded and deterministic on its own). Once a seed fails,
// only lower seeds are still run, so the failure reported is the first.
int RunMany(const Args& args) {
  auto started = std::chrono::steady_clock::now();
  uint64_t end = args.first + args.seeds;
  std::atomic<uint64_t> next{args.first};
  std::atomic<uint64_t> stop_at{end};
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::optional<SimResult> first_failure;
  SimResult totals;
  auto work = [&] {
    while (true) {
      uint64_t seed = next.fetch_add(1);
      if (seed >= stop_at.load()) return;
      SimOptions options = args.sim;
      options.seed = seed;
      SimResult r = Simulate(options);
      std::lock_guard<std::mutex> lock(mu);
      totals.runs_started += r.runs_started;
      totals.runs_completed += r.runs_completed;
      totals.runs_failed += r.runs_failed;
      totals.runs_cancelled += r.runs_cancelled;
      totals.crashes += r.crashes;
      totals.injected_failures += r.injected_failures;
      if (r.violation && (!first_failure || seed < first_failure->seed)) {
        first_failure = r;
        uint64_t current = stop_at.load();
        while (seed < current &&
               !stop_at.compare_exchange_weak(current, seed)) {
        }
      }
      uint64_t count = ++done;
      if (count % 100'000 == 0) {
        std::fprintf(stderr, "sluice-sim: %llu seeds run\n",
                     static_cast<unsigned long long>(count));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < args.jobs; ++j) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (first_failure) {
    PrintFailure(*first_failure, args.sim);
    return 1;
  }
  std::printf(
      "%llu seeds passed (%llu..%llu) in %.1f s: %lld runs (%lld completed, "
      "%lld failed, %lld cancelled), %lld crashes, %lld injected failures\n",
      static_cast<unsigned long long>(args.seeds),
      static_cast<unsigned long long>(args.first),
      static_cast<unsigned long long>(end - 1), seconds,
      static_cast<long long>(totals.runs_started),
      static_cast<long long>(totals.runs_completed),
      static_cast<long long>(totals.runs_failed),
      static_cast<long long>(totals.runs_cancelled),
      static_cast<long long>(totals.crashes),
      static_cast<long long>(totals.injected_failures));
  return 0;
}

}  // namespace
}  // namespace sluice::simulation

int main(int argc, char** argv) {
  using namespace sluice::simulation;
  std::optional<Args> args = ParseArgs(argc, argv);
  if (!args) return 2;
  return args->seed ? RunOne(*args) : RunMany(*args);
}
