// W3: wake-up latency. Workers sit idle; then 200 one-step jobs start one
// after another, each after the previous one finished, and each measures
// the time from just before StartRun() to the moment its handler starts.
//
// On Postgres the runs are started through a second backend (its own
// connections), so the idle worker learns of each job the way a worker on
// another machine would: through LISTEN/NOTIFY. On memory and SQLite one
// engine does both, and its in-process signal wakes the worker.
#ifndef SLUICE_BENCH_LATENCY_WORKLOAD_H_
#define SLUICE_BENCH_LATENCY_WORKLOAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sluice::bench {

struct LatencyResult {
  std::vector<absl::Duration> latencies;  // one per job, in order
  std::string wake_path;                  // "notify" or "in-process"
};

absl::StatusOr<LatencyResult> RunLatencyWorkload(const std::string& url,
                                                 int jobs);

// The q-quantile (0..1) of `samples`, in milliseconds.
double QuantileMs(std::vector<absl::Duration> samples, double q);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_LATENCY_WORKLOAD_H_
