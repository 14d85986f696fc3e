// Google Benchmark of the task path on the memory backend, one thread:
// claim -> complete -> report application (which releases dependents and
// settles runs). Items are tasks.
//
// Each iteration ends by pruning the runs it finished (Engine::PruneRuns,
// timed too), as a long-running system with retention does. Without it the
// store only grows and the figure measures the VM's first-touch page faults
// (15-19 us per 4 KiB page here) rather than the engine; /0 variants keep
// everything, for comparison.
//
// The store reads behind a metrics scrape (Engine::Metrics, the in-flight
// counts) and behind `sluice status` (Engine::ListQueueStatus, every count)
// are timed over a store of range(0) ended jobs and 100 queued ones.
#include <benchmark/benchmark.h>

#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "memory_backend.h"
#include "sluice/engine.h"
#include "sluice/metrics.h"

namespace sluice {
namespace {

struct Bench {
  ManualClock clock;
  MemoryBackend backend;
  std::unique_ptr<Engine> engine;
  ClaimRequest request;

  explicit Bench(const Flow& flow) {
    engine = *Engine::Create(backend, {.clock = &clock});
    (void)engine->Deploy(flow);
    request.queue = flow.shape().steps[0].queue_name;
    request.worker_id = "bench";
    request.served.AddFlow(flow.shape());
  }

  // Deletes every run that has ended (returns false on error).
  bool Prune() {
    while (true) {
      absl::StatusOr<int> pruned =
          engine->PruneRuns(clock.Now() + absl::Seconds(1), 10'000);
      if (!pruned.ok()) return false;
      if (*pruned < 10'000) return true;
    }
  }

  // Claims, "runs" (output = input) and finishes until nothing is left.
  int64_t Drain(int batch) {
    int64_t tasks = 0;
    request.limit = batch;
    std::vector<TaskResult> results;
    while (true) {
      absl::StatusOr<std::vector<ClaimedTask>> claimed = engine->Claim(request);
      if (!claimed.ok() || claimed->empty()) return tasks;
      results.clear();
      for (ClaimedTask& t : *claimed) {
        results.push_back({t.key, t.attempt, std::move(t.input)});
      }
      absl::StatusOr<FinishOutcome> done = engine->FinishTasks(results);
      if (!done.ok() || !engine->ApplyReports(done->report_ids).ok()) return -1;
      tasks += static_cast<int64_t>(results.size());
    }
  }
};

Handler Identity() {
  return
      [](const Json& in, TaskContext&) -> absl::StatusOr<Json> { return in; };
}

// One-step jobs: the step "job" returns its input.
Flow JobsFlow() {
  Flow flow("bench_jobs");
  flow.Step("job", Identity());
  return flow;
}

// A map step of 1,000 tasks feeding a reduce step: claim, complete and
// release in batches of range(0); range(1) = 1 prunes each iteration.
void BM_MapStep_ClaimCompleteRelease(benchmark::State& state) {
  Flow flow("bench_map");
  flow.Map("each", Identity())
      .Step("reduce", {.depends_on = {"each"}}, Identity());
  Bench bench(flow);
  Json input = boost::json::array(1000, 7);
  int64_t tasks = 0;
  for (auto _ : state) {
    if (!bench.engine->StartRun("bench_map", input).ok())
      state.SkipWithError("start");
    int64_t drained = bench.Drain(static_cast<int>(state.range(0)));
    if (drained < 0) state.SkipWithError("drain failed");
    if (state.range(1) == 1 && !bench.Prune()) state.SkipWithError("prune");
    tasks += drained;
  }
  state.SetItemsProcessed(tasks);
}
BENCHMARK(BM_MapStep_ClaimCompleteRelease)
    ->ArgsProduct({{10, 100, 1000}, {1, 0}});

// One-step jobs, the whole life: start 100 runs, claim, complete, settle;
// range(0) = 1 prunes each iteration.
void BM_Jobs_StartClaimCompleteSettle(benchmark::State& state) {
  Bench bench(JobsFlow());
  std::vector<Json> inputs(100, boost::json::object{{"n", 1}});
  int64_t tasks = 0;
  for (auto _ : state) {
    if (!bench.engine->StartRuns("bench_jobs", inputs).ok())
      state.SkipWithError("start");
    tasks += bench.Drain(100);
    if (state.range(0) == 1 && !bench.Prune()) state.SkipWithError("prune");
  }
  state.SetItemsProcessed(tasks);
}
BENCHMARK(BM_Jobs_StartClaimCompleteSettle)->Arg(1)->Arg(0);

// range(0) ended one-step jobs, then 100 queued: what a scrape or a status
// read finds in a store that keeps its history.
void StoreWithHistory(Bench& bench, int64_t ended) {
  std::vector<Json> inputs(1000, boost::json::object{{"n", 1}});
  for (int64_t done = 0; done < ended; done += 1000) {
    (void)bench.engine->StartRuns("bench_jobs", inputs);
    bench.Drain(1000);
  }
  inputs.resize(100);
  (void)bench.engine->StartRuns("bench_jobs", inputs);
}

void BM_Metrics_InFlightCounts(benchmark::State& state) {
  Bench bench(JobsFlow());
  StoreWithHistory(bench, state.range(0));
  for (auto _ : state) {
    MetricsSnapshot snapshot = bench.engine->Metrics();
    if (!snapshot.store_error.empty()) state.SkipWithError("metrics");
    benchmark::DoNotOptimize(snapshot);
  }
}
BENCHMARK(BM_Metrics_InFlightCounts)->Arg(1'000)->Arg(100'000);

void BM_QueueStatus_AllCounts(benchmark::State& state) {
  Bench bench(JobsFlow());
  StoreWithHistory(bench, state.range(0));
  for (auto _ : state) {
    auto statuses = bench.engine->ListQueueStatus(absl::Seconds(30));
    if (!statuses.ok()) state.SkipWithError("status");
    benchmark::DoNotOptimize(statuses);
  }
}
BENCHMARK(BM_QueueStatus_AllCounts)->Arg(1'000)->Arg(100'000);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
