// The state a worker shares with its handler threads.
//
// Handler threads hold it by shared_ptr and touch nothing else: a thread
// whose handler still runs when Stop() gives up is detached (abandoned), may
// outlive the worker and the engine, and must still find everything it uses.
#ifndef SLUICE_ENGINE_WORKER_SHARED_H_
#define SLUICE_ENGINE_WORKER_SHARED_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics_registry.h"
#include "result_recorder.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/records.h"
#include "sluice/task_context.h"
#include "sluice/tracing.h"
#include "sluice/worker.h"

namespace sluice {

// Lock order: WorkerShared::mu is a leaf; no backend call or handler runs
// while it is held.
struct WorkerShared {
  // A claimed task: its lease, and the token that cancels its handler.
  struct InFlight {
    int attempt = 0;
    absl::Time deadline;
    CancelToken cancel;
    bool recording = false;  // its result is in the recorder's hands
  };
  // One handler thread. `busy` while it runs a handler.
  struct HandlerSlot {
    bool busy = false;
  };

  WorkerShared(std::vector<Flow> flows_in, LogSink log_in)
      : flows(std::move(flows_in)), log(std::move(log_in)) {}

  // The handler of a step of one of the served flows; null if none.
  const Handler* HandlerFor(std::string_view flow_slug, int step_index) const {
    for (const Flow& flow : flows) {
      if (flow.slug() != flow_slug) continue;
      if (step_index < 0 ||
          static_cast<size_t>(step_index) >= flow.shape().steps.size()) {
        return nullptr;
      }
      return &flow.handler(step_index);
    }
    return nullptr;
  }

  // The in-flight entry of `key` if it belongs to `attempt`, else null: an
  // entry belongs to its task's latest attempt.
  InFlight* InFlightOf(const TaskKey& key, int attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = in_flight.find(key);
    if (it == in_flight.end() || it->second.attempt != attempt) return nullptr;
    return &it->second;
  }
  // Ends the entry of `key` if it belongs to `attempt`: the result or
  // release of an older attempt must not end a newer attempt's lease.
  void EndInFlight(const TaskKey& key, int attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (InFlightOf(key, attempt) != nullptr) in_flight.erase(key);
  }

  // The metrics of a step of one of the served flows; null if none.
  StepMetrics* MetricsFor(std::string_view flow_slug, int step_index) const {
    for (size_t f = 0; f < flows.size(); ++f) {
      if (flows[f].slug() != flow_slug) continue;
      if (step_index < 0 ||
          static_cast<size_t>(step_index) >= step_metrics[f].size()) {
        return nullptr;
      }
      return step_metrics[f][step_index].get();
    }
    return nullptr;
  }

  const std::vector<Flow> flows;  // the handlers
  // Set by PrepareObservability before the handler threads start, and never
  // changed after. Per flow, per step index: its counters.
  std::vector<std::vector<std::shared_ptr<StepMetrics>>> step_metrics;
  std::shared_ptr<Tracer> tracer;  // null: no tracing
  std::shared_ptr<std::atomic<uint64_t>> span_ids;
  std::string queue;
  std::string worker_id;
  const LogSink log;  // handed to handlers through their TaskContext

  absl::Mutex mu;
  // Claimed tasks waiting for a handler thread.
  std::deque<std::pair<ClaimedTask, CancelToken>> ready ABSL_GUARDED_BY(mu);
  // Every claimed task until its result is stored (or given up on).
  absl::flat_hash_map<TaskKey, InFlight> in_flight ABSL_GUARDED_BY(mu);
  // Results waiting to be stored.
  std::vector<TaskResult> results ABSL_GUARDED_BY(mu);
  // How many results the recorder thread is storing (taken from `results`).
  size_t recording ABSL_GUARDED_BY(mu) = 0;
  absl::Time first_result_at ABSL_GUARDED_BY(mu);
  // Storing results failed for a transient error; not again before this.
  absl::Time record_retry_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::vector<HandlerSlot> slots ABSL_GUARDED_BY(mu);

  bool poked ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  absl::Time drain_deadline ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  // The dispatcher has exited: nothing more is claimed or stored, handler
  // threads take no more tasks, and a late result is dropped (its attempt's
  // lease lapses, so the fence by attempt would ignore it anyway).
  bool closed ABSL_GUARDED_BY(mu) = false;
  absl::Status fatal ABSL_GUARDED_BY(mu);
  // OK, or why the drain left work unfinished.
  absl::Status drain_status ABSL_GUARDED_BY(mu);
  WorkerStats stats ABSL_GUARDED_BY(mu);
};

// Fills shared's metrics and tracing fields; before the handler threads
// start (worker_tracing.cc).
void PrepareObservability(WorkerShared& shared, Engine::Impl& impl,
                          std::string queue, std::string worker_id);
// Engine::ClaimWithHint and RecordResults, inside kClaim and kFinish spans
// when there is a tracer (worker_tracing.cc).
absl::StatusOr<ClaimBatch> TracedClaim(Engine& engine,
                                       const WorkerShared& shared,
                                       const ClaimRequest& request);
RecordedResults TracedRecordResults(Engine& engine, const WorkerShared& shared,
                                    std::vector<TaskResult> results,
                                    std::string_view worker_id);
// Starts a span on shared.tracer (which must be set) now; ends it when
// destroyed, unless End was called first.
class SpanScope {
 public:
  SpanScope(const WorkerShared& shared, Span span);
  ~SpanScope() { End(absl::OkStatus()); }
  Span& span() { return span_; }
  void End(const absl::Status& status);

 private:
  Tracer& tracer_;
  Span span_;
  bool ended_ = false;
};

// A handler thread's body: runs ready tasks until the worker closes.
void HandlerLoop(std::shared_ptr<WorkerShared> shared, size_t slot);

// What a worker serves, worked out from a WorkerSpec before it starts.
struct WorkerPlan {
  std::string queue;
  std::vector<Flow> flows;                // the handlers, in the spec's order
  StepSet served;                         // the (flow, step) pairs it claims
  std::vector<ServedSteps> served_steps;  // the same, for its registration
  // The deployed generation of each flow, which its claims carry.
  std::vector<FlowGeneration> generations;
};

// Starts a worker for `plan` (its flows deployed and validated).
absl::StatusOr<std::unique_ptr<Worker>> LaunchWorker(Engine& engine,
                                                     WorkerPlan plan,
                                                     WorkerOptions options);

}  // namespace sluice

#endif  // SLUICE_ENGINE_WORKER_SHARED_H_
