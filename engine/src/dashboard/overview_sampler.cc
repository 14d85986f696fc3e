#include "dashboard/overview_sampler.h"

#include <algorithm>
#include <utility>

#include "boost/json/array.hpp"
#include "boost/json/object.hpp"
#include "dashboard/api_internal.h"

namespace sluice::dashboard {
namespace {

constexpr absl::Duration kLiveness = absl::Seconds(30);

int64_t MinuteOf(absl::Time t) {
  return absl::ToInt64Seconds(t - absl::UnixEpoch()) / 60 -
         (t < absl::UnixEpoch() ? 1 : 0);
}

absl::StatusOr<std::vector<WorkerRecord>> LiveWorkers(Engine& engine,
                                                      absl::Time now) {
  absl::StatusOr<std::unique_ptr<Transaction>> tx = engine.backend().Begin();
  if (!tx.ok()) return tx.status();
  absl::StatusOr<std::vector<WorkerRecord>> workers = (*tx)->ListWorkers();
  if (!workers.ok()) return workers.status();
  std::erase_if(*workers, [now](const WorkerRecord& w) {
    return w.stopped_at.has_value() || now - w.last_heartbeat_at > kLiveness;
  });
  std::sort(workers->begin(), workers->end(),
            [](const WorkerRecord& a, const WorkerRecord& b) {
              return a.worker_id < b.worker_id;
            });
  return workers;
}

}  // namespace

OverviewSampler::~OverviewSampler() { Stop(); }

void OverviewSampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<Json> OverviewSampler::Overview() {
  absl::StatusOr<std::shared_ptr<const Snapshot>> snapshot = Current();
  if (!snapshot.ok()) return snapshot.status();
  absl::MutexLock lock(&mu_);
  if (!started_ && !stopping_) {
    started_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
  return ToJson(**snapshot);
}

absl::StatusOr<std::shared_ptr<const OverviewSampler::Snapshot>>
OverviewSampler::Read() {
  auto snapshot = std::make_shared<Snapshot>();
  absl::StatusOr<std::vector<QueueStatus>> queues =
      engine_.ListQueueStatus(kLiveness);
  if (!queues.ok()) return queues.status();
  snapshot->now = engine_.clock().Now();
  snapshot->queues = *std::move(queues);
  absl::StatusOr<std::vector<WorkerRecord>> workers =
      LiveWorkers(engine_, snapshot->now);
  if (!workers.ok()) return workers.status();
  snapshot->workers = *std::move(workers);
  return snapshot;
}

// One reader at a time: while it reads, other requests get the snapshot
// before (at most a second or two old) rather than queueing on the store.
absl::StatusOr<std::shared_ptr<const OverviewSampler::Snapshot>>
OverviewSampler::Current() {
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      if (latest_ && absl::Now() - latest_at_ < max_age_) return latest_;
      if (!refreshing_) break;
      if (latest_) return latest_;
      mu_.Await(absl::Condition(
          +[](bool* refreshing) { return !*refreshing; }, &refreshing_));
    }
    refreshing_ = true;
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const Snapshot>> read = Read();
  absl::MutexLock lock(&mu_);
  refreshing_ = false;
  if (!read.ok()) return read.status();
  Record(**read);
  latest_ = *read;
  latest_at_ = absl::Now();
  max_age_ = std::max(kMaxAge, kReadShare * (latest_at_ - start));
  return latest_;
}

void OverviewSampler::Record(const Snapshot& snapshot) {
  const int64_t minute = MinuteOf(snapshot.now);
  for (const QueueStatus& queue : snapshot.queues) {
    const QueueCounts& counts = queue.state.counts;
    Minute now_counts{counts.completed, counts.failed};
    auto last = last_counts_.find(queue.state.queue);
    if (last != last_counts_.end()) {
      // Retention deletes ended tasks, so counts may shrink: count growth
      // only.
      Minute& bucket = minutes_[queue.state.queue][minute];
      bucket.completed +=
          std::max<int64_t>(0, now_counts.completed - last->second.completed);
      bucket.failed +=
          std::max<int64_t>(0, now_counts.failed - last->second.failed);
    }
    last_counts_[queue.state.queue] = now_counts;
    auto& per_minute = minutes_[queue.state.queue];
    per_minute.erase(per_minute.begin(),
                     per_minute.lower_bound(minute - kMinutes + 1));
  }
}

Json OverviewSampler::ToJson(const Snapshot& snapshot) {
  const int64_t minute = MinuteOf(snapshot.now);
  boost::json::array queues;
  for (const QueueStatus& queue : snapshot.queues) {
    const QueueCounts& c = queue.state.counts;
    boost::json::array throughput;
    const auto& per_minute = minutes_[queue.state.queue];
    for (int64_t m = minute - kMinutes + 1; m <= minute; ++m) {
      auto it = per_minute.find(m);
      Minute counts = it == per_minute.end() ? Minute{} : it->second;
      throughput.emplace_back(boost::json::object{
          {"minute", TimeJson(absl::FromUnixSeconds(m * 60))},
          {"completed", counts.completed},
          {"failed", counts.failed}});
    }
    Json oldest = nullptr;
    if (c.oldest_waiting_since) {
      oldest = absl::ToDoubleSeconds(std::max(
          snapshot.now - *c.oldest_waiting_since, absl::ZeroDuration()));
    }
    queues.emplace_back(boost::json::object{
        {"queue", queue.state.queue},
        {"paused", queue.state.paused},
        {"waiting", c.waiting},
        {"delayed", c.delayed},
        {"active", c.active},
        {"parked", c.parked},
        {"completed", c.completed},
        {"failed", c.failed},
        {"cancelled", c.cancelled},
        {"workers", queue.live_workers},
        {"unserved", c.waiting > 0 && queue.live_workers == 0},
        {"oldest_waiting_seconds", std::move(oldest)},
        {"throughput", std::move(throughput)}});
  }
  boost::json::array workers;
  for (const WorkerRecord& worker : snapshot.workers) {
    workers.emplace_back(boost::json::object{
        {"id", worker.worker_id},
        {"queues", boost::json::array{Json(worker.queue_name)}},
        {"last_seen", TimeJson(worker.last_heartbeat_at)}});
  }
  return boost::json::object{{"now", TimeJson(snapshot.now)},
                             {"queues", std::move(queues)},
                             {"workers", std::move(workers)}};
}

void OverviewSampler::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kSampleEvery);
    if (stopping_) return;
    if (latest_ && absl::Now() - latest_at_ < kSampleEvery) continue;
    mu_.Unlock();
    // An error is shown to the next viewer; the sampler tries again.
    (void)Current();
    mu_.Lock();
  }
}

}  // namespace sluice::dashboard
