// How a worker stores its handlers' results so that one result the backend
// refuses never holds up the others (docs/decisions/0013).
#ifndef SLUICE_ENGINE_RESULT_RECORDER_H_
#define SLUICE_ENGINE_RESULT_RECORDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "sluice/engine.h"
#include "sluice/records.h"

namespace sluice {

// True for errors after which the same call may succeed later: the backend
// is unreachable (kUnavailable), lost a race (kAborted), ran out of time
// (kDeadlineExceeded) or of room (kResourceExhausted). Any other error means
// the backend refuses the call itself, and repeating it unchanged would fail
// forever.
bool IsTransientError(const absl::Status& status);

// "task (run R, step S, task T)": names a task without its payloads.
std::string DescribeTask(const TaskKey& key);

// What became of a batch of results.
struct RecordedResults {
  struct Recorded {
    TaskKey key;
    int attempt = 1;
    ResultDisposition disposition = ResultDisposition::kStale;
    // The backend refused the handler's result, so a non-retryable failure
    // naming the refusal was stored in its place.
    bool replaced = false;
  };
  std::vector<Recorded> recorded;
  // Not stored because of a transient error: store them again later.
  std::vector<TaskResult> retry;
  absl::Status transient_error;  // the last such error
  // Refused even as a failure: their leases must lapse so that stall
  // recovery takes the tasks back.
  std::vector<TaskResult> dropped;
};

// Stores `results` with Engine::FinishTasks and applies the reports that
// wrote. If the backend refuses the whole batch with a non-transient error,
// stores the results one at a time so the refused one is isolated; a result
// refused on its own is replaced by a non-retryable failure (the task fails
// with an error naming the refusal) and the others are stored as they are.
// An older attempt of a task whose newer attempt is also in `results` is
// noted stale and not stored. Logs what it could not store as coming from
// `worker_id`.
RecordedResults RecordResults(Engine& engine, std::vector<TaskResult> results,
                              std::string_view worker_id);

}  // namespace sluice

#endif  // SLUICE_ENGINE_RESULT_RECORDER_H_
