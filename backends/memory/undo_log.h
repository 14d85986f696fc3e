// The memory backend's undo log: how a dropped transaction takes back the
// changes it made in place.
//
// Every mutation of the store appends one small entry naming what changed;
// RollBack (memory_store.h) reverts the entries newest first, so each revert
// sees the store exactly as it was right after that change. Bulky old values
// (a task's previous fields, a taken report) do not go into the entry: they
// are moved, not copied, onto a side stack of their own type and popped in
// the same newest-first order. That keeps every entry a few words long and
// the common path free of allocations once the log's vectors have grown.
//
// Deleted rows are not saved at all: a deletion detaches them (see
// undo::RunDeleted), and the entry points at the row.
#ifndef SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_
#define SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "rows.h"
#include "sluice/ids.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice::memory {

class MessageQueue;

// The fields UpdateRuns writes, as they were before it.
struct SavedRunFields {
  RunStatus status = RunStatus::kStarted;
  std::optional<Json> output;
  std::string error;
  std::optional<absl::Time> finished_at;
  bool cancel_requested = false;
};

// The fields UpdateStepStates writes, as they were before it.
struct SavedStepFields {
  StepStatus status = StepStatus::kCreated;
  std::optional<int> initial_tasks;
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
  std::string worker_id;
  int budget_start = 0;
  bool cancel_requested = false;
  int64_t message_id = 0;
};

// A worker row as it was before an upsert or a deletion: `previous` is empty
// if the upsert created it.
struct SavedWorker {
  std::string worker_id;
  std::optional<WorkerRecord> previous;
};

// A flow row as it was before an update or a deletion.
struct SavedFlow {
  FlowRecord previous;
};

// An alias row as it was before a put: `previous` is empty if the put
// created it.
struct SavedAlias {
  std::string alias;
  std::optional<AliasRecord> previous;
};

// A dedupe entry as it was before a put or a deletion: `previous` is empty
// if the put created it.
struct SavedDedupe {
  std::string flow_slug;
  std::string key;
  std::optional<DedupeRecord> previous;
};

// A schedule row as it was before a put, a deletion or a cursor move:
// `previous` is empty if the put created it.
struct SavedSchedule {
  std::string group;
  std::string name;
  std::optional<ScheduleRecord> previous;
};

// A child link as it was before a change: `previous` is empty if the change
// created it.
struct SavedChildLink {
  std::pair<TaskKey, int> key;
  std::optional<ChildLinkRecord> previous;
};

