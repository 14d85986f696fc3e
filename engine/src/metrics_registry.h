// The engine's in-process counters (see sluice/metrics.h).
//
// The hot path touches only atomics: a worker resolves the counters of the
// steps it serves once, at start; the engine's batch calls (Claim,
// FinishTasks, commits that start or end runs) look counters up once per
// (flow, step) of a batch, not once per task.
#ifndef SLUICE_ENGINE_METRICS_REGISTRY_H_
#define SLUICE_ENGINE_METRICS_REGISTRY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sluice/metrics.h"
#include "sluice/records.h"

namespace sluice {

// Fixed-bucket histogram; Observe is lock-free.
class Histogram {
 public:
  static constexpr size_t kMaxBounds = 16;
  explicit Histogram(std::span<const double> upper_bounds);

  void Observe(double value);
  HistogramSnapshot Snapshot() const;

 private:
  std::vector<double> bounds_;
  // One per bound, plus +Inf.
  std::array<std::atomic<int64_t>, kMaxBounds + 1> buckets_{};
  std::atomic<int64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Seconds, for handler durations and latencies.
inline constexpr double kSecondsBounds[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5,   1,      2.5,   5,    10,    30,   60,  300};
inline constexpr double kBatchSizeBounds[] = {1,  2,   5,   10,  20,
                                              50, 100, 200, 500, 1000};

struct StepMetrics {
  std::atomic<int64_t> claimed{0};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> retried{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> stalled{0};
  Histogram handler_seconds{kSecondsBounds};
  Histogram latency_seconds{kSecondsBounds};
};

struct FlowMetrics {
  std::atomic<int64_t> started{0};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> cancelled{0};
};

// Runs started and ended in one transaction, by flow; counted once it
// commits. A transaction rarely touches more than one flow, so a short
// vector searched in order is enough.
class RunTally {
 public:
  // kStarted counts a new run; a terminal status, a run that ended.
  void Add(std::string_view flow, RunStatus status);
  bool empty() const { return entries_.empty(); }

  struct Entry {
    std::string flow;
    std::array<int64_t, 4> by_status{};  // indexed by RunStatus
  };
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// What one batch call did to tasks, by (flow, step); counted once it
// commits. Like RunTally, a short vector: a batch spans few steps.
class StepTally {
 public:
  struct Entry {
    std::string_view flow;  // views into the batch's records or flows
    std::string_view step;
    int64_t claimed = 0;
    int64_t completed = 0;
    int64_t retried = 0;
    int64_t failed = 0;
    int64_t stalled = 0;
    std::vector<double> latency_seconds;  // one per completion
  };
  // The entry of (flow, step), added if new.
  Entry& For(std::string_view flow, std::string_view step);
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// Thread-safety: safe for concurrent use. mu_ guards the maps only; the
// counters they point to are atomics, kept alive by shared_ptr because a
// worker's abandoned handler thread may outlive the engine.
class MetricsRegistry {
 public:
  std::shared_ptr<StepMetrics> Step(std::string_view flow,
                                    std::string_view step);
  std::shared_ptr<FlowMetrics> Flow(std::string_view flow);
  std::shared_ptr<Histogram> ClaimBatch(std::string_view queue);

  void AddRuns(const RunTally& tally);
  void AddTasks(const StepTally& tally);
  // A non-empty claim of `tasks` tasks on `queue`.
  void CountClaim(std::string_view queue, int64_t tasks);
  void WorkerStarted() { live_workers_.fetch_add(1); }
  void WorkerStopped() { live_workers_.fetch_sub(1); }

  // The in-process part of a snapshot: runs, tasks, and each queue's claim
  // batch histogram (queues sorted by name; store gauges unset).
  void Fill(MetricsSnapshot& snapshot) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, std::string>,
                      std::shared_ptr<StepMetrics>>
      steps_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<FlowMetrics>> flows_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Histogram>> claim_batches_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> live_workers_{0};
};

// Seconds in `d`, for histograms of durations.
inline double ToSeconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace sluice

#endif  // SLUICE_ENGINE_METRICS_REGISTRY_H_
