// The values Transaction's calls take and return, besides the records of
// sluice/records.h: lock modes, field choices, conditional task writes,
// counter moves and queries. Included by sluice/backend.h.
#ifndef SLUICE_BACKEND_TYPES_H_
#define SLUICE_BACKEND_TYPES_H_

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice {

// kSkipLocked locks like kForUpdate but never waits: a row another
// transaction holds comes back as nullopt, as if it did not exist. A backend
// whose transactions run one at a time treats both as kForUpdate.
enum class LockMode { kNone, kForUpdate, kSkipLocked };

// For Transaction::InsertRuns: kInvalidArgument unless `inputs` is empty or
// has one entry per run.
inline absl::Status CheckRunInputs(size_t runs, size_t inputs) {
  if (inputs == 0 || inputs == runs) return absl::OkStatus();
  return absl::InvalidArgumentError("InsertRuns got " + std::to_string(inputs) +
                                    " inputs for " + std::to_string(runs) +
                                    " runs; pass none, or one per run");
}
// The input Transaction::InsertRuns stores for `run`, the `i`th.
inline const Json& RunInputToStore(const RunRecord& run,
                                   std::span<const Json* const> inputs,
                                   size_t i) {
  return i < inputs.size() && inputs[i] != nullptr ? *inputs[i] : run.input;
}

// Which JSON a read fills. kNoPayloads leaves run input and output, step
// outputs, task input and output, and message bodies empty, for paths that
// only need state; it must not even parse them.
enum class Fields { kAll, kNoPayloads };

// Which of QueueCounts' fields CountTasks counts.
enum class TaskCounts {
  // Every field: reads every task of the queue, ended ones included.
  kAll,
  // waiting, delayed, active and oldest_waiting_since; the rest stay 0. Reads
  // only the queue's messages and their tasks, so its cost follows the
  // backlog, not the history the store keeps (decision 0075).
  kInFlight,
};

// A conditional task write: applied only if the stored task still has
// `expected_status` and `expected_attempts`, and `expected_cancel_requested`
// when set (compare-and-set). It writes the
// mutable fields: status, attempts, output, error, started_at, finished_at,
// stall_at, requeued_count, worker_id, budget_start, cancel_requested and
// message_id (so a task read with kNoPayloads and written back loses its
// output). message_id changes only when RetryRun gives an ended task a new
// message. Input, options, queue_name and queued_at never change after
// creation.
struct TaskUpdate {
  TaskRecord task;
  TaskStatus expected_status = TaskStatus::kQueued;
  int expected_attempts = 0;
  // When set, the update does not wait for a task row another transaction
  // holds: it reports "not applied" instead. Claims set it, since a claim
  // holds message locks and must never wait on a task lock (see the lock
  // order in docs/decisions/0011-postgres-backend.md).
  bool skip_if_locked = false;
  // When set, the stored task's cancel_requested must equal it too (interface
  // v8). A heartbeat sets it: it writes back the flag it read without a lock,
  // and must not clear a cancel request that arrived in between.
  std::optional<bool> expected_cancel_requested;
};

// Names one step of one run.
struct StepRef {
  RunId run_id;
  int step_index = 0;
};

// Counter moves (add-and-return).
struct StepCounterDelta {
  StepRef step;
  int remaining_tasks = 0;  // added to remaining_tasks (unset counts as 0)
  int remaining_deps = 0;   // added to remaining_deps
};
struct StepCounters {
  int remaining_tasks = 0;
  int remaining_deps = 0;
};
struct RunCounterDelta {
  RunId run_id;
  int remaining_steps = 0;
};

// Which tasks FindStalledTasks returns: started tasks whose stall_at is
// before `now`, at most `limit`.
struct StalledQuery {
  absl::Time now;
  // The engine's promise about those tasks' messages (its lease rule,
  // docs/decisions/0064): each is still in its queue, has been read at least
  // once, and is visible at this time at the latest. A backend may find the
  // tasks through their messages instead of indexing tasks by stall_at.
  absl::Time messages_visible_by;
  int limit = 0;
};

// Which runs ListRuns returns. Every filter set must hold (AND).
struct RunQuery {
  std::vector<std::string> flow_slugs;  // any of these; empty: every flow
  std::vector<RunStatus> statuses;      // any of these; empty: every status
  // A JSON object each run's metadata must contain (every key, equal
  // values: JSON containment as in conditions); null: no filter.
  Json metadata;
  // The ordering column: started_at, or finished_at (runs not finished are
  // then left out). Ties break by run id in the same direction.
  enum class OrderBy { kStartedAt, kFinishedAt };
  OrderBy order_by = OrderBy::kStartedAt;
  bool newest_first = true;
  // Only runs whose ordering time is in [from, to).
  std::optional<absl::Time> from;
  std::optional<absl::Time> to;
  // Resume after this (time, run id) in the walk direction (exclusive).
  struct Position {
    absl::Time time;
    RunId run_id;
  };
  std::optional<Position> after;
  int limit = 50;

  // Runs of one flow (every flow if empty), newest first.
  static RunQuery OfFlow(std::string_view flow_slug, int limit) {
    RunQuery query;
    if (!flow_slug.empty()) query.flow_slugs.emplace_back(flow_slug);
    query.limit = limit;
    return query;
  }
};

// Where a message is.
struct MessageLocation {
  bool archived = false;
  std::optional<absl::Time> archived_at;
  MessageRecord message;
};

// What a backend that does not offer fan-out returns from its methods.
inline absl::Status FanOutUnimplemented() {
  return absl::UnimplementedError("this backend does not offer fan-out yet");
}

namespace internal {

// For records written with their counters (UpdateRunsAndCounters,
// UpdateStepStatesAndCounters): kInvalidArgument, naming `operation`,
// unless each record has its delta.
inline absl::Status CheckOneDeltaPerRecord(size_t records, size_t deltas,
                                           std::string_view operation) {
  if (records == deltas) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(operation, ": ", records,
                                           " records but ", deltas,
                                           " counter deltas; nothing changed"));
}

}  // namespace internal

}  // namespace sluice

#endif  // SLUICE_BACKEND_TYPES_H_
