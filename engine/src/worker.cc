// The worker runtime: one dispatcher thread claims, extends leases and
// sweeps; one recorder thread records results, so that a batch's finish and
// the next claim overlap on two connections; `concurrency` handler threads
// run handlers (worker_handlers.cc). Stopping and draining:
// docs/decisions/0013; the recorder thread: docs/decisions/0060.
#include "sluice/worker.h"

#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "backoff.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "worker_impl.h"
#include "worker_shared.h"

namespace sluice::worker_internal {
namespace {

constexpr int kSweepBatch = 1000;

}  // namespace

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
  // this returns by then (plus at most one backend call in progress in
  // each of the two threads).
  dispatcher_.join();
  recorder_.join();
  JoinOrDetachHandlers();
  impl_.metrics().WorkerStopped();
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
  CallBackoff claim_backoff;
  while (true) {
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
    if (claimed > 0) continue;
    absl::Time wake =
        std::min({now + options_.poll_interval, NextVisibleWake(now),
                  next_heartbeat, s.drain_deadline});
    if (options_.sweep_interval > absl::ZeroDuration() && !s.stopping) {
      wake = std::min(wake, next_sweep);
    }
    if (!s.stopping && !claim_backoff.Ready(now)) {
      wake = std::min(wake, claim_backoff.retry_at());
    }
    s.mu.AwaitWithDeadline(absl::Condition(&s.poked), wake);
    s.poked = false;
  }
}

void WorkerImpl::Abandon() {
  WorkerShared& s = *shared_;
  int64_t abandoned = 0;
  for (const auto& [key, f] : s.in_flight) {
    if (f.recording) continue;  // the recorder thread has its result
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
    // Results the recorder thread has taken hold no room: the next batch
    // is claimed while it stores them. Results it has not taken still do,
    // so a recorder that falls behind (or fails) stops the claims, and no
    // recording is ever larger than the capacity.
    const size_t taken = std::min(s.in_flight.size(), s.recording);
    free = capacity - static_cast<int>(s.in_flight.size() - taken);
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
  absl::StatusOr<ClaimBatch> batch = TracedClaim(engine_, *shared_, request);
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
        WorkerShared::InFlight{task.attempt, task.deadline, token, false};
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
  for (const Lease& l : leases) s.EndInFlight(l.key, l.attempt);
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

}  // namespace sluice::worker_internal

namespace sluice {

absl::StatusOr<std::unique_ptr<Worker>> LaunchWorker(Engine& engine,
                                                     WorkerPlan plan,
                                                     WorkerOptions options) {
  auto worker = std::make_unique<worker_internal::WorkerImpl>(
      engine, std::move(plan), std::move(options));
  SLUICE_RETURN_IF_ERROR(worker->Start());
  return std::unique_ptr<Worker>(std::move(worker));
}

}  // namespace sluice
