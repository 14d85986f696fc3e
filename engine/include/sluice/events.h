// Run and step events, delivered in-process to subscribers.
//
// Events are published after the transaction that caused them commits, and
// a cause is always delivered before its effects: `run_started` before the
// first `step_started`, a step's `step_completed` before its dependents'
// `step_started`, and the last step's event before `run_completed`.
#ifndef SLUICE_EVENTS_H_
#define SLUICE_EVENTS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice {

enum class EventKind {
  kRunStarted,
  kRunCompleted,
  kRunFailed,
  kRunCancelled,
  kStepStarted,
  kStepCompleted,
  kStepFailed,
  kStepSkipped,
};

// "run:started", "step:completed", ...
std::string_view ToString(EventKind kind);

struct Event {
  EventKind kind = EventKind::kRunStarted;
  RunId run_id;
  std::string flow_slug;
  std::string step_slug;      // empty for run events
  std::optional<Json> value;  // run input (started) or output (completed)
  std::string error;          // failed events; skipped by handler failure
  SkipReason skip_reason = SkipReason::kNone;
  absl::Time at;
};

// Called on the publishing thread; must not block for long or call back into
// the engine's write paths.
using EventHandler = std::function<void(const Event&)>;

}  // namespace sluice

#endif  // SLUICE_EVENTS_H_
