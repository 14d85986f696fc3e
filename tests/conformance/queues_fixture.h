// Shared helpers of the queue-mode scenarios (queues_*_test.cc): claiming
// on one queue for chosen (flow, step) pairs, driving multi-queue runs by
// hand, and reading the queue registry (docs/decisions/0024).
#ifndef SLUICE_TESTS_CONFORMANCE_QUEUES_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_QUEUES_FIXTURE_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "sluice/forwarding_backend.h"
#include "sluice/internal/strings.h"
#include "support/drive_job.h"
#include "support/postgres_sql.h"
#include "worker_fixture.h"

namespace sluice::testing {

// A backend on which some queue names exist physically without being in the
// registry (as a queue someone made with pgmq.create by hand would on
// Postgres; memory and SQLite can't hold such a queue), and which records
// every worker registration the engine writes.
class QueuesTestBackend : public ForwardingBackend {
 public:
  explicit QueuesTestBackend(Backend& target) : ForwardingBackend(target) {}

  void AddUnregistered(std::string name) {
    absl::MutexLock lock(&mu_);
    unregistered_.push_back(std::move(name));
  }
  std::vector<WorkerRecord> upserts() {
    absl::MutexLock lock(&mu_);
    return upserts_;
  }

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<Tx>(std::move(tx), *this);
  }

 private:
  class Tx : public ForwardingTransaction {
   public:
    Tx(std::unique_ptr<Transaction> tx, QueuesTestBackend& backend)
        : ForwardingTransaction(std::move(tx)), backend_(backend) {}
    absl::StatusOr<bool> QueueExists(std::string_view name) override {
      {
        absl::MutexLock lock(&backend_.mu_);
        for (const std::string& u : backend_.unregistered_) {
          if (u == name) return true;
        }
      }
      return ForwardingTransaction::QueueExists(name);
    }
    absl::Status UpsertWorker(const WorkerRecord& worker) override {
      {
        absl::MutexLock lock(&backend_.mu_);
        backend_.upserts_.push_back(worker);
      }
      return ForwardingTransaction::UpsertWorker(worker);
    }

   private:
    QueuesTestBackend& backend_;
  };

  absl::Mutex mu_;
  std::vector<std::string> unregistered_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerRecord> upserts_ ABSL_GUARDED_BY(mu_);
};

class QueuesConformance : public WorkerConformance {
 protected:
  // A slug of exactly `length` characters: `prefix` padded with 'x'.
  static std::string SlugOfLength(std::string prefix, size_t length) {
    prefix.resize(length, 'x');
    return prefix;
  }

  // The steps of `flow` on `queue`, as a claim's served set.
  static StepSet StepsOn(const Flow& flow, std::string_view queue) {
    StepSet set;
    for (size_t i = 0; i < flow.shape().steps.size(); ++i) {
      if (flow.shape().steps[i].queue_name == queue) {
        set.Add(flow.slug(), static_cast<int>(i));
      }
    }
    return set;
  }

  absl::StatusOr<std::vector<ClaimedTask>> ClaimOn(std::string queue,
                                                   StepSet served,
                                                   int limit = 100) {
    ClaimRequest request;
    request.queue = std::move(queue);
    request.worker_id = "queues-test";
    request.served = std::move(served);
    request.limit = limit;
    return engine().Claim(request);
  }

  // Runs the handlers of claimed tasks of `flows` and records the results.
  void RunHandlers(const std::vector<const Flow*>& flows,
                   std::vector<ClaimedTask> claimed) {
    std::vector<TaskResult> results;
    for (ClaimedTask& task : claimed) {
      const Flow* flow = nullptr;
      for (const Flow* f : flows) {
        if (f->slug() == task.flow_slug) flow = f;
      }
      if (flow == nullptr) {
        ADD_FAILURE() << "claimed a task of unknown flow " << task.flow_slug;
        continue;
      }
      results.push_back(RunClaimed(*flow, task));
    }
    Finish(std::move(results));
  }

