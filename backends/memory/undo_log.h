// The memory backend's undo log: how a dropped transaction takes back the
// changes it made in place.
//
// Every mutation of the store appends one small entry naming what changed;
// RollBack (memory_store.h) reverts the entries newest first, so each revert
// sees the store exactly as it was right after that change. Bulky old values
// (a task's previous fields, a taken report) do not go into the entry: they
// are moved, not copied, onto a side stack of their own type and popped in the
// same newest-first order. That keeps every entry a few words long and the
// common path free of allocations once the log's vectors have grown.
#ifndef SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_
#define SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "sluice/ids.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice::memory {

class MessageQueue;

// The fields UpdateRun writes, as they were before it.
struct SavedRunFields {
  RunStatus status = RunStatus::kStarted;
  std::optional<Json> output;
  int remaining_steps = 0;
  std::string error;
  std::optional<absl::Time> finished_at;
};

// The fields UpdateStepStates writes, as they were before it.
struct SavedStepFields {
  StepStatus status = StepStatus::kCreated;
  std::optional<int> initial_tasks;
  std::optional<int> remaining_tasks;
  std::optional<Json> output;
  std::string error;
  SkipReason skip_reason = SkipReason::kNone;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> finished_at;
};

// The fields UpdateTasks writes (TaskUpdate), as they were before it.
struct SavedTaskFields {
  TaskStatus status = TaskStatus::kQueued;
  int attempts = 0;
  std::optional<Json> output;
  std::string error;
  std::optional<absl::Time> started_at;
  std::optional<absl::Time> finished_at;
  std::optional<absl::Time> stall_at;
  int requeued_count = 0;
  // Unset if the update kept it: a task usually completes on the worker that
  // claimed it, and not copying the id saves an allocation.
  std::optional<std::string> worker_id;
};

// A worker row as it was before an upsert: `previous` is empty if the upsert
// created it.
struct SavedWorker {
  std::string worker_id;
  std::optional<WorkerRecord> previous;
};

enum class StepCounter { kRemainingTasks, kRemainingDeps };

// One entry per kind of change. An entry whose comment names a saved type
// has one value of that type on the side stack.
namespace undo {
struct FlowInserted {
  std::string slug;
};
struct QueueCreated {
  std::string name;
};
struct WorkerUpserted {};  // SavedWorker
struct RunInserted {
  RunId run_id;
};
struct RunUpdated {  // SavedRunFields
  RunId run_id;
};
struct RunRemainingStepsAdded {
  RunId run_id;
  int old_value = 0;
};
struct StepStateInserted {
  RunId run_id;
  int step_index = 0;
};
struct StepStateUpdated {  // SavedStepFields
  RunId run_id;
  int step_index = 0;
};
struct StepCounterAdded {
  RunId run_id;
  int step_index = 0;
  StepCounter counter = StepCounter::kRemainingTasks;
  std::optional<int> old_value;  // remaining_tasks may have been unset
};
struct TaskInserted {
  TaskKey key;
};
struct TaskUpdated {  // SavedTaskFields
  TaskKey key;
};
// Messages from `first_id` up to the queue's next id were sent.
struct MessagesSent {
  MessageQueue* queue = nullptr;
  int64_t first_id = 0;
};
// A read or a visibility change; these were the message's values before.
struct MessageVisibilityChanged {
  MessageQueue* queue = nullptr;
  int64_t message_id = 0;
  absl::Time visible_at;
  int read_count = 0;
};
struct MessageArchived {
  MessageQueue* queue = nullptr;
  int64_t message_id = 0;
};
// Reports from `first_id` up to the outbox's next id were appended.
struct ReportsAppended {
  int64_t first_id = 0;
};
struct ReportTaken {};  // OutboxReport
}  // namespace undo

using UndoEntry =
    std::variant<undo::FlowInserted, undo::QueueCreated, undo::WorkerUpserted,
                 undo::RunInserted, undo::RunUpdated,
                 undo::RunRemainingStepsAdded, undo::StepStateInserted,
                 undo::StepStateUpdated, undo::StepCounterAdded,
                 undo::TaskInserted, undo::TaskUpdated, undo::MessagesSent,
                 undo::MessageVisibilityChanged, undo::MessageArchived,
                 undo::ReportsAppended, undo::ReportTaken>;

// Not thread-safe: it belongs to the one open transaction.
class UndoLog {
 public:
  template <typename Entry>
  void Add(Entry entry) {
    entries_.emplace_back(std::move(entry));
  }
  // Adds an entry together with the old value its revert needs.
  template <typename Entry, typename Saved>
  void Add(Entry entry, Saved saved) {
    std::get<std::vector<Saved>>(saved_).push_back(std::move(saved));
    entries_.emplace_back(std::move(entry));
  }

  bool empty() const { return entries_.empty(); }
  UndoEntry& newest() { return entries_.back(); }
  void PopNewest() { entries_.pop_back(); }

  // Removes and returns the newest saved value of type `Saved`.
  // REQUIRES: the newest entry is the one that saved it.
  template <typename Saved>
  Saved TakeSaved() {
    std::vector<Saved>& stack = std::get<std::vector<Saved>>(saved_);
    Saved saved = std::move(stack.back());
    stack.pop_back();
    return saved;
  }

  // Forgets every change (on commit). Keeps the vectors' capacity, so the
  // next transaction appends without allocating, unless a huge transaction
  // grew them past what is worth keeping.
  void Clear() {
    ClearKeepingSmallCapacity(entries_);
    std::apply([](auto&... stack) { (ClearKeepingSmallCapacity(stack), ...); },
               saved_);
  }

 private:
  static constexpr size_t kMaxKeptCapacity = 1 << 16;

  template <typename T>
  static void ClearKeepingSmallCapacity(std::vector<T>& v) {
    if (v.capacity() > kMaxKeptCapacity) {
      std::vector<T>().swap(v);
    } else {
      v.clear();
    }
  }

  std::vector<UndoEntry> entries_;
  std::tuple<std::vector<SavedRunFields>, std::vector<SavedStepFields>,
             std::vector<SavedTaskFields>, std::vector<SavedWorker>,
             std::vector<OutboxReport>>
      saved_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_
