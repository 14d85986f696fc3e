// The worker runtime: one dispatcher thread claims, records results, extends
// leases and sweeps; `concurrency` handler threads run handlers
// (worker_handlers.cc). Stopping and draining: docs/decisions/0013.
#include "sluice/worker.h"

#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine_impl.h"
#include "result_recorder.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "worker_shared.h"

namespace sluice {
namespace {

constexpr int kSweepBatch = 1000;
// Results wait at most this long to be recorded together with others.
constexpr absl::Duration kResultFlushDelay = absl::Milliseconds(1);
constexpr absl::Duration kMinRetryBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxRetryBackoff = absl::Seconds(5);

// Exponential backoff for a call that keeps failing: the first retry waits
// kMinRetryBackoff, each further one twice as long, up to kMaxRetryBackoff.
class Backoff {
 public:
  // Returns when the call may be tried again.
  absl::Time Failed(absl::Time now) {
    retry_at_ = now + delay_;
    delay_ = std::min(delay_ * 2, kMaxRetryBackoff);
    return retry_at_;
  }
  void Succeeded() {
    delay_ = kMinRetryBackoff;
    retry_at_ = absl::InfinitePast();
  }
  bool Ready(absl::Time now) const { return now >= retry_at_; }
  absl::Time retry_at() const { return retry_at_; }

 private:
  absl::Duration delay_ = kMinRetryBackoff;
  absl::Time retry_at_ = absl::InfinitePast();
};

class WorkerImpl : public Worker {
 public:
  WorkerImpl(Engine& engine, WorkerPlan plan, WorkerOptions options)
      : engine_(engine),
        impl_(engine.impl()),
        options_(std::move(options)),
        queue_(std::move(plan.queue)),
        served_(std::move(plan.served)),
        served_steps_(std::move(plan.served_steps)),
        generations_(std::move(plan.generations)),
        shared_(std::make_shared<WorkerShared>(std::move(plan.flows),
                                               impl_.options().log)) {
    if (options_.worker_id.empty()) options_.worker_id = NewWorkerId();
  }

  ~WorkerImpl() override { (void)Stop(); }

  absl::Status Start() {
    absl::Time now = impl_.Now();
    record_ = WorkerRecord{options_.worker_id,
                           queue_,
                           served_steps_.front().flow_slug,
                           now,
                           now,
                           std::nullopt,
                           served_steps_};
    SLUICE_RETURN_IF_ERROR(SaveRecord());
    PruneWorkers();
    listener_ = impl_.signals().Listen(queue_, [this] { Poke(); });
    // Other processes' sends reach us through the backend, if it can tell.
    watch_ = impl_.backend().WatchQueue(queue_, [this] { Poke(); });
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->slots.resize(options_.concurrency);
    }
    for (int i = 0; i < options_.concurrency; ++i) {
      handlers_.emplace_back(HandlerLoop, shared_, static_cast<size_t>(i));
    }
    dispatcher_ = std::thread([this] { DispatchLoop(); });
    started_ = true;
    return absl::OkStatus();
  }

  absl::Status Stop() override;

  absl::Status Wait() override {
    WorkerShared& s = *shared_;
    absl::MutexLock lock(&s.mu);
    s.mu.Await(absl::Condition(&s.closed));
    return s.fatal.ok() ? s.drain_status : s.fatal;
  }

  bool WaitFor(absl::Duration timeout) override {
    WorkerShared& s = *shared_;
    absl::MutexLock lock(&s.mu);
    return s.mu.AwaitWithTimeout(absl::Condition(&s.closed), timeout);
  }

  const std::string& id() const override { return options_.worker_id; }
  const std::string& queue() const override { return queue_; }
  WorkerStats stats() const override {
    absl::MutexLock lock(&shared_->mu);
    return shared_->stats;
  }

 private:
  void Poke() {
    absl::MutexLock lock(&shared_->mu);
    shared_->poked = true;
  }

  absl::Status SaveRecord() {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_.Begin());
    SLUICE_RETURN_IF_ERROR(tx->UpsertWorker(record_));
    return tx->Commit();
  }

  void Log(LogLevel level, std::string_view message) const {
    impl_.Log(level, StrCat("worker ", id(), ": ", message));
  }

