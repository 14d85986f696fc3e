// What an engine counts, and the Prometheus text format for it.
//
//   sluice::MetricsSnapshot snapshot = engine->Metrics();
//   std::string text = sluice::WritePrometheusText(snapshot);
//
// Counters and histograms are this process's: what this engine's calls and
// workers did since the engine was created (another process sharing the
// store counts its own). Queue depths and the outbox backlog are read from
// the store when the snapshot is taken, so every process sees the same.
// Every metric, its labels and its meaning: docs/operations.md, "Metrics and
// tracing".
#ifndef SLUICE_METRICS_H_
#define SLUICE_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace sluice {

// A histogram with fixed buckets. `bucket_counts` has one entry per upper
// bound plus a last one for values above every bound (+Inf); each counts
// only the values of its own bucket (the text format makes them
// cumulative).
struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // ascending and finite
  std::vector<int64_t> bucket_counts;
  int64_t count = 0;
  double sum = 0;
};

// Runs of one flow (a job is a one-step flow) that this process started or
// saw end.
struct FlowRunCounts {
  std::string flow;
  int64_t started = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
};

// Tasks of one step of one flow.
struct StepTaskCounts {
  std::string flow;
  std::string step;
  int64_t claimed = 0;    // attempts started by a claim
  int64_t completed = 0;  // results stored as completed
  int64_t retried = 0;    // failed attempts queued again
  int64_t failed = 0;     // failed for good (attempts used up, or fatal)
  int64_t stalled = 0;    // leases that ran out and stall recovery handled
  // How long handlers ran, in seconds (this process's workers).
  HistogramSnapshot handler_seconds;
  // From the task being queued (created, retried or requeued) to its
  // completion being stored, in seconds.
  HistogramSnapshot latency_seconds;
};

// One queue: task counts read from the store, and the sizes of this
// process's non-empty claims on it.
struct QueueMetrics {
  std::string queue;
  std::optional<int64_t> waiting;  // unset if the store was not read
  std::optional<int64_t> delayed;
  std::optional<int64_t> active;
  // How long the oldest claimable task has waited (0 when none waits);
  // unset if the store was not read.
  std::optional<double> oldest_waiting_seconds;
  HistogramSnapshot claim_batch_size;
};

struct MetricsSnapshot {
  absl::Time taken_at;
  // Empty if the store answered; else why it did not (the store's gauges are
  // then unset, and the in-process counters are still filled in).
  std::string store_error;
  std::vector<FlowRunCounts> runs;        // by flow
  std::vector<StepTaskCounts> tasks;      // by flow, then step
  std::vector<QueueMetrics> queues;       // by queue name
  std::optional<int64_t> outbox_backlog;  // reports not yet applied
  int64_t live_workers = 0;  // this process's workers started and not stopped
};

// Renders `snapshot` in the Prometheus text exposition format 0.0.4: HELP
// and TYPE lines for every metric family, label values escaped, histograms
// as cumulative _bucket{le=...} samples ending with +Inf, then _sum and
// _count. Appends to `out`.
void WritePrometheusText(const MetricsSnapshot& snapshot, std::string* out);
std::string WritePrometheusText(const MetricsSnapshot& snapshot);

// The content type of WritePrometheusText's output.
inline constexpr char kPrometheusContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace sluice

#endif  // SLUICE_METRICS_H_
