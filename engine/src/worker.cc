// The worker runtime: one dispatcher thread claims, records results, extends
// leases and sweeps; `concurrency` handler threads run handlers.
#include "sluice/worker.h"

#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

constexpr int kSweepBatch = 1000;
// Results wait at most this long to be recorded together with others.
constexpr absl::Duration kResultFlushDelay = absl::Milliseconds(1);
constexpr absl::Duration kMinRetryBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxRetryBackoff = absl::Seconds(5);

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d < absl::InfiniteDuration();
  };
  if (o.concurrency < 1 || o.concurrency > 1000) {
    return absl::InvalidArgumentError(StrCat(
        "worker concurrency ", o.concurrency, " is out of range 1..1000"));
  }
  if (o.batch_size < 1 || o.batch_size > 1000) {
    return absl::InvalidArgumentError(
        StrCat("worker batch_size ", o.batch_size, " is out of range 1..1000"));
  }
  if (!positive(o.poll_interval) || !positive(o.heartbeat_interval) ||
      !positive(o.drain_timeout) || o.sweep_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "worker poll_interval, heartbeat_interval and drain_timeout must be "
        "positive and finite; sweep_interval must be >= 0");
  }
  return absl::OkStatus();
}

class WorkerImpl : public Worker {
 public:
  WorkerImpl(Engine& engine, const Flow& flow,
             std::shared_ptr<const CompiledFlow> compiled,
             WorkerOptions options)
      : engine_(engine),
        impl_(engine.impl()),
        flow_(flow),
        compiled_(std::move(compiled)),
        options_(std::move(options)),
        queue_(compiled_->queues().front()) {
    if (options_.worker_id.empty()) options_.worker_id = NewWorkerId();
    served_.AddFlow(compiled_->shape());
  }

  ~WorkerImpl() override { (void)Stop(); }

  absl::Status Start() {
    absl::Time now = impl_.Now();
    record_ = WorkerRecord{
        options_.worker_id, queue_, compiled_->slug(), now, now, std::nullopt};
    SLUICE_RETURN_IF_ERROR(SaveRecord());
    listener_ = impl_.signals().Listen(queue_, [this] { Poke(); });
    // Other processes' sends reach us through the backend, if it can tell.
    watch_ = impl_.backend().WatchQueue(queue_, [this] { Poke(); });
    for (int i = 0; i < options_.concurrency; ++i) {
      handlers_.emplace_back([this] { HandlerLoop(); });
    }
    dispatcher_ = std::thread([this] { DispatchLoop(); });
    return absl::OkStatus();
  }

  absl::Status Stop() override {
    {
      absl::MutexLock lock(&mu_);
      if (joined_) return absl::OkStatus();
      stopping_ = true;
      poked_ = true;
    }
    if (dispatcher_.joinable()) dispatcher_.join();
    {
      absl::MutexLock lock(&mu_);
      handlers_exit_ = true;
    }
    for (std::thread& t : handlers_) {
      if (t.joinable()) t.join();
    }
    impl_.signals().Unlisten(listener_);
    watch_.reset();
    record_.stopped_at = impl_.Now();
    absl::Status saved = SaveRecord();
    absl::MutexLock lock(&mu_);
    joined_ = true;
    return saved;
  }

  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&dispatcher_done_));
    return fatal_;
  }

  bool WaitFor(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&dispatcher_done_), timeout);
  }

  const std::string& id() const override { return options_.worker_id; }
  const std::string& queue() const override { return queue_; }
  WorkerStats stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  struct InFlight {
    int attempt = 0;
    absl::Time deadline;
    CancelToken cancel;
  };

  void Poke() {
    absl::MutexLock lock(&mu_);
    poked_ = true;
  }

  absl::Status SaveRecord() {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_.Begin());
    SLUICE_RETURN_IF_ERROR(tx->UpsertWorker(record_));
    return tx->Commit();
  }

  void DispatchLoop();
  bool ResultsDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RecordResultsIfDue();
  bool RecordResults();
  void Heartbeat();
  void Sweep();
  int ClaimMore();
  void HandlerLoop();
  void RunHandler(ClaimedTask task, CancelToken cancel);

  Engine& engine_;
  Engine::Impl& impl_;
  Flow flow_;
  std::shared_ptr<const CompiledFlow> compiled_;
  WorkerOptions options_;
  std::string queue_;
  StepSet served_;
  WorkerRecord record_;
  int listener_ = 0;
  std::unique_ptr<QueueWatch> watch_;
  std::thread dispatcher_;
  std::vector<std::thread> handlers_;

  mutable absl::Mutex mu_;
  std::deque<std::pair<ClaimedTask, CancelToken>> ready_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TaskKey, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::vector<TaskResult> results_ ABSL_GUARDED_BY(mu_);
  absl::Time first_result_at_ ABSL_GUARDED_BY(mu_);
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool dispatcher_done_ ABSL_GUARDED_BY(mu_) = false;
  bool handlers_exit_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  WorkerStats stats_ ABSL_GUARDED_BY(mu_);
};

