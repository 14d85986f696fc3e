// The engine-owned options JSON kept on runs and tasks (RunRecord::options,
// TaskRecord::options). Backends store it as given; only the engine reads it.
//
// TaskRecord.options, all keys optional:
//   {"max_attempts": int, "timeout_ms": int,
//    "backoff": {"kind": "fixed"|"exponential", "delay_ms": int},
//    "traceparent": str}
// RunRecord.options: the same keys, plus
//   "keep": {"completed"|"failed"|"cancelled": {"count": int, "age_ms": int}}
//   "dedupe": {"key": str, "ttl_ms": int, "extend": bool, "replace": bool}
//
// Readers are lenient: a key that is missing or of the wrong type reads as
// unset, so a hand-edited or older row never blocks a task.
#ifndef SLUICE_ENGINE_RUN_OPTIONS_H_
#define SLUICE_ENGINE_RUN_OPTIONS_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "sluice/flow.h"
#include "sluice/job.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice {

// Per-task overrides of the step's max attempts, timeout and backoff.
struct TaskOverrides {
  std::optional<int> max_attempts;
  std::optional<absl::Duration> timeout;
  std::optional<Backoff> backoff;
  // Not an override: the run's W3C traceparent, which every task carries
  // so a claim hands it to the handler without reading the run.
  std::optional<std::string> traceparent;
};

// null (or anything not an object) -> all unset.
TaskOverrides ParseTaskOverrides(const Json& task_options);
// All unset -> null.
Json TaskOverridesToJson(const TaskOverrides& overrides);

// Everything a run's options hold.
struct RunOptions {
  TaskOverrides task;
  std::optional<Keep> keep;
  std::optional<Dedupe> dedupe;
};

RunOptions ParseRunOptions(const Json& run_options);
// Nothing set -> null.
Json RunOptionsToJson(const RunOptions& options);

// The task options every task of a run gets: the run options' task keys.
Json TaskOptionsOfRun(const Json& run_options);

// The traceparent in a task's (or run's) options; "" if none.
std::string TraceparentOf(const Json& options);

// The rule of `keep` for runs that ended with `status` (an unset rule for
// kStarted).
const KeepRule& KeepRuleFor(const Keep& keep, RunStatus status);

}  // namespace sluice

#endif  // SLUICE_ENGINE_RUN_OPTIONS_H_