  void DispatchLoop();
  bool ResultsDue(absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);
  enum class Recording { kNothingDue, kRecorded, kRetryLater };
  Recording RecordResultsIfDue();
  bool RecordResults();
  void Heartbeat();
  void Sweep();
  void PruneWorkers();
  // The number of tasks claimed; -1 if the claim failed.
  int ClaimMore();
  // On stopping: gives claimed tasks no handler has started back.
  void ReleaseUnstarted();
  // When the idle dispatcher should claim again at the latest: the earliest
  // hidden message's visibility (from the last empty claim), in real time.
  absl::Time NextVisibleWake(absl::Time real_now) const;
  // Past the drain deadline: gives up on what is unfinished.
  void Abandon() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);
  void JoinOrDetachHandlers();

  Engine& engine_;
  Engine::Impl& impl_;
  WorkerOptions options_;
  std::string queue_;
  StepSet served_;
  std::vector<ServedSteps> served_steps_;
  std::vector<FlowGeneration> generations_;
  WorkerRecord record_;
  int listener_ = 0;
  std::unique_ptr<QueueWatch> watch_;
  bool started_ = false;
  std::thread dispatcher_;
  std::vector<std::thread> handlers_;
  const std::shared_ptr<WorkerShared> shared_;
  // Dispatcher thread only: the last empty claim's hint (engine clock).
  std::optional<absl::Time> next_visible_at_;
  bool released_ = false;

  // Serializes Stop() calls; held for a whole Stop().
  absl::Mutex stop_mu_;
  bool stop_done_ ABSL_GUARDED_BY(stop_mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(stop_mu_);
};

absl::Status WorkerImpl::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stop_done_) return stop_status_;
  stop_done_ = true;
  if (!started_) return absl::OkStatus();
  {
    absl::MutexLock lock(&shared_->mu);
    if (!shared_->stopping) {
      shared_->stopping = true;
      shared_->drain_deadline = absl::Now() + options_.drain_timeout;
    }
    shared_->poked = true;
  }
  // The dispatcher honours the drain deadline in every wait and retry, so
  // this returns by then (plus at most one backend call in progress).
  dispatcher_.join();
  JoinOrDetachHandlers();
  impl_.signals().Unlisten(listener_);
  watch_.reset();
  record_.stopped_at = impl_.Now();
  absl::Status saved = SaveRecord();
  if (!saved.ok())
    Log(LogLevel::kWarning,
        StrCat("recording the stop failed: ", saved.ToString()));
  {
    absl::MutexLock lock(&shared_->mu);
    stop_status_ = shared_->drain_status;
  }
  if (stop_status_.ok()) stop_status_ = saved;
  return stop_status_;
}

// Idle handler threads exit at once, since the worker is closed; a thread
// still running a handler is detached. It holds WorkerShared, so it finds it
// when its handler returns, and drops the late result.
void WorkerImpl::JoinOrDetachHandlers() {
  std::vector<bool> busy;
  {
    absl::MutexLock lock(&shared_->mu);
    for (const WorkerShared::HandlerSlot& slot : shared_->slots) {
      busy.push_back(slot.busy);
    }
  }
  for (size_t i = 0; i < handlers_.size(); ++i) {
    if (busy[i]) {
      handlers_[i].detach();
    } else {
      handlers_[i].join();
    }
  }
}

