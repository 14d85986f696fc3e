// The records a backend stores. Backends keep them; the engine decides every
// transition. Times are the engine clock's; JSON is kept exactly.
//
// Unreadable rows. A stored row may hold a value that no longer decodes (a
// row written by an older version, a hand-edited database): JSON that does
// not parse or that CheckJsonValue refuses, an enum name or run id that is
// not recognized. A backend never fails a whole read for that. It returns
// the record with every field that decoded, leaves the others at their
// defaults (JSON null, the first enum value: kStarted, kCreated, kQueued,
// kCompleted; a nil run id), and names each problem in the record's
// `unreadable` text. The engine takes such a record out of the way (see
// docs/decisions/0014-unreadable-stored-data.md); admin reads show it.
#ifndef SLUICE_RECORDS_H_
#define SLUICE_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/json.h"

namespace sluice {

enum class RunStatus { kStarted, kCompleted, kFailed, kCancelled };
enum class StepStatus {
  kCreated,
  kStarted,
  kCompleted,
  kFailed,
  kSkipped,
  kCancelled
};
enum class TaskStatus {
  kQueued,
  kStarted,
  kCompleted,
  kFailed,
  kSkipped,
  kCancelled,
  // Parked: its handler fanned out and it waits for its children. Holds no
  // lease and no visible message; stall recovery leaves it alone.
  kWaiting,
};
enum class SkipReason {
  kNone,
  kConditionUnmet,     // its condition was false and when_unmet skipped it
  kHandlerFailed,      // its attempts ran out and when_exhausted skipped it
  kDependencySkipped,  // an upstream skip_cascade reached it
};

std::string_view ToString(RunStatus status);
std::string_view ToString(StepStatus status);
std::string_view ToString(TaskStatus status);
std::string_view ToString(SkipReason reason);
absl::StatusOr<RunStatus> ParseRunStatus(std::string_view text);
absl::StatusOr<StepStatus> ParseStepStatus(std::string_view text);
absl::StatusOr<TaskStatus> ParseTaskStatus(std::string_view text);
absl::StatusOr<SkipReason> ParseSkipReason(std::string_view text);

inline bool IsTerminal(RunStatus s) { return s != RunStatus::kStarted; }
inline bool IsTerminal(StepStatus s) {
  return s != StepStatus::kCreated && s != StepStatus::kStarted;
}
inline bool IsTerminal(TaskStatus s) {
  return s != TaskStatus::kQueued && s != TaskStatus::kStarted &&
         s != TaskStatus::kWaiting;
}

// A deployed flow: its canonical definition (FlowShape::ToJson()).
struct FlowRecord {
  std::string slug;
  Json definition;
  absl::Time created_at;
  // The alias this concrete slug belongs to; fixed at creation. Empty in
  // rows written before aliases existed, which means the slug itself.
  std::string alias;
  // Bumped by a fenced development recompilation; workers that deployed an
  // older generation are refused claims.
  int64_t generation = 1;
};

// A stable name for a family of versions, and the one that is active.
struct AliasRecord {
  std::string alias;
  std::string active_slug;
  absl::Time updated_at;
};

// A cron schedule, keyed by (group, name) (docs/decisions/0031). The engine
// encodes the spec (target, cron, time zone, payload, options, misfire
// policy) into `definition`; backends store it as given.
struct ScheduleRecord {
  std::string group;
  std::string name;
  Json definition;
  // Every fire time at or before the cursor is handled (started, or skipped
  // by the misfire policy). Moves only forward, by compare-and-set.
  absl::Time cursor;
  absl::Time created_at;
  absl::Time updated_at;
  // Set when `definition` does not decode (see the top of this file).
  std::string unreadable;
};

// A flow's runs by status.
struct RunCounts {
  int64_t started = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;

  int64_t total() const { return started + completed + failed + cancelled; }
};

// A physical queue in the registry. `owner_flow` is the concrete flow that
// owns a private queue; empty means shared.
struct QueueRecord {
  std::string name;
  std::string owner_flow;
  absl::Time created_at;
  // A paused queue's messages are not read (ReadMessages returns none).
  bool paused = false;
};

struct RunRecord {
  RunId run_id;
  std::string flow_slug;
  RunStatus status = RunStatus::kStarted;
  Json input;
  std::optional<Json> output;
  int remaining_steps = 0;
  std::string error;
  absl::Time started_at;
  std::optional<absl::Time> finished_at;  // completed, failed or cancelled
  // Claim order: higher first; every task of the run inherits it.
  int priority = 0;
  // The caller's id for the run (a job's explicit id, a run's idempotency
  // key), unique per flow; empty when none. Fixed at creation.
  std::string external_key;
  // The caller's labels: a JSON object, or null when none.
  Json metadata;
  // Engine-owned per-run settings (option overrides, retention, dedupe);
  // opaque to backends, null when none.
  Json options;
  // Set by a cancel request while tasks of the run are started.
  bool cancel_requested = false;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

struct StepStateRecord {
  RunId run_id;
  int step_index = 0;
  std::string step_slug;
  StepStatus status = StepStatus::kCreated;
  int remaining_deps = 0;
  std::optional<int> initial_tasks;    // unknown for a map before its input
  std::optional<int> remaining_tasks;  // set when the step starts
  std::optional<Json> output;          // set when the step completes
  std::string error;
  SkipReason skip_reason = SkipReason::kNone;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> finished_at;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// Identifies a task within its run.
struct TaskKey {
  RunId run_id;
  int step_index = 0;
  int task_index = 0;

