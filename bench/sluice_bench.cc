// sluice-bench: end-to-end workloads through real workers.
//
//   sluice-bench --backend URL --workload W1|W2|W3|W4|W5 [--no-baseline]
//
// W1: enqueue and process 20,000 one-step jobs with one worker at
//     concurrency 10 (enqueued in batches while the worker runs).
// W2: 1,000 runs of root -> map over the root's 10-element array -> reduce
//     (12 tasks a run).
// W3: 200 one-step jobs started one after another on an idle worker;
//     enqueue-to-handler-start latency (see latency_workload.h).
// W4: 20,000 jobs through Enqueue (priorities 0-9, every tenth with a
//     dedupe key), one worker at concurrency 10, measured next to W1 in the
//     same run: the job layer's cost over plain runs.
// W5: one handler fans out 10,000 children, next to the same jobs through
//     EnqueueMany in the same run (see fanout_workload.h).
//
// The last line is:
//   RESULT workload=W1 backend=<name> tasks_per_s=<n> [baseline_per_s=<b>
//   ratio=<r>]
//   RESULT workload=W3 backend=<name> p50_ms=<x> p99_ms=<y> wake=<path>
//   [baseline_p50_ms=<b> ratio=<r>]
//   RESULT workload=W4 backend=<name> jobs_per_s=<n> w1_per_s=<w> ratio=<r>
//   RESULT workload=W5 backend=<name> children=<n> per_child_us=<f>
//   enqueue_many_per_job_us=<e> ratio=<f/e>
// The baseline, measured in the same process just before, is the simplest
// loop that does the same job on the same storage (see baseline.h and
// postgres_support.h), so the ratio survives a noisy machine.
//
// SQLite files and Postgres databases are created afresh for each
// measurement: a Postgres URL names the server, and the bench drops and
// recreates the databases sluice_bench and sluice_bench_baseline there.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "baseline.h"
#include "boost/json.hpp"
#include "fanout_workload.h"
#include "latency_workload.h"
#include "postgres_support.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::bench {
namespace {

struct Options {
  std::string backend = "memory:";
  std::string workload = "W1";
  bool baseline = true;
  int concurrency = 10;
  int batch_size = 100;
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
    } else if (a == "--no-baseline") {
      o.baseline = false;
    } else {
      return absl::InvalidArgumentError("unknown argument " + a);
    }
  }
  if (o.workload != "W1" && o.workload != "W2" && o.workload != "W3" &&
      o.workload != "W4" && o.workload != "W5") {
    return absl::InvalidArgumentError(
        "--workload must be W1, W2, W3, W4 or W5");
  }
  return o;
}

std::string BackendName(const std::string& url) {
  if (IsPostgresUrl(url)) return "postgres";
  return url.substr(0, url.find(':'));
}

// A fresh SQLite file or Postgres database per measurement.
absl::StatusOr<std::string> FreshUrl(const std::string& url,
                                     const std::string& suffix) {
  if (IsPostgresUrl(url)) {
    std::string name = "sluice_bench";
    if (!suffix.empty()) name += "_" + suffix.substr(1);
    return FreshPostgresDatabase(url, name);
  }
  if (url.rfind("sqlite:", 0) != 0) return url;
  std::string path = url.substr(7) + suffix;
  for (const char* ext : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path + ext);
  }
  return "sqlite:" + path;
}

absl::StatusOr<double> Baseline(const std::string& url, int jobs,
                                int concurrency) {
  absl::StatusOr<std::string> fresh = FreshUrl(url, ".baseline");
  if (!fresh.ok()) return fresh.status();
  if (IsPostgresUrl(url)) return PostgresJobsBaseline(*fresh, jobs);
  return MeasureBaseline(*fresh, jobs, concurrency);
}

int Report(const absl::Status& status) {
  std::fprintf(stderr, "sluice-bench: %s\n", status.ToString().c_str());
  return 1;
}

int RunThroughput(const Options& options) {
  bool w1 = options.workload == "W1";
  int runs = w1 ? 20'000 : 1'000;
  int tasks_per_run = w1 ? 1 : 12;
  int total_tasks = runs * tasks_per_run;
  double baseline = 0;
  if (options.baseline) {
    absl::StatusOr<double> b =
        Baseline(options.backend, total_tasks, options.concurrency);
    if (!b.ok()) return Report(b.status());
    baseline = *b;
    std::printf("baseline: %s, %d jobs, %.0f jobs/s\n",
                IsPostgresUrl(options.backend)
                    ? "plain Postgres jobs table, claim 10 + complete 10 per "
                      "transaction"
                    : BaselineDescription(options.backend).c_str(),
                total_tasks, baseline);
  }
  Options measured = options;
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  measured.backend = *fresh;
  const Flow flow = w1 ? JobFlow() : MapReduceFlow();
  absl::StatusOr<double> rate =
      RunWorkload(measured, flow, runs, tasks_per_run,
                  [&](Engine& engine, int first, int end) {
                    return StartRunsOf(flow.slug(), engine, first, end);
                  });
  if (!rate.ok()) return Report(rate.status());
  std::printf("RESULT workload=%s backend=%s tasks_per_s=%.0f",
              options.workload.c_str(), BackendName(options.backend).c_str(),
              *rate);
  if (options.baseline) {
    std::printf(" baseline_per_s=%.0f ratio=%.2f", baseline, *rate / baseline);
  }
  std::printf("\n");
  return 0;
}

