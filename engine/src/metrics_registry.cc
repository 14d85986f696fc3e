#include "metrics_registry.h"

#include <algorithm>
#include <tuple>

namespace sluice {

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds_(
          upper_bounds.begin(),
          upper_bounds.begin() + std::min(upper_bounds.size(), kMaxBounds)) {}

void Histogram::Observe(double value) {
  size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  s.upper_bounds = bounds_;
  s.bucket_counts.reserve(bounds_.size() + 1);
  int64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    s.bucket_counts.push_back(buckets_[i].load(std::memory_order_relaxed));
    total += s.bucket_counts.back();
  }
  // Observations racing with the snapshot may have reached a bucket but not
  // the count yet: the buckets' total keeps the snapshot consistent.
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void RunTally::Add(std::string_view flow, RunStatus status) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.flow == flow; });
  if (it == entries_.end()) {
    entries_.push_back(Entry{std::string(flow), {}});
    it = entries_.end() - 1;
  }
  ++it->by_status[static_cast<size_t>(status)];
}

StepTally::Entry& StepTally::For(std::string_view flow, std::string_view step) {
  for (Entry& e : entries_) {
    if (e.flow == flow && e.step == step) return e;
  }
  entries_.push_back(Entry{.flow = flow, .step = step});
  return entries_.back();
}

void MetricsRegistry::AddTasks(const StepTally& tally) {
  auto add = [](std::atomic<int64_t>& counter, int64_t n) {
    if (n != 0) counter.fetch_add(n, std::memory_order_relaxed);
  };
  for (const StepTally::Entry& e : tally.entries()) {
    std::shared_ptr<StepMetrics> m = Step(e.flow, e.step);
    add(m->claimed, e.claimed);
    add(m->completed, e.completed);
    add(m->retried, e.retried);
    add(m->failed, e.failed);
    add(m->stalled, e.stalled);
    for (double seconds : e.latency_seconds)
      m->latency_seconds.Observe(seconds);
  }
}

void MetricsRegistry::CountClaim(std::string_view queue, int64_t tasks) {
  if (tasks > 0) ClaimBatch(queue)->Observe(static_cast<double>(tasks));
}

std::shared_ptr<StepMetrics> MetricsRegistry::Step(std::string_view flow,
                                                   std::string_view step) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<StepMetrics>& m =
      steps_[std::make_pair(std::string(flow), std::string(step))];
  if (m == nullptr) m = std::make_shared<StepMetrics>();
  return m;
}

std::shared_ptr<FlowMetrics> MetricsRegistry::Flow(std::string_view flow) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<FlowMetrics>& m = flows_[std::string(flow)];
  if (m == nullptr) m = std::make_shared<FlowMetrics>();
  return m;
}

std::shared_ptr<Histogram> MetricsRegistry::ClaimBatch(std::string_view queue) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Histogram>& h = claim_batches_[std::string(queue)];
  if (h == nullptr) h = std::make_shared<Histogram>(kBatchSizeBounds);
  return h;
}

void MetricsRegistry::AddRuns(const RunTally& tally) {
  for (const RunTally::Entry& e : tally.entries()) {
    std::shared_ptr<FlowMetrics> m = Flow(e.flow);
    auto add = [&](std::atomic<int64_t>& counter, RunStatus status) {
      int64_t n = e.by_status[static_cast<size_t>(status)];
      if (n != 0) counter.fetch_add(n, std::memory_order_relaxed);
    };
    add(m->started, RunStatus::kStarted);
    add(m->completed, RunStatus::kCompleted);
    add(m->failed, RunStatus::kFailed);
    add(m->cancelled, RunStatus::kCancelled);
  }
}

void MetricsRegistry::Fill(MetricsSnapshot& snapshot) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [flow, m] : flows_) {
    snapshot.runs.push_back(FlowRunCounts{flow, m->started.load(),
                                          m->completed.load(), m->failed.load(),
                                          m->cancelled.load()});
  }
  std::sort(snapshot.runs.begin(), snapshot.runs.end(),
            [](const auto& a, const auto& b) { return a.flow < b.flow; });
  for (const auto& [key, m] : steps_) {
    StepTaskCounts c;
    c.flow = key.first;
    c.step = key.second;
    c.claimed = m->claimed.load();
    c.completed = m->completed.load();
    c.retried = m->retried.load();
    c.failed = m->failed.load();
    c.stalled = m->stalled.load();
    c.handler_seconds = m->handler_seconds.Snapshot();
    c.latency_seconds = m->latency_seconds.Snapshot();
    snapshot.tasks.push_back(std::move(c));
  }
  std::sort(snapshot.tasks.begin(), snapshot.tasks.end(),
            [](const auto& a, const auto& b) {
              return std::tie(a.flow, a.step) < std::tie(b.flow, b.step);
            });
  for (const auto& [queue, h] : claim_batches_) {
    QueueMetrics q;
    q.queue = queue;
    q.claim_batch_size = h->Snapshot();
    snapshot.queues.push_back(std::move(q));
  }
  std::sort(snapshot.queues.begin(), snapshot.queues.end(),
            [](const auto& a, const auto& b) { return a.queue < b.queue; });
  snapshot.live_workers = live_workers_.load();
}

}  // namespace sluice
