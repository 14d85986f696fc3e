// A worker's metrics and tracing hooks: the counters its handler threads
// bump, and the spans of its claims, handlers and result recording
// (docs/decisions/0035-tracing.md).
#include "engine_impl.h"
#include "worker_shared.h"

namespace sluice {

void PrepareObservability(WorkerShared& shared, Engine::Impl& impl,
                          std::string queue, std::string worker_id) {
  for (const Flow& flow : shared.flows) {
    std::vector<std::shared_ptr<StepMetrics>>& steps =
        shared.step_metrics.emplace_back();
    for (const StepShape& step : flow.shape().steps) {
      steps.push_back(impl.metrics().Step(flow.slug(), step.slug));
    }
  }
  shared.tracer = impl.options().tracer;
  shared.span_ids = impl.span_ids();
  shared.queue = std::move(queue);
  shared.worker_id = std::move(worker_id);
}

SpanScope::SpanScope(const WorkerShared& shared, Span span)
    : tracer_(*shared.tracer), span_(std::move(span)) {
  span_.id = shared.span_ids->fetch_add(1) + 1;
  span_.queue = shared.queue;
  span_.worker_id = shared.worker_id;
  span_.start = absl::Now();
  tracer_.SpanStarted(span_);
}

void SpanScope::End(const absl::Status& status) {
  if (ended_) return;
  ended_ = true;
  tracer_.SpanEnded(span_, absl::Now(), status);
}

absl::StatusOr<ClaimBatch> TracedClaim(Engine& engine,
                                       const WorkerShared& shared,
                                       const ClaimRequest& request) {
  if (shared.tracer == nullptr) return engine.ClaimWithHint(request);
  SpanScope scope(shared, Span{.kind = SpanKind::kClaim});
  absl::StatusOr<ClaimBatch> batch = engine.ClaimWithHint(request);
  if (batch.ok()) scope.span().tasks = static_cast<int>(batch->tasks.size());
  scope.End(batch.status());
  return batch;
}

RecordedResults TracedRecordResults(Engine& engine, const WorkerShared& shared,
                                    std::vector<TaskResult> results,
                                    std::string_view worker_id) {
  if (shared.tracer == nullptr) {
    return RecordResults(engine, std::move(results), worker_id);
  }
  SpanScope scope(shared, Span{.kind = SpanKind::kFinish,
                               .tasks = static_cast<int>(results.size())});
  RecordedResults recorded =
      RecordResults(engine, std::move(results), worker_id);
  scope.End(recorded.transient_error);
  return recorded;
}

}  // namespace sluice
