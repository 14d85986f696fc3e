// Google Benchmark of the task path on the memory backend, one thread:
// claim -> complete -> report application (which releases dependents and
// settles runs). Items are tasks.
#include <benchmark/benchmark.h>

#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "memory_backend.h"
#include "sluice/engine.h"

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

// A map step of 1,000 tasks feeding a reduce step: claim, complete and
// release in batches of range(0).
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
    tasks += drained;
  }
  state.SetItemsProcessed(tasks);
}
BENCHMARK(BM_MapStep_ClaimCompleteRelease)->Arg(10)->Arg(100)->Arg(1000);

// One-step jobs, the whole life: start 100 runs, claim, complete, settle.
void BM_Jobs_StartClaimCompleteSettle(benchmark::State& state) {
  Flow flow("bench_jobs");
  flow.Step("job", Identity());
  Bench bench(flow);
  std::vector<Json> inputs(100, boost::json::object{{"n", 1}});
  int64_t tasks = 0;
  for (auto _ : state) {
    if (!bench.engine->StartRuns("bench_jobs", inputs).ok())
      state.SkipWithError("start");
    tasks += bench.Drain(100);
  }
  state.SetItemsProcessed(tasks);
}
BENCHMARK(BM_Jobs_StartClaimCompleteSettle);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
