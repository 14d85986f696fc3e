// The worker's handler threads. They see only WorkerShared (see its header
// for why).
#include <exception>

#include "sluice/internal/strings.h"
#include "worker_shared.h"

namespace sluice {
namespace {

absl::StatusOr<StepResult> RunHandler(const WorkerShared& shared,
                                      const ClaimedTask& task,
                                      const CancelToken& cancel) {
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
                        task.deadline},
      cancel, shared.log);
  try {
    return (*handler)(task.input, context);
  } catch (const std::exception& e) {
    return absl::UnknownError(StrCat("handler threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError("handler threw a non-standard exception");
  }
}

}  // namespace

void HandlerLoop(std::shared_ptr<WorkerShared> shared, size_t slot) {
  WorkerShared& s = *shared;
  while (true) {
    std::pair<ClaimedTask, CancelToken> next;
    {
      absl::MutexLock lock(&s.mu);
      auto has_work = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return !s.ready.empty() || s.closed;
      };
      s.mu.Await(absl::Condition(&has_work));
      if (s.closed) return;
      next = std::move(s.ready.front());
      s.ready.pop_front();
      s.slots[slot].busy = true;
    }
    absl::StatusOr<StepResult> outcome = RunHandler(s, next.first, next.second);
    absl::MutexLock lock(&s.mu);
    s.slots[slot].busy = false;
    if (s.closed) return;  // abandoned: nobody will store this result
    if (s.results.empty()) s.first_result_at = absl::Now();
    s.results.push_back(
        TaskResult{next.first.key, next.first.attempt, std::move(outcome)});
  }
}

}  // namespace sluice
