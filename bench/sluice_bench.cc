// sluice-bench: end-to-end workloads through real workers.
//
//   sluice-bench --backend URL --workload W1|W2|W3|W4|W5|W6|W7
//                [--no-baseline] [--floors] [--runs N] [--w6-depth N]
//                [--w7-elements N]
//
// W1: enqueue and process 20,000 one-step jobs with one worker at
//     concurrency 10 (enqueued in batches while the worker runs).
// W2: 1,000 runs of root -> map over the root's 10-element array -> reduce
//     (12 tasks a run).
//     --runs sets W1's or W2's number of runs (a longer window for a
//     memory store, which does W1's 20,000 in about 0.1 s).
// W3: 200 one-step jobs started one after another on an idle worker;
//     enqueue-to-handler-start latency (see latency_workload.h).
// W4: 20,000 jobs through Enqueue (priorities 0-9, every tenth with a
//     dedupe key), one worker at concurrency 10, measured next to W1 in the
//     same run: the job layer's cost over plain runs.
// W5: one handler fans out 10,000 children, next to the same jobs through
//     EnqueueMany in the same run (see fanout_workload.h).
// W6: 1,000,000 jobs (--w6-depth) left queued, then W1's jobs on top in the
//     same queue, next to the same on an empty store (depth_workload.h).
// W7: one run of a root map over 100,000 elements (--w7-elements), next to
//     the same number of jobs through EnqueueMany (fanout_workload.h).
//
// Every workload ends with one line:
//   RESULT workload=<W> backend=<name> value=<v> baseline=<b> ratio=<v/b>
//   <workload fields> [wal_per_job=.. baseline_wal_per_job=.. hot=..
//   baseline_hot=..]
// value is the figure (jobs or tasks per second; p50 ms for W3; W5's
// microseconds per child, so lower is better there) and baseline the
// same-run baseline's. The workload fields are the older names:
// tasks_per_s / baseline_per_s (W1, W2), p50_ms / p99_ms / wake /
// baseline_p50_ms (W3), jobs_per_s / w1_per_s (W4), children /
// per_child_us / enqueue_many_per_job_us (W5), jobs_per_s / empty_per_s /
// depth (W6), elements / start_run_ms / per_element_us /
// enqueue_many_per_job_us / start_bytes_per_element / run_bytes_per_element
// (W7; value is per_element_us, lower is better). On Postgres,
// wal_per_job is the WAL the server wrote per job (pg_current_wal_lsn()
// before and after, cluster-wide) and hot the share
// of row updates in the measured database that were HOT
// (pg_stat_user_tables); a line before RESULT gives them per table.
//
// With --floors, W1 on memory and Postgres and W7 on SQLite also measure
// the floor of the store's model, the same rows with no engine
// (memory_floor.h, postgres_floor.h, sqlite_map_floor.h), after the
// workload. Their fields: floor_per_s, shared_floor_per_s and floor_ratio
// (W1 / the owned floor) on memory; floor_per_s, floor_ratio (W1 / the
// floor), floor_wal_per_job and the same two without the task row
// (floor_without_task_per_s, floor_wal_per_job_without_task) on Postgres;
// floor_ms and floor_ratio (the map's time / the floor's) on SQLite.
//
// The baseline, measured in the same process just before, is the simplest
// loop that does the same job on the same storage (see baseline.h and
// postgres_support.h), so the ratio survives a noisy machine. W4 to W7
// compare with a Sluice workload instead (W1; EnqueueMany for W5 and W7,
// which measures W7's after the map; W6 on an empty store).
//
// SQLite files and Postgres databases are created afresh for each
// measurement: a Postgres URL names the server, and the bench drops and
// recreates the databases sluice_bench and sluice_bench_baseline there.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "baseline.h"
#include "bench_report.h"
#include "boost/json.hpp"
#include "depth_workload.h"
#include "fanout_workload.h"
#include "latency_workload.h"
#include "memory_floor.h"
#include "postgres_floor.h"
#include "postgres_support.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sqlite_map_floor.h"

