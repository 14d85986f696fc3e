// Recording results: the recorder thread and what it shares with the
// dispatcher (docs/decisions/0060).
#include <algorithm>
#include <utility>
#include <vector>

#include "backoff.h"
#include "result_recorder.h"
#include "worker_impl.h"

namespace sluice::worker_internal {
namespace {

// Results wait at most this long to be recorded together with others.
constexpr absl::Duration kResultFlushDelay = absl::Milliseconds(1);

}  // namespace

// Results are recorded together: when every claimed task has one, when a
// batch's worth is waiting, when stopping, or when the oldest has waited
// kResultFlushDelay; never before a failed attempt's backoff ends.
bool WorkerImpl::ResultsDue(absl::Time now) const {
  const WorkerShared& s = *shared_;
  if (s.results.empty() || now < s.record_retry_at) return false;
  return s.results.size() + s.recording >= s.in_flight.size() ||
         static_cast<int>(s.results.size()) >= options_.batch_size ||
         s.stopping || now >= s.first_result_at + kResultFlushDelay;
}

// The recorder thread: records results when they are due, until the
// dispatcher closes the worker. Taking results pokes the dispatcher, which
// claims into their room while they are stored; when stopping, so does
// storing them, for the dispatcher's drain check.
void WorkerImpl::RecordLoop() {
  CallBackoff backoff;
  while (AwaitResultsDue()) {
    absl::Time retry_at = absl::InfinitePast();
    if (RecordResults()) {
      backoff.Succeeded();
    } else {
      retry_at = backoff.Failed(absl::Now());
    }
    absl::MutexLock lock(&shared_->mu);
    shared_->record_retry_at = retry_at;
    if (shared_->stopping) shared_->poked = true;
  }
}

bool WorkerImpl::AwaitResultsDue() {
  WorkerShared& s = *shared_;
  absl::MutexLock lock(&s.mu);
  while (!s.closed) {
    if (ResultsDue(absl::Now())) return true;
    // Due by time at the latest when the oldest has waited long enough;
    // until results arrive, only an arrival can make them due.
    const bool had_results = !s.results.empty();
    absl::Time wake =
        had_results
            ? std::max(s.first_result_at + kResultFlushDelay, s.record_retry_at)
            : absl::InfiniteFuture();
    auto changed = [this, &s, had_results]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
                         return s.closed || ResultsDue(absl::Now()) ||
                                (!had_results && !s.results.empty());
                       };
    s.mu.AwaitWithDeadline(absl::Condition(&changed), wake);
  }
  return false;
}

// Returns false if some results hit a transient error; they are kept to
// retry after a backoff.
bool WorkerImpl::RecordResults() {
  WorkerShared& s = *shared_;
  std::vector<TaskResult> results;
  {
    absl::MutexLock lock(&s.mu);
    results.swap(s.results);
    s.recording = results.size();
    s.poked = true;  // the dispatcher may claim into their room meanwhile
    for (const TaskResult& r : results) {
      if (auto* f = s.InFlightOf(r.key, r.attempt)) f->recording = true;
    }
  }
  if (results.empty()) return true;
  RecordedResults recorded =
      TracedRecordResults(engine_, *shared_, std::move(results), id());
  absl::MutexLock lock(&s.mu);
  s.recording = 0;
  for (const RecordedResults::Recorded& r : recorded.recorded) {
    s.EndInFlight(r.key, r.attempt);
    if (r.replaced) ++s.stats.rejected;
    switch (r.disposition) {
      case ResultDisposition::kCompleted:
        ++s.stats.completed;
        break;
      case ResultDisposition::kRetrying:
      case ResultDisposition::kFailed:
        ++s.stats.failed;
        break;
      case ResultDisposition::kCancelled:
        ++s.stats.cancelled;
        break;
      case ResultDisposition::kStale:
      case ResultDisposition::kNotFound:
        ++s.stats.stale;
        break;
    }
  }
  for (const TaskResult& r : recorded.dropped) {
    s.EndInFlight(r.key, r.attempt);  // so its lease lapses
    ++s.stats.unrecorded;
  }
  for (const TaskResult& r : recorded.retry) {
    if (auto* f = s.InFlightOf(r.key, r.attempt)) f->recording = false;
  }
  if (recorded.retry.empty()) return true;
  if (s.closed) {
    // The drain deadline passed during this call: nobody retries.
    s.stats.unrecorded += static_cast<int64_t>(recorded.retry.size());
    Log(LogLevel::kWarning,
        StrCat("recording ", recorded.retry.size(), " results failed (",
               recorded.transient_error.ToString(),
               ") after the drain deadline; their leases will lapse and "
               "stall recovery will take their tasks back"));
    return true;
  }
  Log(LogLevel::kWarning,
      StrCat("recording ", recorded.retry.size(), " results failed (",
             recorded.transient_error.ToString(), "); retrying"));
  if (s.results.empty()) s.first_result_at = absl::Now();
  for (TaskResult& r : recorded.retry) s.results.push_back(std::move(r));
  return false;
}

}  // namespace sluice::worker_internal
