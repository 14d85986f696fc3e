#include "depth_workload.h"

#include <atomic>
#include <cstdio>
#include <vector>

#include "absl/time/clock.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::bench {
namespace {

// Enqueues [first, end) of one kind in batches of `batch`.
absl::Status EnqueueRange(Engine& engine, const Job& job, int first, int end,
                          int batch, int priority, bool top) {
  for (int start = first; start < end; start += batch) {
    std::vector<Engine::EnqueueItem> items;
    for (int i = start; i < std::min(end, start + batch); ++i) {
      Engine::EnqueueItem item{.payload =
                                   boost::json::object{{"n", i}, {"top", top}}};
      item.options.priority = priority;
      items.push_back(std::move(item));
    }
    absl::StatusOr<std::vector<EnqueueResult>> results =
        engine.EnqueueMany(job.name(), items);
    if (!results.ok()) return results.status();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> RunDepthWorkload(const std::string& url,
                                        const DepthWorkload& workload) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(**backend);
  if (!engine.ok()) return engine.status();
  std::atomic<int> top_started{0};
  const Job job("bench_w6", {.queue = "bench_w6"},
                [&](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
                  if (payload.at("top").as_bool()) top_started.fetch_add(1);
                  return payload;
                });
  if (absl::StatusOr<DeployOutcome> d = (*engine)->Deploy(job); !d.ok()) {
    return d.status();
  }
  if (workload.depth > 0) {
    absl::Time start = absl::Now();
    if (absl::Status s = EnqueueRange(**engine, job, 0, workload.depth, 10'000,
                                      /*priority=*/-1, /*top=*/false);
        !s.ok()) {
      return s;
    }
    std::printf("W6 backlog: %d jobs enqueued at %.0f jobs/s\n", workload.depth,
                workload.depth / absl::ToDoubleSeconds(absl::Now() - start));
  }
  WorkerOptions worker_options;
  worker_options.concurrency = workload.concurrency;
  worker_options.batch_size = workload.batch_size;
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      (*engine)->StartWorker(job.flow(), worker_options);
  if (!worker.ok()) return worker.status();
  absl::Time start = absl::Now();
  if (absl::Status s = EnqueueRange(**engine, job, 0, workload.jobs, 500,
                                    /*priority=*/0, /*top=*/true);
      !s.ok()) {
    return s;
  }
  absl::Time give_up = start + absl::Minutes(10);
  while (top_started.load() < workload.jobs) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError("W6 jobs did not run in 10 minutes");
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  absl::Duration elapsed = absl::Now() - start;
  if (absl::Status s = (*worker)->Stop(); !s.ok()) return s;
  return workload.jobs / absl::ToDoubleSeconds(elapsed);
}

}  // namespace sluice::bench