  // Claims on every queue of `flow`, each for that queue's steps only,
  // until no queue has a claimable task. Returns the queues in the order
  // their tasks were claimed, one entry per claimed task.
  std::vector<std::string> DriveEveryQueue(const Flow& flow) {
    std::vector<std::string> order;
    std::vector<std::string> queues;
    for (const StepShape& step : flow.shape().steps) {
      if (std::find(queues.begin(), queues.end(), step.queue_name) ==
          queues.end()) {
        queues.push_back(step.queue_name);
      }
    }
    bool progress = true;
    while (progress) {
      progress = false;
      for (const std::string& queue : queues) {
        absl::StatusOr<std::vector<ClaimedTask>> claimed =
            ClaimOn(queue, StepsOn(flow, queue));
        EXPECT_TRUE(claimed.ok()) << claimed.status();
        if (!claimed.ok() || claimed->empty()) continue;
        progress = true;
        order.insert(order.end(), claimed->size(), queue);
        RunHandlers({&flow}, std::move(*claimed));
      }
    }
    return order;
  }

  std::optional<QueueRecord> Registered(std::string_view queue) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return std::nullopt;
    absl::StatusOr<std::optional<QueueRecord>> entry = (*tx)->GetQueue(queue);
    EXPECT_TRUE(entry.ok()) << entry.status();
    return entry.ok() ? *entry : std::nullopt;
  }

  // Every registered queue's name, sorted.
  std::vector<std::string> RegisteredNames() {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return {};
    absl::StatusOr<std::vector<QueueRecord>> all = (*tx)->ListQueues();
    EXPECT_TRUE(all.ok()) << all.status();
    std::vector<std::string> names;
    if (all.ok()) {
      for (const QueueRecord& q : *all) names.push_back(q.name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  bool FlowStored(std::string_view slug) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return false;
    absl::StatusOr<std::optional<FlowRecord>> flow = (*tx)->GetFlow(slug);
    EXPECT_TRUE(flow.ok()) << flow.status();
    return flow.ok() && flow->has_value();
  }

  // The stored definition of `slug`, read back.
  FlowShape StoredShape(std::string_view slug) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return {};
    absl::StatusOr<std::optional<FlowRecord>> flow = (*tx)->GetFlow(slug);
    EXPECT_TRUE(flow.ok() && flow->has_value());
    if (!flow.ok() || !flow->has_value()) return {};
    absl::StatusOr<FlowShape> shape = FlowShape::FromJson((*flow)->definition);
    EXPECT_TRUE(shape.ok()) << shape.status();
    return shape.ok() ? *shape : FlowShape();
  }

  // Puts the engine over a QueuesTestBackend wrapping the test's backend.
  QueuesTestBackend& Wrapped() {
    if (wrapped_ == nullptr) {
      wrapped_ = std::make_unique<QueuesTestBackend>(backend());
      UseEngine(*wrapped_);
      WatchRunEnds();
    }
    return *wrapped_;
  }

  // Makes `queue` exist without being registered: really on Postgres,
  // through QueuesTestBackend on the others.
  void MakeUnregisteredQueue(const std::string& queue) {
    Wrapped();
    if (GetParam() == "postgres") {
      SqlSession sql(postgres_url());
      sql.Rows("SELECT pgmq.create($1)", {queue});
    } else {
      wrapped_->AddUnregistered(queue);
    }
  }

  void TearDown() override {
    StopWorkers();
    WorkerConformance::TearDown();
  }

  // Workers are stopped before the engine and the wrapper go.
  std::vector<std::unique_ptr<Worker>> workers_;
  void StopWorkers() {
    for (auto& w : workers_) {
      if (w != nullptr) (void)w->Stop();
    }
    workers_.clear();
  }

  std::unique_ptr<QueuesTestBackend> wrapped_;

  std::unique_ptr<Worker> MustStart(const WorkerSpec& spec,
                                    WorkerOptions options = Fast()) {
    absl::StatusOr<std::unique_ptr<Worker>> worker =
        engine().StartWorker(spec, std::move(options));
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? std::move(*worker) : nullptr;
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_QUEUES_FIXTURE_H_