namespace sluice::bench {
namespace {

struct Options {
  std::string backend = "memory:";
  std::string workload = "W1";
  bool baseline = true;
  bool floors = false;  // --floors: the model's floors too
  int concurrency = 10;
  int batch_size = 100;
  int runs = 0;  // W1 and W2; 0 for the workload's own number
  int w6_depth = 1'000'000;
  int w7_elements = 100'000;
};

Flow JobFlow() {
  Flow flow("bench_w1");
  flow.Step("job", [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    return in.at("run");
  });
  return flow;
}

Flow MapReduceFlow() {
  Flow flow("bench_w2");
  flow.Step("root",
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              boost::json::array items;
              int64_t base = in.at("run").at("n").as_int64();
              for (int i = 0; i < 10; ++i) items.emplace_back(base + i);
              return items;
            })
      .Map("square", {.depends_on = {"root"}},
           [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
             return in.as_int64() * in.as_int64();
           })
      .Step("reduce", {.depends_on = {"square"}},
            [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              int64_t total = 0;
              for (const Json& v : in.at("square").as_array())
                total += v.as_int64();
              return total;
            });
  return flow;
}

Job BenchJob() {
  return Job("bench_w4", {.queue = "bench_w4"},
             [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
               return payload;
             });
}

// Submits runs [first, end); called for each batch of kEnqueueBatch.
using Submit = std::function<absl::Status(Engine&, int first, int end)>;
constexpr int kEnqueueBatch = 500;

absl::Status StartRunsOf(const std::string& flow_slug, Engine& engine,
                         int first, int end) {
  std::vector<Json> inputs;
  for (int i = first; i < end; ++i) {
    inputs.push_back(boost::json::object{{"n", i}});
  }
  return engine.StartRuns(flow_slug, inputs).status();
}

// W4's items: priority i % 10, and every tenth carries a dedupe key of its
// own (so every job runs, and each pays for the registry).
absl::Status EnqueueJobs(const std::string& job_name, Engine& engine, int first,
                         int end) {
  std::vector<Engine::EnqueueItem> items;
  for (int i = first; i < end; ++i) {
    Engine::EnqueueItem item{.payload = boost::json::object{{"n", i}}};
    item.options.priority = i % 10;
    if (i % 10 == 3)
      item.options.dedupe = Dedupe{.key = "k" + std::to_string(i)};
    items.push_back(std::move(item));
  }
  absl::StatusOr<std::vector<EnqueueResult>> results =
      engine.EnqueueMany(job_name, items);
  if (!results.ok()) return results.status();
  for (const EnqueueResult& r : *results) {
    if (r.duplicate) return absl::InternalError("a W4 job was a duplicate");
  }
  return absl::OkStatus();
}

// Runs `runs` runs of `flow` through one worker; returns tasks per second.
absl::StatusOr<double> RunWorkload(const Options& options, const Flow& flow,
                                   int runs, int tasks_per_run,
                                   const Submit& submit) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      OpenBackend(options.backend);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return engine.status();
  WorkerOptions worker_options;
  worker_options.concurrency = options.concurrency;
  worker_options.batch_size = options.batch_size;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*engine)->StartWorker(flow, worker_options);
  if (!worker.ok()) return worker.status();

  absl::Time start = absl::Now();
  for (int first = 0; first < runs; first += kEnqueueBatch) {
    absl::Status submitted =
        submit(**engine, first, std::min(runs, first + kEnqueueBatch));
    if (!submitted.ok()) return submitted;
  }
  // Done when the worker has completed every task. Polling its counters
  // costs the engine nothing, unlike subscribing to events.
  const int64_t total = static_cast<int64_t>(runs) * tasks_per_run;
  absl::Time give_up = start + absl::Minutes(10);
  while ((*worker)->stats().completed < total) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError("tasks did not finish in 10 minutes");
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  absl::Duration elapsed = absl::Now() - start;
  if (absl::Status s = (*worker)->Stop(); !s.ok()) return s;
  absl::StatusOr<std::vector<RunRecord>> sample =
      (*engine)->ListRuns(flow.slug(), 100);
  if (!sample.ok()) return sample.status();
  for (const RunRecord& r : *sample) {
    if (r.status != RunStatus::kCompleted) {
      return absl::InternalError("run " + r.run_id.ToString() +
                                 " did not complete");
    }
  }
  return total / absl::ToDoubleSeconds(elapsed);
}