// W1 then W4 on fresh storage each, so the ratio is of the same moment.
int RunJobs(const Options& options) {
  constexpr int kJobs = 20'000;
  double rates[2] = {0, 0};
  for (int w4 = 0; w4 < 2; ++w4) {
    Options measured = options;
    absl::StatusOr<std::string> fresh =
        FreshUrl(options.backend, w4 ? "" : ".baseline");
    if (!fresh.ok()) return Report(fresh.status());
    measured.backend = *fresh;
    const Job job = BenchJob();
    const Flow flow = w4 ? job.flow() : JobFlow();
    absl::StatusOr<double> rate = RunWorkload(
        measured, flow, kJobs, 1, [&](Engine& engine, int first, int end) {
          return w4 ? EnqueueJobs(job.name(), engine, first, end)
                    : StartRunsOf(flow.slug(), engine, first, end);
        });
    if (!rate.ok()) return Report(rate.status());
    rates[w4] = *rate;
    std::printf("%s: %d jobs, %.0f jobs/s\n",
                w4 ? "W4 (Enqueue, priorities, dedupe keys)"
                   : "W1 (StartRuns of a one-step flow)",
                kJobs, *rate);
  }
  std::printf(
      "RESULT workload=W4 backend=%s jobs_per_s=%.0f w1_per_s=%.0f "
      "ratio=%.2f\n",
      BackendName(options.backend).c_str(), rates[1], rates[0],
      rates[1] / rates[0]);
  return 0;
}

// W5: EnqueueMany first (the baseline), then the fan-out, on fresh storage
// each.
int RunFanOut(const Options& options) {
  constexpr int kChildren = 10'000;
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, ".baseline");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<FanOutTiming> many = RunEnqueueManyWorkload(*fresh, kChildren);
  if (!many.ok()) return Report(many.status());
  std::printf(
      "EnqueueMany: %d jobs in one call, first handler after %.1f ms, "
      "all done after %.1f ms\n",
      kChildren, absl::ToDoubleMilliseconds(many->first_start),
      absl::ToDoubleMilliseconds(many->total));
  fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<FanOutTiming> fan = RunFanOutWorkload(*fresh, kChildren);
  if (!fan.ok()) return Report(fan.status());
  std::printf(
      "fan-out: %d children of one handler, first child after %.1f "
      "ms, parent settled after %.1f ms\n",
      kChildren, absl::ToDoubleMilliseconds(fan->first_start),
      absl::ToDoubleMilliseconds(fan->total));
  const double per_child = absl::ToDoubleMicroseconds(fan->total) / kChildren;
  const double per_job = absl::ToDoubleMicroseconds(many->total) / kChildren;
  std::printf(
      "RESULT workload=W5 backend=%s children=%d per_child_us=%.1f "
      "enqueue_many_per_job_us=%.1f ratio=%.2f\n",
      BackendName(options.backend).c_str(), kChildren, per_child, per_job,
      per_child / per_job);
  return 0;
}

int RunLatency(const Options& options) {
  constexpr int kJobs = 200;
  double baseline_p50 = 0;
  bool with_baseline = options.baseline && IsPostgresUrl(options.backend);
  if (with_baseline) {
    absl::StatusOr<std::string> fresh = FreshUrl(options.backend, ".baseline");
    if (!fresh.ok()) return Report(fresh.status());
    absl::StatusOr<std::vector<absl::Duration>> b =
        PostgresNotifyBaseline(*fresh, kJobs);
    if (!b.ok()) return Report(b.status());
    baseline_p50 = QuantileMs(*b, 0.5);
    std::printf(
        "baseline: bare insert + NOTIFY to LISTEN wake-up, p50 %.3f "
        "ms, p99 %.3f ms\n",
        baseline_p50, QuantileMs(*b, 0.99));
  }
  absl::StatusOr<std::string> fresh = FreshUrl(options.backend, "");
  if (!fresh.ok()) return Report(fresh.status());
  absl::StatusOr<LatencyResult> result = RunLatencyWorkload(*fresh, kJobs);
  if (!result.ok()) return Report(result.status());
  double p50 = QuantileMs(result->latencies, 0.5);
  std::printf("RESULT workload=W3 backend=%s p50_ms=%.3f p99_ms=%.3f wake=%s",
              BackendName(options.backend).c_str(), p50,
              QuantileMs(result->latencies, 0.99), result->wake_path.c_str());
  if (with_baseline) {
    std::printf(" baseline_p50_ms=%.3f ratio=%.2f", baseline_p50,
                p50 / baseline_p50);
  }
  std::printf("\n");
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
                 "--workload W1|W2|W3|W4|W5 [--no-baseline]\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->workload == "W3") return RunLatency(*options);
  if (options->workload == "W4") return RunJobs(*options);
  if (options->workload == "W5") return RunFanOut(*options);
  return RunThroughput(*options);
}
