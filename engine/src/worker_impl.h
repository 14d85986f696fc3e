// The worker's runtime object (worker.cc: threads, claims, leases and
// sweeps; worker_results.cc: recording results).
#ifndef SLUICE_ENGINE_WORKER_IMPL_H_
#define SLUICE_ENGINE_WORKER_IMPL_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/strings.h"
#include "sluice/worker.h"
#include "worker_shared.h"

namespace sluice::worker_internal {

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
    PrepareObservability(*shared_, impl_, queue_, options_.worker_id);
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->slots.resize(options_.concurrency);
    }
    for (int i = 0; i < options_.concurrency; ++i) {
      handlers_.emplace_back(HandlerLoop, shared_, static_cast<size_t>(i));
    }
    dispatcher_ = std::thread([this] { DispatchLoop(); });
    recorder_ = std::thread([this] { RecordLoop(); });
    started_ = true;
    impl_.metrics().WorkerStarted();
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
  void RecordLoop();
  bool ResultsDue(absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);
  // Waits until results are due (true) or the worker closed (false).
  bool AwaitResultsDue();
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
  std::thread recorder_;
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

}  // namespace sluice::worker_internal

#endif  // SLUICE_ENGINE_WORKER_IMPL_H_
