// The worker's handler threads. They see only WorkerShared (see its header
// for why).
#include <exception>
#include <optional>

#include "sluice/internal/strings.h"
#include "worker_shared.h"

namespace sluice {
namespace {

// Runs the task's handler; `completion_write` receives the write it
// registered, if any.
absl::StatusOr<StepResult> RunHandler(const WorkerShared& shared,
                                      const ClaimedTask& task,
                                      const CancelToken& cancel,
                                      NativeWrite& completion_write) {
  const Handler* handler =
      shared.HandlerFor(task.flow_slug, task.key.step_index);
  if (handler == nullptr) {
    // The claim only takes steps the worker serves, so this is a bug.
    return absl::InternalError(StrCat("worker has no handler for flow \"",
                                      task.flow_slug, "\" step ",
                                      task.key.step_index));
  }
  TaskContext context(
      TaskContext::Info{task.key.run_id, task.flow_slug, task.step_slug,
                        task.key.task_index, task.attempt, task.max_attempts,
                        task.deadline, task.traceparent},
      cancel, shared.log);
  try {
    absl::StatusOr<StepResult> outcome = (*handler)(task.input, context);
    completion_write = context.TakeCompletionWrite();
    return outcome;
  } catch (const std::exception& e) {
    return absl::UnknownError(StrCat("handler threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("handler threw a non-standard exception");
  }
}

Span HandlerSpan(const ClaimedTask& task) {
  Span span;
  span.kind = SpanKind::kHandler;
  span.run_id = task.key.run_id;
  span.flow = task.flow_slug;
  span.step = task.step_slug;
  span.task_index = task.key.task_index;
  span.attempt = task.attempt;
  span.traceparent = task.traceparent;
  return span;
}

}  // namespace

// One lock round per task: the thread hands in the result of the task it
// ran and takes the next ready one under the same lock, so a busy worker
// neither locks twice per task nor sleeps between tasks that are waiting.
void HandlerLoop(std::shared_ptr<WorkerShared> shared, size_t slot) {
  WorkerShared& s = *shared;
  std::optional<TaskResult> finished;  // the last task's, to hand in
  while (true) {
    // Empty until taken: a CancelToken built here would allocate a flag
    // only to be replaced.
    std::optional<std::pair<ClaimedTask, CancelToken>> taken;
    {
      absl::MutexLock lock(&s.mu);
      if (finished.has_value()) {
        s.slots[slot].busy = false;
        if (s.closed) return;  // abandoned: nobody will store this result
        if (s.results.empty()) s.first_result_at = absl::Now();
        s.results.push_back(*std::move(finished));
        finished.reset();
      }
      auto has_work = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return !s.ready.empty() || s.closed;
      };
      s.mu.Await(absl::Condition(&has_work));
      if (s.closed) return;
      taken.emplace(std::move(s.ready.front()));
      s.ready.pop_front();
      s.slots[slot].busy = true;
    }
    auto& [task, cancel] = *taken;
    absl::Time began = absl::Now();
    NativeWrite completion_write;
    std::optional<SpanScope> span;
    if (s.tracer != nullptr) span.emplace(s, HandlerSpan(task));
    absl::StatusOr<StepResult> outcome =
        RunHandler(s, task, cancel, completion_write);
    if (span) span->End(outcome.status());
    if (StepMetrics* m = s.MetricsFor(task.flow_slug, task.key.step_index)) {
      m->handler_seconds.Observe(ToSeconds(absl::Now() - began));
    }
    finished.emplace(TaskResult{task.key, task.attempt, std::move(outcome),
                                std::move(completion_write),
                                std::move(task.record)});
  }
}

}  // namespace sluice