  friend auto operator<=>(const TaskKey&, const TaskKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const TaskKey& k) {
    return H::combine(std::move(h), k.run_id, k.step_index, k.task_index);
  }
};

struct TaskRecord {
  TaskKey key;
  std::string flow_slug;
  TaskStatus status = TaskStatus::kQueued;
  int attempts = 0;  // attempts claimed so far
  Json input;        // the handler's input, fixed when the task is created
  std::optional<Json> output;
  std::string error;
  // The task's message, fixed at creation; every queue operation uses it.
  std::string queue_name;
  int64_t message_id = 0;
  absl::Time queued_at;
  std::optional<absl::Time> started_at;   // the current attempt's claim
  std::optional<absl::Time> finished_at;  // terminal time
  // While started: when stall recovery may take the task back.
  std::optional<absl::Time> stall_at;
  int requeued_count = 0;  // times stall recovery requeued it
  std::string worker_id;   // the worker of the current or last attempt
  // Claims made before the current attempt budget began (a retry of the run,
  // or a release, moves it up); attempts - budget_start counts against the
  // budget. `attempts` itself only grows: it fences stale results.
  int budget_start = 0;
  // Set while started when its run is asked to cancel; the handler's cancel
  // token fires at the next heartbeat.
  bool cancel_requested = false;
  // Engine-owned per-task settings (max attempts, timeout, backoff) copied
  // from the run at creation; opaque to backends, null when none. Fixed at
  // creation.
  Json options;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// How an attempt ended, in the attempts ledger.
enum class AttemptOutcome {
  kCompleted,
  kRetried,    // failed, and the task was queued again
  kFailed,     // failed, and the task's attempts ran out (or must not retry)
  kStalled,    // its lease ran out and stall recovery took the task back
  kCancelled,  // the run was cancelled while the attempt held the task
  kReleased,   // the worker gave the task back unstarted (no attempt used)
  kFannedOut,  // the handler returned a FanOut: the task parked (kWaiting)
};
std::string_view ToString(AttemptOutcome outcome);
absl::StatusOr<AttemptOutcome> ParseAttemptOutcome(std::string_view text);

// One ended attempt of one task: the ledger is append-only and kept across
// retries and resumes; it goes only with its run.
struct AttemptRecord {
  TaskKey task;
  int attempt = 1;  // the task's attempt number (TaskRecord::attempts)
  std::string worker_id;
  std::optional<absl::Time> started_at;  // unset if it never started
  absl::Time finished_at;
  AttemptOutcome outcome = AttemptOutcome::kCompleted;
  std::string error;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// A dedupe registry entry: (flow_slug, key) held by one run. `expires_at`
// set means a throttle window; unset means held while the run is unfinished.
struct DedupeRecord {
  std::string flow_slug;
  std::string key;
  RunId run_id;
  std::optional<absl::Time> expires_at;
};

// Task counts of one queue by state. A queued task is `waiting` once its
// message is visible, `delayed` before.
struct QueueCounts {
  int64_t waiting = 0;
  int64_t delayed = 0;
  int64_t active = 0;  // started
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t skipped = 0;
  int64_t parked = 0;  // waiting for fan-out children
  // The earliest time a waiting task's message became visible: since when
  // the queue's longest-waiting claimable task has waited. Unset when none
  // waits.
  std::optional<absl::Time> oldest_waiting_since;
};

// What happened to a task, for report application.
enum class ReportKind {
  kCompleted,      // output stored; count it toward its step
  kFailed,         // attempts used up; apply when_exhausted
  kTypeViolation,  // output can't feed a dependent map; fail the run
  kUnreadable,     // its stored data could not be read; fail the run
};
std::string_view ToString(ReportKind kind);
absl::StatusOr<ReportKind> ParseReportKind(std::string_view text);

// An outbox entry: written in the same transaction as the task's terminal
// transition, applied (and deleted) later by report application.
struct OutboxReport {
  int64_t report_id = 0;  // assigned by the backend, increasing
  TaskKey task;
  std::string flow_slug;
  ReportKind kind = ReportKind::kCompleted;
  absl::Time created_at;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// --- Fan-out children -------------------------------------------------------
// See docs/decisions/0028-fan-out-children.md.

// Where one child of a fanned-out task stands, as its parent's store records
// it. Only kPending moves (to one of the others, once).
enum class ChildStatus { kPending, kCompleted, kFailed, kCancelled };
std::string_view ToString(ChildStatus status);
absl::StatusOr<ChildStatus> ParseChildStatus(std::string_view text);

// One child of a parked (kWaiting) parent task: a dependency row in the
// PARENT's store, one per child, keyed by (parent, child_index).
struct ChildLinkRecord {
  TaskKey parent;
  int child_index = 0;  // the child's position in the FanOut, from 0
  // The store the child lives in (EngineOptions' store key); empty: the
  // parent's own store.
  std::string child_store;
  RunId child_run_id;  // deterministic: derived from (parent, child_index)
  ChildStatus status = ChildStatus::kPending;
  std::optional<Json> output;  // the child's output once completed
  std::string error;           // why it failed or was cancelled
  // True when no cancel is owed to the child: it reported its own outcome,
  // or the cascade delivered the cancel.
  bool cascaded = false;
  // Pending since (re-armed each time the sweeper looks at the row).
  absl::Time pending_since;
  // The full child request (flow or job name, payload, options), opaque to
  // backends, so the sweeper can re-create a missing child from this row.
  Json spec;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// A pending child's outcome, applied to its link only while it is pending.
struct ChildSettlement {
  TaskKey parent;
  int child_index = 0;
  ChildStatus outcome = ChildStatus::kCompleted;  // not kPending
  std::optional<Json> output;
  std::string error;
  bool cascaded = true;  // false when the parent's side cancels the child
};

// The links of one parent task by status.
struct ChildCounts {
  int64_t pending = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;