absl::StatusOr<Options> Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--backend") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      o.backend = *v;
    } else if (a == "--workload") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      o.workload = *v;
    } else if (a == "--runs") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (!absl::SimpleAtoi(*v, &o.runs) || o.runs < 1 || o.runs > 10'000'000) {
        return absl::InvalidArgumentError(
            "--runs must be a whole number from 1 to 10000000, not \"" + *v +
            "\"");
      }
    } else if (a == "--w6-depth") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (!absl::SimpleAtoi(*v, &o.w6_depth) || o.w6_depth < 0) {
        return absl::InvalidArgumentError(
            "--w6-depth must be a whole number >= 0, not \"" + *v + "\"");
      }
    } else if (a == "--w7-elements") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (!absl::SimpleAtoi(*v, &o.w7_elements) || o.w7_elements < 1) {
        return absl::InvalidArgumentError(
            "--w7-elements must be a whole number >= 1, not \"" + *v + "\"");
      }
    } else if (a == "--no-baseline") {
      o.baseline = false;
    } else if (a == "--floors") {
      o.floors = true;
    } else {
      return absl::InvalidArgumentError("unknown argument " + a);
    }
  }
  if (o.workload != "W1" && o.workload != "W2" && o.workload != "W3" &&
      o.workload != "W4" && o.workload != "W5" && o.workload != "W6" &&
      o.workload != "W7") {
    return absl::InvalidArgumentError(
        "--workload must be W1, W2, W3, W4, W5, W6 or W7");
  }
  const std::string backend = BackendName(o.backend);
  const bool has_floor =
      (o.workload == "W1" && (backend == "memory" || backend == "postgres")) ||
      (o.workload == "W7" && backend == "sqlite");
  if (o.floors && !has_floor) {
    return absl::InvalidArgumentError(
        "--floors measures W1 on memory: or Postgres and W7 on sqlite:, not " +
        o.workload + " on " + backend);
  }
  return o;
}

absl::StatusOr<double> Baseline(const std::string& url, int jobs,
                                int concurrency, std::optional<PgCost>& cost) {
  absl::StatusOr<std::string> fresh = FreshUrl(url, ".baseline");
  if (!fresh.ok()) return fresh.status();
  return Metered(*fresh, cost, [&]() -> absl::StatusOr<double> {
    if (IsPostgresUrl(url)) return PostgresJobsBaseline(*fresh, jobs);
    return MeasureBaseline(*fresh, jobs, concurrency);
  });
}

int Report(const absl::Status& status) {
  std::fprintf(stderr, "sluice-bench: %s\n", status.ToString().c_str());
  return 1;
}

// W1's floors, the same rows with no engine, as RESULT fields: in memory,
// jobs/s with payloads owned and shared, and `rate` (W1's) over the owned
// one; on Postgres, jobs/s and WAL a job with and without the task row, and
// `rate` over the first (Parse refuses --floors for W1 on SQLite).
absl::StatusOr<std::string> W1FloorFields(const Options& options, int jobs,
                                          double rate) {
  const std::string backend = BackendName(options.backend);
  if (backend == "memory") {
    double owned = MemoryModelFloor(jobs, false);
    double shared = MemoryModelFloor(jobs, true);
    std::printf(
        "model floor: the same rows with no engine, %.0f jobs/s with owned "
        "payloads, %.0f with shared ones\n",
        owned, shared);
    return absl::StrFormat(
        " floor_per_s=%.0f shared_floor_per_s=%.0f floor_ratio=%.3f", owned,
        shared, rate / owned);
  }
  if (backend != "postgres") return std::string();
  PostgresFloor floors[2];  // with the task row, then without
  for (bool with_tasks : {true, false}) {
    absl::StatusOr<std::string> fresh =
        FreshUrl(options.backend, with_tasks ? ".floor" : ".floor_runs");
    if (!fresh.ok()) return fresh.status();
    absl::StatusOr<PostgresFloor> floor =
        PostgresW1Floor(*fresh, jobs, with_tasks);
    if (!floor.ok()) return floor.status();
    floors[with_tasks ? 0 : 1] = *floor;
  }
  std::printf(
      "rows floor: the same rows by plain SQL on three connections, %.0f "
      "jobs/s and WAL %.0f bytes/job (run, task, message); %.0f jobs/s and "
      "%.0f bytes/job (run and message only)\n",
      floors[0].jobs_per_s, floors[0].wal_per_job, floors[1].jobs_per_s,
      floors[1].wal_per_job);
  return absl::StrFormat(
      " floor_per_s=%.0f floor_ratio=%.3f floor_wal_per_job=%.0f "
      "floor_without_task_per_s=%.0f floor_wal_per_job_without_task=%.0f",
      floors[0].jobs_per_s, rate / floors[0].jobs_per_s, floors[0].wal_per_job,
      floors[1].jobs_per_s, floors[1].wal_per_job);
}

