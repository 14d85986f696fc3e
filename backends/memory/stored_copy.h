// How caller data becomes data the memory store keeps.
//
// A boost::json::value stays bound to the memory resource it was made in: a
// copy shares the source's resource, a move keeps it, and assignment keeps
// the destination's. The caller may have built its JSON in an arena that dies
// long before the store does, so every JSON value the store keeps lives in
// the default resource: a value taken by move is kept as it is when it
// already lives there (the common case, and free), else copied into it.
//
// Pitfall: never move a caller's value into a stored one by assignment
// (`stored.output = std::move(in.output)`) unless `in.output` went through
// Stored() first; construct from Stored() instead.
#ifndef SLUICE_BACKENDS_MEMORY_STORED_COPY_H_
#define SLUICE_BACKENDS_MEMORY_STORED_COPY_H_

#include <optional>
#include <utility>

#include "boost/json/storage_ptr.hpp"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice::memory {

inline bool InDefaultResource(const Json& value) {
  return value.storage().get() == boost::json::storage_ptr().get();
}

// --- Copies of values the caller keeps -------------------------------------

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
                    .created_at = flow.created_at,
                    .alias = flow.alias,
                    .generation = flow.generation};
}

// --- Values the caller gives up --------------------------------------------

inline Json Stored(Json&& value) {
  if (InDefaultResource(value)) return Json(std::move(value));
  return StoredCopy(value);
}

inline std::optional<Json> Stored(std::optional<Json>&& value) {
  if (!value.has_value()) return std::nullopt;
  return std::optional<Json>(std::in_place, Stored(std::move(*value)));
}

inline RunRecord Stored(RunRecord&& run) {
  return RunRecord{.run_id = run.run_id,
                   .flow_slug = std::move(run.flow_slug),
                   .status = run.status,
                   .input = Stored(std::move(run.input)),
                   .output = Stored(std::move(run.output)),
                   .remaining_steps = run.remaining_steps,
                   .error = std::move(run.error),
                   .started_at = run.started_at,
                   .finished_at = run.finished_at,
                   .priority = run.priority,
                   .external_key = std::move(run.external_key),
                   .metadata = Stored(std::move(run.metadata)),
                   .options = Stored(std::move(run.options)),
                   .cancel_requested = run.cancel_requested};
}

inline StepStateRecord Stored(StepStateRecord&& state) {
  return StepStateRecord{.run_id = state.run_id,
                         .step_index = state.step_index,
                         .step_slug = std::move(state.step_slug),
                         .status = state.status,
                         .remaining_deps = state.remaining_deps,
                         .initial_tasks = state.initial_tasks,
                         .remaining_tasks = state.remaining_tasks,
                         .output = Stored(std::move(state.output)),
                         .error = std::move(state.error),
                         .skip_reason = state.skip_reason,
                         .started_at = state.started_at,
                         .finished_at = state.finished_at};
}

inline TaskRecord Stored(TaskRecord&& task) {
  return TaskRecord{.key = task.key,
                    .flow_slug = std::move(task.flow_slug),
                    .status = task.status,
                    .attempts = task.attempts,
                    .input = Stored(std::move(task.input)),
                    .output = Stored(std::move(task.output)),
                    .error = std::move(task.error),
                    .queue_name = std::move(task.queue_name),
                    .message_id = task.message_id,
                    .queued_at = task.queued_at,
                    .started_at = task.started_at,
                    .finished_at = task.finished_at,
                    .stall_at = task.stall_at,
                    .requeued_count = task.requeued_count,
                    .worker_id = std::move(task.worker_id),
                    .budget_start = task.budget_start,
                    .cancel_requested = task.cancel_requested,
                    .options = Stored(std::move(task.options))};
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_STORED_COPY_H_
