// What operators look at (`sluice status`, `sluice prune`): every queue's
// state with its live workers, and how many runs a prune would delete.
#include <string>
#include <vector>

#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

absl::StatusOr<std::vector<QueueStatus>> Engine::ListQueueStatus(
    absl::Duration liveness) {
  if (liveness <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(StrCat("ListQueueStatus liveness ",
                                             absl::FormatDuration(liveness),
                                             " must be positive"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<QueueRecord> queues, tx->ListQueues());
  SLUICE_ASSIGN_OR_RETURN(std::vector<WorkerRecord> workers, tx->ListWorkers());
  const absl::Time now = impl_->Now();
  std::vector<QueueStatus> statuses;
  statuses.reserve(queues.size());
  for (const QueueRecord& queue : queues) {
    QueueStatus status;
    status.state.queue = queue.name;
    status.state.paused = queue.paused;
    SLUICE_ASSIGN_OR_RETURN(status.state.counts,
                            tx->CountTasks(queue.name, now, TaskCounts::kAll));
    for (const WorkerRecord& w : workers) {
      bool live =
          !w.stopped_at.has_value() && now - w.last_heartbeat_at <= liveness;
      if (live && w.queue_name == queue.name) ++status.live_workers;
    }
    statuses.push_back(std::move(status));
  }
  return statuses;
}

absl::StatusOr<int64_t> Engine::CountPrunableRuns(absl::Time finished_before) {
  if (finished_before == absl::InfiniteFuture() ||
      finished_before == absl::InfinitePast()) {
    return absl::InvalidArgumentError(
        "CountPrunableRuns needs a finite cutoff time");
  }
  // PruneRuns deletes ended runs with finished_at < cutoff: the same set as
  // a finished_at walk over [-inf, cutoff) of the ended statuses.
  RunQuery query;
  query.statuses = {RunStatus::kCompleted, RunStatus::kFailed,
                    RunStatus::kCancelled};
  query.order_by = RunQuery::OrderBy::kFinishedAt;
  query.newest_first = false;
  query.to = finished_before;
  query.limit = 10'000;
  int64_t count = 0;
  for (;;) {
    // A transaction per page, so a long count never holds a writer back.
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
    SLUICE_ASSIGN_OR_RETURN(std::vector<RunRecord> page,
                            tx->ListRuns(query, Fields::kNoPayloads));
    count += static_cast<int64_t>(page.size());
    if (page.size() < static_cast<size_t>(query.limit)) return count;
    const RunRecord& last = page.back();
    // A last row without a finish time (unreadable) ends the walk early.
    if (!last.finished_at) return count;
    query.after = RunQuery::Position{*last.finished_at, last.run_id};
  }
}

}  // namespace sluice
