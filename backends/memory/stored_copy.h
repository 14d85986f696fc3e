// Copies of caller data that the memory store keeps.
//
// A boost::json::value copy shares the source's memory resource. The caller
// may have built its JSON in an arena that dies long before the store does, so
// every JSON value the store keeps is copied into the default resource, and
// records holding JSON are copied through these helpers.
#ifndef SLUICE_BACKENDS_MEMORY_STORED_COPY_H_
#define SLUICE_BACKENDS_MEMORY_STORED_COPY_H_

#include <optional>

#include "boost/json/storage_ptr.hpp"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice::memory {

inline Json StoredCopy(const Json& value) {
  return Json(value, boost::json::storage_ptr());
}

inline std::optional<Json> StoredCopy(const std::optional<Json>& value) {
  if (!value.has_value()) return std::nullopt;
  return std::optional<Json>(std::in_place, *value, boost::json::storage_ptr());
}

inline FlowRecord StoredCopy(const FlowRecord& flow) {
  return FlowRecord{.slug = flow.slug,
                    .definition = StoredCopy(flow.definition),
                    .created_at = flow.created_at};
}

inline RunRecord StoredCopy(const RunRecord& run) {
  return RunRecord{.run_id = run.run_id,
                   .flow_slug = run.flow_slug,
                   .status = run.status,
                   .input = StoredCopy(run.input),
                   .output = StoredCopy(run.output),
                   .remaining_steps = run.remaining_steps,
                   .error = run.error,
                   .started_at = run.started_at,
                   .finished_at = run.finished_at};
}

inline StepStateRecord StoredCopy(const StepStateRecord& state) {
  return StepStateRecord{.run_id = state.run_id,
                         .step_index = state.step_index,
                         .step_slug = state.step_slug,
                         .status = state.status,
                         .remaining_deps = state.remaining_deps,
                         .initial_tasks = state.initial_tasks,
                         .remaining_tasks = state.remaining_tasks,
                         .output = StoredCopy(state.output),
                         .error = state.error,
                         .skip_reason = state.skip_reason,
                         .started_at = state.started_at,
                         .finished_at = state.finished_at};
}

inline TaskRecord StoredCopy(const TaskRecord& task) {
  return TaskRecord{.key = task.key,
                    .flow_slug = task.flow_slug,
                    .status = task.status,
                    .attempts = task.attempts,
                    .input = StoredCopy(task.input),
                    .output = StoredCopy(task.output),
                    .error = task.error,
                    .queue_name = task.queue_name,
                    .message_id = task.message_id,
                    .queued_at = task.queued_at,
                    .started_at = task.started_at,
                    .finished_at = task.finished_at,
                    .stall_at = task.stall_at,
                    .requeued_count = task.requeued_count,
                    .worker_id = task.worker_id};
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_STORED_COPY_H_
