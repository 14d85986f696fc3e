#include "fanout_workload.h"

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "sluice/fan_out.h"

namespace sluice::bench {
namespace {

constexpr char kQueue[] = "bench_w5";
constexpr absl::Duration kGiveUp = absl::Minutes(10);

// The time the first child handler started, once (0 before).
struct FirstStart {
  std::atomic<int64_t> nanos{0};
  void Mark() {
    int64_t unset = 0;
    nanos.compare_exchange_strong(unset, absl::GetCurrentTimeNanos());
  }
  absl::Duration Since(absl::Time start) const {
    return absl::FromUnixNanos(nanos.load()) - start;
  }
};

Job ChildJob(FirstStart& first) {
  return Job(
      "bench_w5_child", {.queue = kQueue},
      [&first](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
        first.Mark();
        return payload;
      });
}

Job ParentJob() {
  return Job(
      "bench_w5_parent", {.queue = kQueue},
      [](const Json& payload, TaskContext&) -> absl::StatusOr<StepResult> {
        FanOut out;
        const int64_t n = payload.at("children").as_int64();
        out.children.reserve(n);
        for (int64_t i = 0; i < n; ++i) {
          out.children.push_back({.name = "bench_w5_child",
                                  .payload = boost::json::object{{"n", i}}});
        }
        return out;
      });
}

WorkerOptions BenchWorkerOptions() {
  WorkerOptions options;
  options.concurrency = 10;
  options.batch_size = 100;
  return options;
}

// Waits until `done` holds, polling every `period`.
template <typename Done>
absl::Status Await(Done done, absl::Time start, absl::Duration period) {
  while (true) {
    absl::StatusOr<bool> d = done();
    if (!d.ok()) return d.status();
    if (*d) return absl::OkStatus();
    if (absl::Now() - start > kGiveUp) {
      return absl::DeadlineExceededError("W5 did not finish in 10 minutes");
    }
    absl::SleepFor(period);
  }
}

struct Setup {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};

absl::StatusOr<Setup> Open(const std::string& url) {
  Setup s;
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (!backend.ok()) return backend.status();
  s.backend = *std::move(backend);
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*s.backend);
  if (!engine.ok()) return engine.status();
  s.engine = *std::move(engine);
  return s;
}

// The process's resident and peak resident memory, in bytes (VmRSS and
// VmHWM of /proc/self/status); 0 where unknown.
struct Memory {
  int64_t rss = 0, peak = 0;
};
Memory ReadMemory() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (status >> key) {
    if (key == "VmRSS:" && status >> kb) m.rss = kb * 1024;
    if (key == "VmHWM:" && status >> kb) m.peak = kb * 1024;
  }
  return m;
}

// Lowers the peak (VmHWM) to the present resident size (Linux 4.0+).
void ResetPeakMemory() { std::ofstream("/proc/self/clear_refs") << "5"; }

Flow MapFlow(FirstStart& first) {
  Flow flow("bench_w7");
  flow.Map("each",
           [&first](const Json& element, TaskContext&) -> absl::StatusOr<Json> {
             first.Mark();
             return element;
           });
  return flow;
}

}  // namespace

absl::StatusOr<FanOutTiming> RunFanOutWorkload(const std::string& url,
                                               int children) {
  absl::StatusOr<Setup> s = Open(url);
  if (!s.ok()) return s.status();
  FirstStart first;
  const Job child = ChildJob(first);
  const Job parent = ParentJob();
  absl::StatusOr<std::unique_ptr<Worker>> worker = s->engine->StartWorker(
      WorkerSpec().Serve(parent).Serve(child), BenchWorkerOptions());
  if (!worker.ok()) return worker.status();

  const absl::Time start = absl::Now();
  absl::StatusOr<EnqueueResult> enqueued = s->engine->Enqueue(
      parent.name(), boost::json::object{{"children", children}});
  if (!enqueued.ok()) return enqueued.status();
  // The worker's counters first (free), then the parent run itself.
  absl::Status children_done = Await(
      [&]() -> absl::StatusOr<bool> {
        return (*worker)->stats().completed >= children;
      },
      start, absl::Microseconds(200));
  if (!children_done.ok()) return children_done;
  RunStatus status = RunStatus::kStarted;
  absl::Status settled = Await(
      [&]() -> absl::StatusOr<bool> {
        absl::StatusOr<RunView> view = s->engine->GetRun(enqueued->run_id);
        if (!view.ok()) return view.status();
        status = view->run.status;
        return IsTerminal(status);
      },
      start, absl::Milliseconds(1));
  if (!settled.ok()) return settled;
  FanOutTiming timing{absl::Now() - start, first.Since(start)};
  if (absl::Status stopped = (*worker)->Stop(); !stopped.ok()) return stopped;
  if (status != RunStatus::kCompleted) {
    return absl::InternalError("the W5 parent did not complete");
  }
  return timing;
}

