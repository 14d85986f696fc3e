// An optional capability of a Transaction: a claim's reads, and its updates
// with the commit, each in one call, so that a backend whose calls are round
// trips to a server sends each pair in one trip.
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

 protected:
  ~OneTripClaims() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_CLAIMS_H_
