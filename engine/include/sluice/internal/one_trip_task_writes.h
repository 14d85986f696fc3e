// An optional capability of a Transaction: new tasks and their messages in
// one call, so that a backend whose calls are round trips to a server sends
// them in one statement it needn't wait for (a transaction that starts a
// run then costs one trip fewer).
//
// The engine finds it with dynamic_cast and falls back to SendMessages then
// InsertTasks where a transaction lacks it, as for one_trip_claims.h.
#ifndef SLUICE_INTERNAL_ONE_TRIP_TASK_WRITES_H_
#define SLUICE_INTERNAL_ONE_TRIP_TASK_WRITES_H_

#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::internal {

class OneTripTaskWrites {
 public:
  // SendMessages(queue, messages, now), then InsertTasks(tasks) with
  // tasks[i].message_id set to messages[i]'s id: the same effects and
  // failures, except that the ids are not returned and a failure may
  // surface only at a later call or at Commit() (as InsertTasks's may).
  // `messages` and `tasks` have the same size; every task is on `queue`.
  virtual absl::Status SendMessagesAndInsertTasks(
      std::string_view queue, std::span<OutgoingMessage> messages,
      std::span<TaskRecord> tasks, absl::Time now) = 0;

 protected:
  ~OneTripTaskWrites() = default;
};

}  // namespace sluice::internal

#endif  // SLUICE_INTERNAL_ONE_TRIP_TASK_WRITES_H_