absl::StatusOr<FanOutTiming> RunEnqueueManyWorkload(const std::string& url,
                                                    int jobs) {
  absl::StatusOr<Setup> s = Open(url);
  if (!s.ok()) return s.status();
  FirstStart first;
  const Job child = ChildJob(first);
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      s->engine->StartWorker(WorkerSpec().Serve(child), BenchWorkerOptions());
  if (!worker.ok()) return worker.status();
  std::vector<Engine::EnqueueItem> items;
  items.reserve(jobs);
  for (int i = 0; i < jobs; ++i) {
    items.push_back({.payload = boost::json::object{{"n", i}}});
  }

  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<EnqueueResult>> enqueued =
      s->engine->EnqueueMany(child.name(), items);
  if (!enqueued.ok()) return enqueued.status();
  absl::Status done = Await(
      [&]() -> absl::StatusOr<bool> {
        return (*worker)->stats().completed >= jobs;
      },
      start, absl::Microseconds(200));
  if (!done.ok()) return done;
  FanOutTiming timing{absl::Now() - start, first.Since(start)};
  if (absl::Status stopped = (*worker)->Stop(); !stopped.ok()) return stopped;
  return timing;
}

absl::StatusOr<MapTiming> RunMapWorkload(const std::string& url, int elements) {
  absl::StatusOr<Setup> s = Open(url);
  if (!s.ok()) return s.status();
  FirstStart first;
  const Flow flow = MapFlow(first);
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      s->engine->StartWorker(flow, BenchWorkerOptions());
  if (!worker.ok()) return worker.status();
  // A Json, as a host holds it: passing a boost::json::array to StartRun
  // would copy every element into a temporary value, which the client's
  // peak below would then count.
  Json input(boost::json::array_kind);
  boost::json::array& elements_array = input.as_array();
  elements_array.reserve(elements);
  for (int i = 0; i < elements; ++i) {
    elements_array.push_back(boost::json::object{{"n", i}});
  }

  ResetPeakMemory();
  const Memory before = ReadMemory();
  const absl::Time start = absl::Now();
  absl::StatusOr<RunId> run = s->engine->StartRun(flow.slug(), input);
  if (!run.ok()) return run.status();
  MapTiming timing;
  timing.start_run = absl::Now() - start;
  const Memory started = ReadMemory();
  // The worker applies each batch's reports before counting it (the push
  // path), so the map's output is gathered by the time the count is full.
  // The memory is read then, before the bench reads anything back.
  absl::Status handled = Await(
      [&]() -> absl::StatusOr<bool> {
        return (*worker)->stats().completed >= elements;
      },
      start, absl::Microseconds(200));
  if (!handled.ok()) return handled;
  const Memory ended = ReadMemory();
  // Only the run's own record: GetRun would read every task and attempt
  // (100,000 of each), the bench's cost inside the measured time.
  RunStatus status = RunStatus::kStarted;
  absl::Status done = Await(
      [&]() -> absl::StatusOr<bool> {
        absl::StatusOr<std::vector<RunRecord>> runs =
            s->engine->ListRuns(flow.slug(), 1);
        if (!runs.ok()) return runs.status();
        if (runs->size() != 1 || runs->front().run_id != *run) {
          return absl::InternalError("the W7 store holds another run");
        }
        status = runs->front().status;
        return IsTerminal(status);
      },
      start, absl::Milliseconds(1));
  if (!done.ok()) return done;
  timing.run = {absl::Now() - start, first.Since(start)};
  if (absl::Status stopped = (*worker)->Stop(); !stopped.ok()) return stopped;
  if (status != RunStatus::kCompleted) {
    return absl::InternalError("the W7 run did not complete");
  }
  if (before.peak > 0 && elements > 0) {
    timing.start_peak_bytes_per_element =
        static_cast<double>(started.peak - before.rss) / elements;
    timing.run_peak_bytes_per_element =
        static_cast<double>(ended.peak - before.rss) / elements;
  }
  return timing;
}

}  // namespace sluice::bench