void WorkerImpl::DispatchLoop() {
  WorkerShared& s = *shared_;
  absl::Time next_heartbeat = absl::Now() + options_.heartbeat_interval;
  absl::Time next_sweep = absl::Now() + options_.sweep_interval;
  Backoff record_backoff;
  Backoff claim_backoff;
  while (true) {
    switch (RecordResultsIfDue()) {
      case Recording::kNothingDue:
        break;
      case Recording::kRecorded:
        record_backoff.Succeeded();
        break;
      case Recording::kRetryLater: {
        absl::Time retry_at = record_backoff.Failed(absl::Now());
        absl::MutexLock lock(&s.mu);
        s.record_retry_at = retry_at;
        break;
      }
    }
    absl::Time real_now = absl::Now();
    if (real_now >= next_heartbeat) {
      Heartbeat();
      next_heartbeat = real_now + options_.heartbeat_interval;
    }
    bool stopping;
    {
      absl::MutexLock lock(&s.mu);
      stopping = s.stopping;
    }
    if (options_.sweep_interval > absl::ZeroDuration() && !stopping &&
        real_now >= next_sweep) {
      Sweep();
      next_sweep = real_now + options_.sweep_interval;
    }
    if (stopping && !released_) ReleaseUnstarted();
    int claimed = 0;
    if (!stopping && claim_backoff.Ready(absl::Now())) {
      claimed = ClaimMore();
      if (claimed < 0) {
        claim_backoff.Failed(absl::Now());
      } else {
        claim_backoff.Succeeded();
      }
    }
    absl::MutexLock lock(&s.mu);
    absl::Time now = absl::Now();
    if (s.stopping) {
      bool drained = s.in_flight.empty() && s.results.empty();
      if (drained || now >= s.drain_deadline) {
        if (!drained) Abandon();
        for (auto& [key, f] : s.in_flight) f.cancel.Cancel();
        s.ready.clear();
        s.closed = true;
        return;
      }
    }
    if (claimed > 0 || ResultsDue(now)) continue;
    absl::Time wake =
        std::min({now + options_.poll_interval, NextVisibleWake(now),
                  next_heartbeat, s.drain_deadline});
    if (options_.sweep_interval > absl::ZeroDuration() && !s.stopping) {
      wake = std::min(wake, next_sweep);
    }
    if (!s.stopping && !claim_backoff.Ready(now)) {
      wake = std::min(wake, claim_backoff.retry_at());
    }
    if (!s.results.empty()) {
      wake = std::min(wake, std::max(s.first_result_at + kResultFlushDelay,
                                     s.record_retry_at));
    }
    auto ready = [this, &s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
      return s.poked || ResultsDue(absl::Now());
    };
    s.mu.AwaitWithDeadline(absl::Condition(&ready), wake);
    s.poked = false;
  }
}

void WorkerImpl::Abandon() {
  WorkerShared& s = *shared_;
  int64_t abandoned = 0;
  for (const auto& [key, f] : s.in_flight) {
    bool has_result = false;
    for (const TaskResult& r : s.results) {
      if (r.key == key && r.attempt == f.attempt) has_result = true;
    }
    if (has_result) continue;
    ++abandoned;
    Log(LogLevel::kWarning,
        StrCat("abandoned ", DescribeTask(key), " attempt ", f.attempt,
               ": its handler was still running (or not started) after "
               "drain_timeout ",
               absl::FormatDuration(options_.drain_timeout),
               "; its lease will lapse and stall recovery will take it back"));
  }
  for (const TaskResult& r : s.results) {
    Log(LogLevel::kWarning,
        StrCat("the result of ", DescribeTask(r.key), " attempt ", r.attempt,
               " was not recorded by drain_timeout ",
               absl::FormatDuration(options_.drain_timeout),
               "; its lease will lapse and stall recovery will take it back"));
  }
  int64_t unrecorded = static_cast<int64_t>(s.results.size());
  s.stats.abandoned += abandoned;
  s.stats.unrecorded += unrecorded;
  s.results.clear();
  s.drain_status = absl::DeadlineExceededError(
      StrCat("worker ", id(), " stopped after drain_timeout ",
             absl::FormatDuration(options_.drain_timeout), " with ", abandoned,
             " abandoned handlers and ", unrecorded,
             " unrecorded results; stall recovery will take their tasks back"));
}

// Results are recorded together: when every claimed task has one, when a
// batch's worth is waiting, when stopping, or when the oldest has waited
// kResultFlushDelay; never before a failed attempt's backoff ends.
bool WorkerImpl::ResultsDue(absl::Time now) const {
  const WorkerShared& s = *shared_;
  if (s.results.empty() || now < s.record_retry_at) return false;
  return s.results.size() >= s.in_flight.size() ||
         static_cast<int>(s.results.size()) >= options_.batch_size ||
         s.stopping || now >= s.first_result_at + kResultFlushDelay;
}

WorkerImpl::Recording WorkerImpl::RecordResultsIfDue() {
  {
    absl::MutexLock lock(&shared_->mu);
    if (!ResultsDue(absl::Now())) return Recording::kNothingDue;
  }
  return RecordResults() ? Recording::kRecorded : Recording::kRetryLater;
}