// One entry per kind of change. An entry whose comment names a saved type
// has one value of that type on the side stack.
namespace undo {
struct FlowInserted {
  std::string slug;
};
struct QueueCreated {
  std::string name;
};
// The flow row was replaced or deleted; SavedFlow holds the old one.
struct FlowChanged {};   // SavedFlow
struct AliasChanged {};  // SavedAlias
// A queue dropped with its messages, detached (see RunDeleted): the catalog
// keeps the object until the transaction ends.
struct QueueDeleted {
  MessageQueue* queue = nullptr;
};
struct QueuePausedSet {
  MessageQueue* queue = nullptr;
  bool was_paused = false;
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
// Deletions detach rows: every index forgets them, but they stay where they
// are until the transaction ends. A rollback relinks them; committing frees
// them (CommitChanges in memory_store.h).
//
// The run, still holding its step states and its task listing; its tasks were
// detached just before it, each with an entry of its own.
struct RunDeleted {
  RunEntry* entry = nullptr;
};
struct StepStateInserted {
  RunId run_id;
  int step_index = 0;
};
struct StepStateUpdated {  // SavedStepFields
  RunId run_id;
  int step_index = 0;
};
// The counters as they were; remaining_tasks may have been unset.
struct StepCountersAdded {
  RunId run_id;
  int step_index = 0;
  std::optional<int> remaining_tasks;
  int remaining_deps = 0;
};
struct TaskInserted {
  TaskKey key;
};
struct TaskUpdated {  // SavedTaskFields
  TaskKey key;
};
// A detached task row (see RunDeleted).
struct TaskDeleted {
  TaskRow* row = nullptr;
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
// A move to the tail: the message's sequence number before it. Logged right
// after the visibility change of the same update.
struct MessageMovedToTail {
  MessageQueue* queue = nullptr;
  int64_t message_id = 0;
  int64_t seq = 0;
};
struct MessageArchived {
  MessageQueue* queue = nullptr;
  int64_t message_id = 0;
};
// A detached message, live or archived (see RunDeleted).
struct MessageDeleted {
  MessageQueue* queue = nullptr;
  QueuedMessage* row = nullptr;
};
// Reports from `first_id` up to the outbox's next id were appended.
struct ReportsAppended {
  int64_t first_id = 0;
};
struct ReportTaken {};  // OutboxReport
struct AttemptAppended {
  TaskKey task;
  int attempt = 0;
};
struct DedupeChanged {};     // SavedDedupe
struct ScheduleChanged {};   // SavedSchedule
struct ChildLinkChanged {};  // SavedChildLink
// Child reports from `first_id` up to the next id were appended.
struct ChildReportsAppended {
  int64_t first_id = 0;
};
struct ChildReportDeleted {};  // ChildReport
}  // namespace undo

using UndoEntry = std::variant<
    undo::FlowInserted, undo::FlowChanged, undo::AliasChanged,
    undo::QueueCreated, undo::QueueDeleted, undo::QueuePausedSet,
    undo::WorkerUpserted, undo::RunInserted, undo::RunUpdated,
    undo::RunRemainingStepsAdded, undo::RunDeleted, undo::StepStateInserted,
    undo::StepStateUpdated, undo::StepCountersAdded, undo::TaskInserted,
    undo::TaskUpdated, undo::TaskDeleted, undo::MessagesSent,
    undo::MessageVisibilityChanged, undo::MessageMovedToTail,
    undo::MessageArchived, undo::MessageDeleted, undo::ReportsAppended,
    undo::ReportTaken, undo::AttemptAppended, undo::DedupeChanged,
    undo::ScheduleChanged, undo::ChildLinkChanged, undo::ChildReportsAppended,
    undo::ChildReportDeleted>;
// Entries stay small: bulky old values go on the side stacks.
static_assert(sizeof(UndoEntry) <= 48);

// Not thread-safe: it belongs to the one open transaction.
class UndoLog {
 public:
  template <typename Entry>
  void Add(Entry entry) {
    entries_.emplace_back(std::move(entry));
  }
  // Adds the entry of a row a deletion detached, which CommitChanges frees.
  template <typename Entry>
  void AddDetached(Entry entry) {
    entries_.emplace_back(std::move(entry));
    ++detached_rows_;
  }
  // Adds an entry together with the old value its revert needs.
  template <typename Entry, typename Saved>
  void Add(Entry entry, Saved saved) {
    std::get<std::vector<Saved>>(saved_).push_back(std::move(saved));
    entries_.emplace_back(std::move(entry));
  }

  bool empty() const { return entries_.empty(); }
  // Every entry, oldest first.
  std::span<const UndoEntry> entries() const { return entries_; }
  // The number of AddDetached entries.
  size_t detached_rows() const { return detached_rows_; }
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

  // Forgets every change, destroying the saved values (CommitChanges frees
  // detached rows first). Keeps the vectors' capacity, so the next
  // transaction appends without allocating, unless a huge transaction grew
  // them past what is worth keeping.
  void Clear() {
    detached_rows_ = 0;
    ClearKeepingSmallCapacity(entries_);
    std::apply([](auto&... stack) { (ClearKeepingSmallCapacity(stack), ...); },
               saved_);
  }

 private:
  static constexpr size_t kMaxKeptBytes = size_t{4} << 20;

  template <typename T>
  static void ClearKeepingSmallCapacity(std::vector<T>& v) {
    if (v.capacity() * sizeof(T) > kMaxKeptBytes) {
      std::vector<T>().swap(v);
    } else {
      v.clear();
    }
  }

  std::vector<UndoEntry> entries_;
  size_t detached_rows_ = 0;
  std::tuple<std::vector<SavedRunFields>, std::vector<SavedStepFields>,
             std::vector<SavedTaskFields>, std::vector<SavedWorker>,
             std::vector<OutboxReport>, std::vector<SavedDedupe>,
             std::vector<SavedFlow>, std::vector<SavedAlias>,
             std::vector<SavedSchedule>, std::vector<SavedChildLink>,
             std::vector<ChildReport>>
      saved_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_UNDO_LOG_H_