void WorkerImpl::DispatchLoop() {
  absl::Time next_heartbeat = absl::Now() + options_.heartbeat_interval;
  absl::Time next_sweep = absl::Now() + options_.sweep_interval;
  absl::Time drain_deadline = absl::InfiniteFuture();
  absl::Duration backoff = kMinRetryBackoff;
  while (true) {
    if (!RecordResultsIfDue()) {
      absl::SleepFor(backoff);  // the backend is unavailable; don't spin
      backoff = std::min(backoff * 2, kMaxRetryBackoff);
      continue;
    }
    backoff = kMinRetryBackoff;
    absl::Time real_now = absl::Now();
    if (real_now >= next_heartbeat) {
      Heartbeat();
      next_heartbeat = real_now + options_.heartbeat_interval;
    }
    if (options_.sweep_interval > absl::ZeroDuration() &&
        real_now >= next_sweep) {
      Sweep();
      next_sweep = real_now + options_.sweep_interval;
    }
    int claimed = ClaimMore();
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (drain_deadline == absl::InfiniteFuture()) {
        drain_deadline = absl::Now() + options_.drain_timeout;
      }
      bool drained = in_flight_.empty() && results_.empty();
      if (drained || absl::Now() >= drain_deadline) {
        // Past the deadline, unfinished tasks are left to stall recovery.
        for (auto& [key, f] : in_flight_) f.cancel.Cancel();
        dispatcher_done_ = true;
        return;
      }
    }
    if (claimed > 0 || ResultsDue()) continue;
    absl::Time wake = std::min(
        {absl::Now() + options_.poll_interval, next_heartbeat, drain_deadline});
    if (options_.sweep_interval > absl::ZeroDuration()) {
      wake = std::min(wake, next_sweep);
    }
    if (!results_.empty())
      wake = std::min(wake, first_result_at_ + kResultFlushDelay);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return poked_ || ResultsDue();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), wake);
    poked_ = false;
  }
}

// Results are recorded together: when every claimed task has one, when a
// batch's worth is waiting, when stopping, or when the oldest has waited
// kResultFlushDelay.
bool WorkerImpl::ResultsDue() {
  if (results_.empty()) return false;
  return results_.size() >= in_flight_.size() ||
         static_cast<int>(results_.size()) >= options_.batch_size ||
         stopping_ || absl::Now() >= first_result_at_ + kResultFlushDelay;
}

bool WorkerImpl::RecordResultsIfDue() {
  {
    absl::MutexLock lock(&mu_);
    if (!ResultsDue()) return true;
  }
  return RecordResults();
}

// Returns false if the backend refused the results; they are kept to retry.
bool WorkerImpl::RecordResults() {
  std::vector<TaskResult> results;
  {
    absl::MutexLock lock(&mu_);
    results.swap(results_);
  }
  if (results.empty()) return true;
  absl::StatusOr<FinishOutcome> outcome = engine_.FinishTasks(results);
  if (!outcome.ok()) {
    impl_.Log(LogLevel::kWarning,
              StrCat("worker ", id(), ": recording ", results.size(),
                     " results failed: ", outcome.status().ToString()));
    if (outcome.status().code() == absl::StatusCode::kInvalidArgument) {
      return true;  // can never succeed; the tasks will stall and recover
    }
    absl::MutexLock lock(&mu_);
    if (results_.empty()) first_result_at_ = absl::Now();
    for (TaskResult& r : results) results_.push_back(std::move(r));
    return false;
  }
  absl::Status applied = engine_.ApplyReports(outcome->report_ids);
  if (!applied.ok()) {
    impl_.Log(LogLevel::kWarning,
              StrCat("worker ", id(), ": applying reports failed (",
                     applied.ToString(), "); the sweeper will apply them"));
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < results.size(); ++i) {
    in_flight_.erase(results[i].key);
    switch (outcome->dispositions[i]) {
      case ResultDisposition::kCompleted:
        ++stats_.completed;
        break;
      case ResultDisposition::kRetrying:
      case ResultDisposition::kFailed:
        ++stats_.failed;
        break;
      case ResultDisposition::kStale:
        ++stats_.stale;
        break;
    }
  }
  return true;
}