// Returns false if some results hit a transient error; they are kept to
// retry after a backoff.
bool WorkerImpl::RecordResults() {
  WorkerShared& s = *shared_;
  std::vector<TaskResult> results;
  {
    absl::MutexLock lock(&s.mu);
    results.swap(s.results);
  }
  if (results.empty()) return true;
  RecordedResults recorded =
      sluice::RecordResults(engine_, std::move(results), id());
  absl::MutexLock lock(&s.mu);
  // A task's entry belongs to its latest attempt: a result of an older one
  // must not end the newer attempt's lease.
  auto finish = [&s](const TaskKey& key,
                     int attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    auto it = s.in_flight.find(key);
    if (it != s.in_flight.end() && it->second.attempt == attempt) {
      s.in_flight.erase(it);
    }
  };
  for (const RecordedResults::Recorded& r : recorded.recorded) {
    finish(r.key, r.attempt);
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
    finish(r.key, r.attempt);  // so its lease lapses
    ++s.stats.unrecorded;
  }
  if (recorded.retry.empty()) {
    s.record_retry_at = absl::InfinitePast();
    return true;
  }
  Log(LogLevel::kWarning,
      StrCat("recording ", recorded.retry.size(), " results failed (",
             recorded.transient_error.ToString(), "); retrying"));
  if (s.results.empty()) s.first_result_at = absl::Now();
  for (TaskResult& r : recorded.retry) s.results.push_back(std::move(r));
  return false;
}

void WorkerImpl::Heartbeat() {
  std::vector<Lease> leases;
  std::vector<CancelToken> tokens;
  absl::Time now = impl_.Now();
  {
    absl::MutexLock lock(&shared_->mu);
    for (auto& [key, f] : shared_->in_flight) {
      if (now >= f.deadline) {
        // Past its deadline the lease is left to lapse, so a hung handler
        // can't hold its task forever.
        f.cancel.Cancel();
        continue;
      }
      leases.push_back(Lease{key, f.attempt});
      tokens.push_back(f.cancel);
    }
  }
  if (!leases.empty()) {
    absl::StatusOr<std::vector<LeaseState>> states =
        engine_.ExtendLeases(leases);
    if (states.ok()) {
      // Lost (its run or step ended) or cancel-requested (its run asked it
      // to stop): either way the handler should stop.
      for (size_t i = 0; i < leases.size(); ++i) {
        if ((*states)[i] != LeaseState::kOwned) tokens[i].Cancel();
      }
    } else {
      Log(LogLevel::kWarning,
          StrCat("extending leases failed: ", states.status().ToString()));
    }
  }
  record_.last_heartbeat_at = now;
  absl::Status saved = SaveRecord();
  if (!saved.ok()) {
    Log(LogLevel::kWarning, StrCat("heartbeat failed: ", saved.ToString()));
  }
}

void WorkerImpl::Sweep() {
  absl::StatusOr<int> reports = engine_.ApplyStaleReports(kSweepBatch);
  absl::StatusOr<int> stalled = engine_.RecoverStalledTasks(kSweepBatch);
  // The fan-out relay's reconcile path: reports the push path missed, then
  // links pending for too long (docs/decisions/0029).
  absl::StatusOr<int> relayed = engine_.RelayChildReports(kSweepBatch);
  absl::StatusOr<int> repaired = engine_.RepairChildLinks(kSweepBatch);
  for (const absl::Status& s :
       {reports.status(), stalled.status(), relayed.status(), repaired.status(),
        engine_.ApplyRetention(kSweepBatch).status()}) {
    if (!s.ok())
      Log(LogLevel::kWarning, StrCat("sweep failed: ", s.ToString()));
  }
  // Refreshes our own row first, so that pruning never takes it, however
  // the clock has moved since the last heartbeat.
  record_.last_heartbeat_at = impl_.Now();
  absl::Status saved = SaveRecord();
  if (!saved.ok()) {
    Log(LogLevel::kWarning, StrCat("heartbeat failed: ", saved.ToString()));
    return;
  }
  PruneWorkers();
}

// Deletes the rows of workers gone for longer than worker_retention; ours
// was just written, so it is never among them.
void WorkerImpl::PruneWorkers() {
  absl::Duration retention = impl_.options().worker_retention;
  if (retention == absl::InfiniteDuration()) return;
  absl::StatusOr<int> pruned =
      engine_.PruneWorkers(impl_.Now() - retention, kSweepBatch);
  if (!pruned.ok()) {
    Log(LogLevel::kWarning, StrCat("pruning inactive workers failed: ",
                                   pruned.status().ToString()));
  }
}