int RunThroughput(const Options& options) {
  bool w1 = options.workload == "W1";
  int runs = options.runs > 0 ? options.runs : w1 ? 20'000 : 1'000;
  int tasks_per_run = w1 ? 1 : 12;
  int total_tasks = runs * tasks_per_run;
  Outcome o{.workload = options.workload,
            .backend = BackendName(options.backend),
            .jobs = total_tasks};
  if (options.baseline) {
    absl::StatusOr<double> b = Baseline(options.backend, total_tasks,
                                        options.concurrency, o.baseline_cost);
    if (!b.ok()) return Report(b.status());
    o.baseline = *b;
    o.baseline_jobs = total_tasks;
    std::printf("baseline: %s, %d jobs, %.0f jobs/s\n",
                IsPostgresUrl(options.backend)
                    ? "plain Postgres jobs table, claim 10 + complete 10 per "
                      "transaction"
                    : BaselineDescription(options.backend).c_str(),
                total_tasks, *b);
  }
  Options measured = options;
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  measured.backend = *fresh;
  const Flow flow = w1 ? JobFlow() : MapReduceFlow();
  absl::StatusOr<double> rate = Metered(*fresh, o.cost, [&] {
    return RunWorkload(measured, flow, runs, tasks_per_run,
                       [&](Engine& engine, int first, int end) {
                         return StartRunsOf(flow.slug(), engine, first, end);
                       });
  });
  if (!rate.ok()) return Report(rate.status());
  o.value = *rate;
  o.fields = absl::StrFormat(" tasks_per_s=%.0f", *rate);
  if (o.baseline.has_value()) {
    o.fields += absl::StrFormat(" baseline_per_s=%.0f", *o.baseline);
  }
  if (w1 && options.floors) {
    absl::StatusOr<std::string> floor =
        W1FloorFields(options, total_tasks, *rate);
    if (!floor.ok()) return Report(floor.status());
    o.fields += *floor;
  }
  PrintResult(o);
  return 0;
}

// W1 then W4 on fresh storage each, so the ratio is of the same moment.
int RunJobs(const Options& options) {
  constexpr int kJobs = 20'000;
  Outcome o{.workload = "W4",
            .backend = BackendName(options.backend),
            .jobs = kJobs,
            .baseline_jobs = kJobs};
  double rates[2] = {0, 0};
  for (int w4 = 0; w4 < 2; ++w4) {
    Options measured = options;
    absl::StatusOr<std::string> fresh =
        FreshUrl(options.backend, w4 ? "" : ".baseline");
    if (!fresh.ok()) return Report(fresh.status());
    measured.backend = *fresh;
    const Job job = BenchJob();
    const Flow flow = w4 ? job.flow() : JobFlow();
    absl::StatusOr<double> rate =
        Metered(*fresh, w4 ? o.cost : o.baseline_cost, [&] {
          return RunWorkload(
              measured, flow, kJobs, 1,
              [&](Engine& engine, int first, int end) {
                return w4 ? EnqueueJobs(job.name(), engine, first, end)
                          : StartRunsOf(flow.slug(), engine, first, end);
              });
        });
    if (!rate.ok()) return Report(rate.status());
    rates[w4] = *rate;
    std::printf("%s: %d jobs, %.0f jobs/s\n",
                w4 ? "W4 (Enqueue, priorities, dedupe keys)"
                   : "W1 (StartRuns of a one-step flow)",
                kJobs, *rate);
  }
  o.value = rates[1];
  o.baseline = rates[0];
  o.fields =
      absl::StrFormat(" jobs_per_s=%.0f w1_per_s=%.0f", rates[1], rates[0]);
  PrintResult(o);
  return 0;
}

