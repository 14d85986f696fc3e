#include "latency_workload.h"

#include <algorithm>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/json.hpp"
#include "postgres_support.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::bench {
namespace {

// Where handlers leave the time they started.
struct StartTimes {
  absl::Mutex mu;
  std::vector<absl::Time> started ABSL_GUARDED_BY(mu);
};

Flow LatencyFlow(StartTimes& times) {
  Flow flow("bench_w3");
  flow.Step("job",
            [&times](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
              absl::Time now = absl::Now();
              absl::MutexLock lock(&times.mu);
              times.started.push_back(now);
              return in.at("run");
            });
  return flow;
}

}  // namespace

double QuantileMs(std::vector<absl::Duration> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t index = static_cast<size_t>(q * (samples.size() - 1) + 0.5);
  return absl::ToDoubleMilliseconds(samples[index]);
}

absl::StatusOr<LatencyResult> RunLatencyWorkload(const std::string& url,
                                                 int jobs) {
  absl::StatusOr<std::unique_ptr<Backend>> worker_backend = OpenBackend(url);
  if (!worker_backend.ok()) return worker_backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> worker_engine =
      Engine::Create(**worker_backend);
  if (!worker_engine.ok()) return worker_engine.status();

  LatencyResult result;
  result.wake_path = IsPostgresUrl(url) ? "notify" : "in-process";
  std::unique_ptr<Backend> client_backend;
  std::unique_ptr<Engine> client_engine;
  Engine* client = worker_engine->get();
  if (IsPostgresUrl(url)) {
    absl::StatusOr<std::unique_ptr<Backend>> b = OpenBackend(url);
    if (!b.ok()) return b.status();
    client_backend = std::move(*b);
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(*client_backend);
    if (!e.ok()) return e.status();
    client_engine = std::move(*e);
    client = client_engine.get();
  }

  StartTimes times;
  Flow flow = LatencyFlow(times);
  WorkerOptions options;
  options.concurrency = 1;
  options.batch_size = 1;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*worker_engine)->StartWorker(flow, options);
  if (!worker.ok()) return worker.status();
  if (absl::StatusOr<DeployOutcome> d = client->Deploy(flow); !d.ok()) {
    return d.status();
  }
  absl::SleepFor(absl::Milliseconds(500));  // let the worker go idle

  for (int i = 0; i < jobs; ++i) {
    absl::Time enqueued = absl::Now();
    absl::StatusOr<RunId> run =
        client->StartRun(flow.slug(), boost::json::object{{"n", i}});
    if (!run.ok()) return run.status();
    absl::Time give_up = absl::Now() + absl::Seconds(30);
    // Wait until this job's handler ran and its completion is recorded.
    while ((*worker)->stats().completed < i + 1) {
      if (absl::Now() > give_up) {
        return absl::DeadlineExceededError("a W3 job did not finish in 30 s");
      }
      absl::SleepFor(absl::Microseconds(50));
    }
    absl::MutexLock lock(&times.mu);
    result.latencies.push_back(times.started.back() - enqueued);
  }
  if (absl::Status s = (*worker)->Stop(); !s.ok()) return s;
  return result;
}

}  // namespace sluice::bench