void WorkerImpl::Heartbeat() {
  std::vector<Lease> leases;
  std::vector<CancelToken> tokens;
  absl::Time now = impl_.Now();
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, f] : in_flight_) {
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
    absl::StatusOr<std::vector<bool>> owned = engine_.ExtendLeases(leases);
    if (owned.ok()) {
      for (size_t i = 0; i < leases.size(); ++i) {
        if (!(*owned)[i]) tokens[i].Cancel();  // its run or step ended
      }
    } else {
      impl_.Log(LogLevel::kWarning,
                StrCat("worker ", id(), ": extending leases failed: ",
                       owned.status().ToString()));
    }
  }
  record_.last_heartbeat_at = now;
  absl::Status saved = SaveRecord();
  if (!saved.ok()) {
    impl_.Log(
        LogLevel::kWarning,
        StrCat("worker ", id(), ": heartbeat failed: ", saved.ToString()));
  }
}

void WorkerImpl::Sweep() {
  absl::StatusOr<int> reports = engine_.ApplyStaleReports(kSweepBatch);
  absl::StatusOr<int> stalled = engine_.RecoverStalledTasks(kSweepBatch);
  for (const absl::Status& s : {reports.status(), stalled.status()}) {
    if (!s.ok()) {
      impl_.Log(LogLevel::kWarning,
                StrCat("worker ", id(), ": sweep failed: ", s.ToString()));
    }
  }
}

int WorkerImpl::ClaimMore() {
  int free;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return 0;
    int capacity = std::max(options_.concurrency, options_.batch_size);
    free = capacity - static_cast<int>(in_flight_.size());
    // Wait for room for half a batch rather than claiming a few at a time.
    if (!in_flight_.empty() && free < (options_.batch_size + 1) / 2) return 0;
  }
  if (free <= 0) return 0;
  ClaimRequest request{queue_, options_.worker_id, served_,
                       std::min(free, options_.batch_size)};
  absl::StatusOr<std::vector<ClaimedTask>> claimed = engine_.Claim(request);
  absl::MutexLock lock(&mu_);
  if (!claimed.ok()) {
    if (claimed.status().code() == absl::StatusCode::kFailedPrecondition) {
      impl_.Log(
          LogLevel::kError,
          StrCat("worker ", id(), " stops: ", claimed.status().message()));
      fatal_ = claimed.status();
      stopping_ = true;
    } else {
      impl_.Log(LogLevel::kWarning, StrCat("worker ", id(), ": claim failed: ",
                                           claimed.status().ToString()));
    }
    return 0;
  }
  stats_.claimed += static_cast<int64_t>(claimed->size());
  for (ClaimedTask& task : *claimed) {
    CancelToken token;
    in_flight_[task.key] = InFlight{task.attempt, task.deadline, token};
    ready_.emplace_back(std::move(task), token);
  }
  return static_cast<int>(claimed->size());
}

void WorkerImpl::HandlerLoop() {
  while (true) {
    std::pair<ClaimedTask, CancelToken> next;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ready_.empty() || handlers_exit_;
      };
      mu_.Await(absl::Condition(&has_work));
      if (ready_.empty()) return;
      next = std::move(ready_.front());
      ready_.pop_front();
    }
    RunHandler(std::move(next.first), std::move(next.second));
  }
}

void WorkerImpl::RunHandler(ClaimedTask task, CancelToken cancel) {
  const Handler& handler = flow_.handler(task.key.step_index);
  TaskContext context(
      TaskContext::Info{task.key.run_id, task.flow_slug, task.step_slug,
                        task.key.task_index, task.attempt, task.max_attempts,
                        task.deadline},
      cancel, impl_.options().log);
  absl::StatusOr<Json> outcome;
  try {
    outcome = handler(task.input, context);
  } catch (const std::exception& e) {
    outcome = absl::UnknownError(StrCat("handler threw: ", e.what()));
  } catch (...) {
    outcome = absl::UnknownError("handler threw a non-standard exception");
  }
  absl::MutexLock lock(&mu_);
  if (results_.empty()) first_result_at_ = absl::Now();
  results_.push_back(TaskResult{task.key, task.attempt, std::move(outcome)});
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(
    const Flow& flow, WorkerOptions options) {
  SLUICE_RETURN_IF_ERROR(flow.ValidateForWorker());
  SLUICE_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  SLUICE_ASSIGN_OR_RETURN(DeployOutcome deployed, Deploy(flow));
  (void)deployed;
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> compiled,
                          CompiledFlow::Compile(flow.shape()));
  auto worker = std::make_unique<WorkerImpl>(*this, flow, std::move(compiled),
                                             std::move(options));
  SLUICE_RETURN_IF_ERROR(worker->Start());
  return std::unique_ptr<Worker>(std::move(worker));
}

}  // namespace sluice
