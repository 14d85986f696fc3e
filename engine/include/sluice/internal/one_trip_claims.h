// An optional capability of a Transaction: a claim's reads, and its updates
// with the commit, each in one call, so that a backend whose calls are round
// trips to a server sends each pair in one trip; or the whole of a claim
// that needs no decision of the engine's, in one call (ClaimAndCommit).
//
// The engine finds it with dynamic_cast and falls back to the separate
// Transaction calls where a transaction lacks it, so the backend interface
// (backend.h) is unchanged. A forwarding wrapper
// (forwarding_backend.h) does not offer it: its overrides of ReadMessages,
// GetTasksByMessage, UpdateTasks and Commit then see every call.
#ifndef SLUICE_INTERNAL_ONE_TRIP_CLAIMS_H_
#define SLUICE_INTERNAL_ONE_TRIP_CLAIMS_H_

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::internal {

// A claim's read: the messages taken, and each one's task (nullopt where
// none exists), tasks[i] belonging to messages[i].
struct MessagesWithTasks {
  std::vector<MessageRecord> messages;
  std::vector<std::optional<TaskRecord>> tasks;
};

// A served step of the claimed queue whose queued tasks a claim may take
// on the server: its lease's times for a claim at the claim's `now`
// (lease.h ComputeLease of the step's timeout).
struct ClaimableStep {
  std::string_view flow_slug;
  int step_index = 0;
  absl::Time stall_at;
  absl::Time visible_until;
};

// ClaimAndCommit's request.
struct ServerClaim {
  std::string_view queue;
  absl::Time now;
  int limit = 0;
  std::string_view worker_id;
  std::span<const ClaimableStep> steps;
  // Where a message of a task another transaction holds is hidden until.
  absl::Time lost_visible_until;
  // Also NextVisibleAt(queue, now), read before the commit.
  bool read_next_visible = false;
};

// ClaimAndCommit's outcome.
struct ServerClaimed {
  // False if some message read was not a plain claim; then nothing was
  // written and the rest is empty.
  bool plain = true;
  std::vector<int64_t> message_ids;  // in claim order
  std::vector<TaskRecord> tasks;     // tasks[i] of message_ids[i], as read
  std::vector<bool> claimed;         // whether tasks[i]'s claim applied
  std::optional<absl::Time> next_visible_at;
};

class OneTripClaims {
 public:
  // ReadMessages(queue, now, limit, visible_until, kNoPayloads), then
  // GetTasksByMessage(queue, the ids read, task_fields): the same effects
  // and results as those two calls.
  virtual absl::StatusOr<MessagesWithTasks> ReadMessagesWithTasks(
      std::string_view queue, absl::Time now, int limit,
      absl::Time visible_until, Fields task_fields) = 0;
  // UpdateTasks(updates), then Commit(): the same effects, results and
  // failures. The transaction is done after it, as after Commit(), or
  // unusable if it failed (dropping it rolls back).
  virtual absl::StatusOr<std::vector<bool>> UpdateTasksAndCommit(
      std::span<TaskUpdate> updates) = 0;
  // A whole claim, then Commit(), as one call. It reads up to `limit`
  // visible messages of the queue, as ReadMessages would, with each one's
  // task. The read is plain if every message has a task on the queue, of
  // one of `steps`, queued, whose options override no timeout. If it is
  // not, nothing is written. If it is, each task is claimed as
  // UpdateTasks would with skip_if_locked: started, attempts + 1,
  // started_at `now`, its step's stall_at, `worker_id`, no finished_at,
  // output or cancel request, the rest kept. Its message, read once more,
  // stays hidden until its step's visible_until, or until
  // lost_visible_until if another transaction held or changed the task.
  // The transaction is over after it, as after Commit().
  virtual absl::StatusOr<ServerClaimed> ClaimAndCommit(
      const ServerClaim& claim) = 0;

 protected:
  ~OneTripClaims() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_CLAIMS_H_