int WorkerImpl::ClaimMore() {
  WorkerShared& s = *shared_;
  int free;
  {
    absl::MutexLock lock(&s.mu);
    if (s.stopping) return 0;
    int capacity = std::max(options_.concurrency, options_.batch_size);
    free = capacity - static_cast<int>(s.in_flight.size());
    // Wait for room for half a batch rather than claiming a few at a time.
    if (!s.in_flight.empty() && free < (options_.batch_size + 1) / 2) return 0;
  }
  if (free <= 0) return 0;
  ClaimRequest request{queue_, options_.worker_id, served_,
                       std::min(free, options_.batch_size)};
  // Only a development recompilation fences workers by generation.
  if (impl_.options().development_recompile) {
    request.generations = generations_;
  }
  absl::StatusOr<ClaimBatch> batch = engine_.ClaimWithHint(request);
  next_visible_at_.reset();
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      batch.ok()
          ? absl::StatusOr<std::vector<ClaimedTask>>(std::move(batch->tasks))
          : batch.status();
  if (batch.ok()) next_visible_at_ = batch->next_visible_at;
  absl::MutexLock lock(&s.mu);
  if (!claimed.ok()) {
    if (claimed.status().code() == absl::StatusCode::kFailedPrecondition) {
      impl_.Log(
          LogLevel::kError,
          StrCat("worker ", id(), " stops: ", claimed.status().message()));
      s.fatal = claimed.status();
      if (!s.stopping) {
        s.stopping = true;
        s.drain_deadline = absl::Now() + options_.drain_timeout;
      }
    } else {
      Log(LogLevel::kWarning,
          StrCat("claim failed: ", claimed.status().ToString()));
    }
    return -1;
  }
  s.stats.claimed += static_cast<int64_t>(claimed->size());
  for (ClaimedTask& task : *claimed) {
    CancelToken token;
    s.in_flight[task.key] =
        WorkerShared::InFlight{task.attempt, task.deadline, token};
    s.ready.emplace_back(std::move(task), token);
  }
  return static_cast<int>(claimed->size());
}

// Takes the claimed tasks no handler thread has picked up out of the queue
// (so none will), then gives them back: their attempt is not used and they
// keep their place in line. If that fails their leases lapse instead and
// stall recovery takes them back.
void WorkerImpl::ReleaseUnstarted() {
  WorkerShared& s = *shared_;
  released_ = true;
  std::vector<Lease> leases;
  {
    absl::MutexLock lock(&s.mu);
    for (const auto& [task, token] : s.ready) {
      leases.push_back(Lease{task.key, task.attempt});
      token.Cancel();
    }
    s.ready.clear();
  }
  if (leases.empty()) return;
  absl::Status released = engine_.ReleaseTasks(leases);
  absl::MutexLock lock(&s.mu);
  if (released.ok()) s.stats.released += static_cast<int64_t>(leases.size());
  for (const Lease& l : leases) {
    auto it = s.in_flight.find(l.key);
    if (it != s.in_flight.end() && it->second.attempt == l.attempt) {
      s.in_flight.erase(it);
    }
  }
  if (!released.ok()) {
    Log(LogLevel::kWarning,
        StrCat("releasing ", leases.size(), " unstarted tasks failed (",
               released.ToString(),
               "); their leases will lapse and stall recovery will take them "
               "back"));
  }
}

absl::Time WorkerImpl::NextVisibleWake(absl::Time real_now) const {
  if (!next_visible_at_) return absl::InfiniteFuture();
  absl::Duration until = *next_visible_at_ - impl_.Now();
  return real_now + std::max(until, absl::ZeroDuration());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> LaunchWorker(Engine& engine,
                                                     WorkerPlan plan,
                                                     WorkerOptions options) {
  auto worker =
      std::make_unique<WorkerImpl>(engine, std::move(plan), std::move(options));
  SLUICE_RETURN_IF_ERROR(worker->Start());
  return std::unique_ptr<Worker>(std::move(worker));
}

}  // namespace sluice
