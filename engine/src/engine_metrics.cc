// Engine::Metrics: the in-process counters, plus gauges read from the store.
#include <algorithm>
#include <memory>

#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/metrics.h"

namespace sluice {
namespace {

// The entry of `queue` in `queues` (sorted by name), inserted if missing.
QueueMetrics& QueueEntry(std::vector<QueueMetrics>& queues,
                         const std::string& queue) {
  auto it =
      std::lower_bound(queues.begin(), queues.end(), queue,
                       [](const QueueMetrics& q, const std::string& name) {
                         return q.queue < name;
                       });
  if (it == queues.end() || it->queue != queue) {
    it = queues.insert(it, QueueMetrics{.queue = queue});
  }
  return *it;
}

// One read-only transaction: every registered queue's in-flight counts and
// the outbox backlog. In-flight counts read live messages only, so a scrape
// does not grow with the ended tasks the store keeps (decision 0075).
absl::Status ReadStoreGauges(Engine::Impl& impl, MetricsSnapshot& snapshot) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<QueueRecord> queues, tx->ListQueues());
  std::vector<std::pair<std::string, QueueCounts>> counts;
  counts.reserve(queues.size());
  for (const QueueRecord& queue : queues) {
    SLUICE_ASSIGN_OR_RETURN(
        QueueCounts c,
        tx->CountTasks(queue.name, snapshot.taken_at, TaskCounts::kInFlight));
    counts.emplace_back(queue.name, c);
  }
  SLUICE_ASSIGN_OR_RETURN(int64_t backlog, tx->CountReports());
  // Filled in only once every read answered, so a failure leaves all the
  // store's gauges unset rather than some.
  for (const auto& [name, c] : counts) {
    QueueMetrics& q = QueueEntry(snapshot.queues, name);
    q.waiting = c.waiting;
    q.delayed = c.delayed;
    q.active = c.active;
    q.oldest_waiting_seconds =
        c.oldest_waiting_since
            ? std::max(0.0, absl::ToDoubleSeconds(snapshot.taken_at -
                                                  *c.oldest_waiting_since))
            : 0.0;
  }
  snapshot.outbox_backlog = backlog;
  return absl::OkStatus();
}

}  // namespace

MetricsSnapshot Engine::Metrics() {
  MetricsSnapshot snapshot;
  snapshot.taken_at = impl_->Now();
  impl_->metrics().Fill(snapshot);
  if (absl::Status read = ReadStoreGauges(*impl_, snapshot); !read.ok()) {
    snapshot.store_error = read.ToString();
  }
  return snapshot;
}

}  // namespace sluice
