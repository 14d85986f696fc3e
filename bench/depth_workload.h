// W6: claims in a deep queue. `depth` jobs are enqueued into one job's
// queue and left there (priority -1, so they stay behind), then W1's
// 20,000 jobs are enqueued on top (priority 0) in batches of 500 while one
// worker at concurrency 10 runs them. The figure is the rate of the jobs on
// top; W6 compares it with the same workload on an empty store (depth 0),
// so the ratio shows whether claims slow down with the depth of the queue.
//
// The jobs on top are counted as their handlers start (the backlog's jobs,
// which the worker takes when it runs out of newer ones, are not).
#ifndef SLUICE_BENCH_DEPTH_WORKLOAD_H_
#define SLUICE_BENCH_DEPTH_WORKLOAD_H_

#include <string>

#include "absl/status/statusor.h"

namespace sluice::bench {

struct DepthWorkload {
  int depth = 1'000'000;  // jobs left in the queue
  int jobs = 20'000;      // jobs measured on top
  int concurrency = 10;
  int batch_size = 100;
};

// Returns the jobs on top per second; prints the backlog's enqueue rate.
absl::StatusOr<double> RunDepthWorkload(const std::string& url,
                                        const DepthWorkload& workload);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_DEPTH_WORKLOAD_H_