  int64_t total() const { return pending + completed + failed + cancelled; }
};

// A child run's terminal transition, written to the CHILD's store in the
// same transaction as the transition; the relay applies it to the parent's
// store and then deletes it.
struct ChildReport {
  int64_t report_id = 0;     // assigned by the backend, increasing
  std::string parent_store;  // empty: the child's own store
  TaskKey parent;
  int child_index = 0;
  RunId child_run_id;
  ChildStatus outcome = ChildStatus::kCompleted;  // not kPending
  std::optional<Json> output;
  std::string error;
  absl::Time created_at;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// A queue message as pgmq keeps it, with a priority.
struct MessageRecord {
  int64_t message_id = 0;
  int read_count = 0;
  absl::Time enqueued_at;
  absl::Time visible_at;
  int priority = 0;
  Json body;
  // Empty when every field decoded; else what did not, and why.
  std::string unreadable;
};

// The body of a task's message, as its parts. Every pgmq client reads it as
// {"flow_slug", "run_id", "step_slug", "task_index"} (ToJson); a backend
// renders it when it stores or returns the body, so that creating a task
// builds no JSON object. docs/decisions/0092.
struct TaskMessageBody {
  std::string flow_slug;
  RunId run_id;
  std::string step_slug;
  int task_index = 0;

  Json ToJson() const;
  std::string ToText() const;  // ToJson(), serialized
};

// A message to send: its body and when it becomes visible.
struct OutgoingMessage {
  Json body;  // null and unused when `task` is set
  absl::Time visible_at;
  int priority = 0;  // read order: higher first
  // A task's message gives its body as parts instead.
  std::optional<TaskMessageBody> task;

  // The body as JSON text, for a backend that stores text.
  std::string BodyText() const;
};

// A visibility change for one message.
struct VisibilityUpdate {
  int64_t message_id = 0;
  absl::Time visible_at;
  // Moves the message to the back of its priority's FIFO order (a retry);
  // otherwise it keeps its place (a release, a stall requeue).
  bool to_tail = false;
};

// The task outputs of one step, by task index (nullopt where a task has no
// output). `unreadable` names the first output that did not decode, whose
// entry is then nullopt.
struct StepOutputs {
  std::vector<std::optional<Json>> outputs;
  std::string unreadable;
};

// Appends `problem` to a record's `unreadable` text ("; " between problems).
void AddUnreadable(std::string& unreadable, std::string_view problem);

// The error a task, step or run gets when its stored data can't be read:
// "stored data unreadable: <what>".
std::string UnreadableError(std::string_view what);

// A registered worker.
// The steps of one flow a worker runs handlers for.
struct ServedSteps {
  std::string flow_slug;
  std::vector<std::string> steps;  // step slugs, in definition order

  friend bool operator==(const ServedSteps&, const ServedSteps&) = default;
};

struct WorkerRecord {
  std::string worker_id;
  std::string queue_name;
  std::string flow_slug;  // the first served flow (kept for listings)
  absl::Time started_at;
  absl::Time last_heartbeat_at;
  std::optional<absl::Time> stopped_at;
  // Every (flow, step) the worker serves on queue_name; empty in rows
  // written before this field existed.
  std::vector<ServedSteps> served;
};

}  // namespace sluice

#endif  // SLUICE_RECORDS_H_