// W6: the jobs on top of a deep queue, next to the same on an empty store.
int RunDepth(const Options& options) {
  DepthWorkload workload{.depth = options.w6_depth,
                         .concurrency = options.concurrency,
                         .batch_size = options.batch_size};
  Outcome o{.workload = "W6",
            .backend = BackendName(options.backend),
            .jobs = workload.jobs,
            .baseline_jobs = workload.jobs};
  for (bool deep : {false, true}) {
    absl::StatusOr<std::string> fresh =
        FreshUrl(options.backend, deep ? "" : ".baseline");
    if (!fresh.ok()) return Report(fresh.status());
    DepthWorkload run = workload;
    if (!deep) run.depth = 0;
    absl::StatusOr<double> rate = RunDepthWorkload(*fresh, run);
    if (!rate.ok()) return Report(rate.status());
    std::printf("W6 %s: %d jobs on top of %d, %.0f jobs/s\n",
                deep ? "deep queue" : "empty store", run.jobs, run.depth,
                *rate);
    (deep ? o.value : o.baseline.emplace()) = *rate;
  }
  o.fields = absl::StrFormat(" jobs_per_s=%.0f empty_per_s=%.0f depth=%d",
                             o.value, *o.baseline, workload.depth);
  PrintResult(o);
  return 0;
}

// W5: EnqueueMany first (the baseline), then the fan-out, on fresh storage
// each.
int RunFanOut(const Options& options) {
  constexpr int kChildren = 10'000;
  Outcome o{.workload = "W5",
            .backend = BackendName(options.backend),
            .jobs = kChildren,
            .baseline_jobs = kChildren};
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, ".baseline");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<FanOutTiming> many = MeteredRun(*fresh, o.baseline_cost, [&] {
    return RunEnqueueManyWorkload(*fresh, kChildren);
  });
  if (!many.ok()) return Report(many.status());
  std::printf(
      "EnqueueMany: %d jobs in one call, first handler after %.1f ms, "
      "all done after %.1f ms\n",
      kChildren, absl::ToDoubleMilliseconds(many->first_start),
      absl::ToDoubleMilliseconds(many->total));
  fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<FanOutTiming> fan = MeteredRun(
      *fresh, o.cost, [&] { return RunFanOutWorkload(*fresh, kChildren); });
  if (!fan.ok()) return Report(fan.status());
  std::printf(
      "fan-out: %d children of one handler, first child after %.1f "
      "ms, parent settled after %.1f ms\n",
      kChildren, absl::ToDoubleMilliseconds(fan->first_start),
      absl::ToDoubleMilliseconds(fan->total));
  const double per_child = absl::ToDoubleMicroseconds(fan->total) / kChildren;
  const double per_job = absl::ToDoubleMicroseconds(many->total) / kChildren;
  o.value = per_child;
  o.baseline = per_job;
  o.fields = absl::StrFormat(
      " children=%d per_child_us=%.1f enqueue_many_per_job_us=%.1f", kChildren,
      per_child, per_job);
  PrintResult(o);
  return 0;
}

// W7: the map first, so that its memory peak is not hidden by pages the
// allocator kept from an earlier workload; then EnqueueMany for as many
// jobs, on fresh storage each.
int RunMap(const Options& options) {
  const int n = options.w7_elements;
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  Outcome o{.workload = "W7",
            .backend = BackendName(options.backend),
            .jobs = n,
            .baseline_jobs = n};
  absl::StatusOr<MapTiming> map =
      MeteredRun(*fresh, o.cost, [&] { return RunMapWorkload(*fresh, n); });
  if (!map.ok()) return Report(map.status());
  std::printf(
      "map: %d elements, StartRun %.1f ms, first task after %.1f ms, run "
      "completed after %.1f ms; peak memory %.0f bytes/element in StartRun, "
      "%.0f over the run\n",
      n, absl::ToDoubleMilliseconds(map->start_run),
      absl::ToDoubleMilliseconds(map->run.first_start),
      absl::ToDoubleMilliseconds(map->run.total),
      map->start_peak_bytes_per_element, map->run_peak_bytes_per_element);
  o.value = absl::ToDoubleMicroseconds(map->run.total) / n;
  if (options.baseline) {
    fresh = FreshUrl(options.backend, ".baseline");
    if (!fresh.ok()) return Report(fresh.status());
    absl::StatusOr<FanOutTiming> many =
        MeteredRun(*fresh, o.baseline_cost,
                   [&] { return RunEnqueueManyWorkload(*fresh, n); });
    if (!many.ok()) return Report(many.status());
    o.baseline = absl::ToDoubleMicroseconds(many->total) / n;
  }
  std::string floor_fields;
  if (options.floors && BackendName(options.backend) == "sqlite") {
    fresh = FreshUrl(options.backend, ".floor");
    if (!fresh.ok()) return Report(fresh.status());
    absl::StatusOr<absl::Duration> floor = SqliteMapRowsFloor(*fresh, n);
    if (!floor.ok()) return Report(floor.status());
    std::printf(
        "rows floor: the same tasks and messages by plain SQL, %.1f ms\n",
        absl::ToDoubleMilliseconds(*floor));
    floor_fields = absl::StrFormat(" floor_ms=%.1f floor_ratio=%.3f",
                                   absl::ToDoubleMilliseconds(*floor),
                                   absl::FDivDuration(map->run.total, *floor));
  }
  o.fields = absl::StrFormat(
      " elements=%d start_run_ms=%.1f per_element_us=%.1f "
      "enqueue_many_per_job_us=%.1f start_bytes_per_element=%.0f "
      "run_bytes_per_element=%.0f",
      n, absl::ToDoubleMilliseconds(map->start_run), o.value,
      o.baseline.value_or(0), map->start_peak_bytes_per_element,
      map->run_peak_bytes_per_element);
  o.fields += floor_fields;
  PrintResult(o);
  return 0;
}

int RunLatency(const Options& options) {
  constexpr int kJobs = 200;
  Outcome o{.workload = "W3", .backend = BackendName(options.backend)};
  std::string baseline_fields;
  if (options.baseline) {
    std::vector<absl::Duration> b;
    if (IsPostgresUrl(options.backend)) {
      absl::StatusOr<std::string> fresh =
          FreshUrl(options.backend, ".baseline");
      if (!fresh.ok()) return Report(fresh.status());
      absl::StatusOr<std::vector<absl::Duration>> notify =
          PostgresNotifyBaseline(*fresh, kJobs);
      if (!notify.ok()) return Report(notify.status());
      b = std::move(*notify);
    } else {
      b = InProcessWakeBaseline(kJobs);
    }
    o.baseline = QuantileMs(b, 0.5);
    std::printf("baseline: %s, p50 %.3f ms, p99 %.3f ms\n",
                IsPostgresUrl(options.backend)
                    ? "bare insert + NOTIFY to LISTEN wake-up"
                    : "bare in-process condition-variable wake-up",
                *o.baseline, QuantileMs(b, 0.99));
    baseline_fields = absl::StrFormat(" baseline_p50_ms=%.3f", *o.baseline);
  }
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<LatencyResult> result = RunLatencyWorkload(*fresh, kJobs);
  if (!result.ok()) return Report(result.status());
  o.value = QuantileMs(result->latencies, 0.5);
  o.fields =
      absl::StrFormat(" p50_ms=%.3f p99_ms=%.3f wake=%s", o.value,
                      QuantileMs(result->latencies, 0.99), result->wake_path) +
      baseline_fields;
  PrintResult(o);
  return 0;
}

}  // namespace
}  // namespace sluice::bench

int main(int argc, char** argv) {
  using namespace sluice::bench;
  absl::StatusOr<Options> options = Parse(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr,
                 "sluice-bench: %s\nusage: sluice-bench --backend URL "
                 "--workload W1|W2|W3|W4|W5|W6|W7 [--no-baseline] "
                 "[--floors] [--runs N] [--w6-depth N] [--w7-elements N]\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->workload == "W3") return RunLatency(*options);
  if (options->workload == "W4") return RunJobs(*options);
  if (options->workload == "W5") return RunFanOut(*options);
  if (options->workload == "W6") return RunDepth(*options);
  if (options->workload == "W7") return RunMap(*options);
  return RunThroughput(*options);
}
