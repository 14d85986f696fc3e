// The memory backend's tasks and the indexes the Transaction's task reads
// need.
#ifndef SLUICE_BACKENDS_MEMORY_TASK_TABLE_H_
#define SLUICE_BACKENDS_MEMORY_TASK_TABLE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "row_arena.h"
#include "rows.h"
#include "run_table.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Task rows at stable addresses, plus indexes kept in step with every change:
// - by key, and by message (queue name -> message id), both to the row;
// - stalled: every started task that has a stall_at, by (stall_at, run
//   sequence, step, task), the SQLite backend's order;
// - per run, in `runs` (RunTable::AddTask), for the run-ordered listings.
// The listings cost O(tasks listed); everything else is O(1) or O(log n) per
// task.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class TaskTable {
 public:
  // `runs` must outlive the table.
  explicit TaskTable(RunTable& runs) : runs_(runs) {}
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;

  // Moves from `tasks`. Stops at the first task whose run does not exist
  // (kNotFound) or whose key or (queue_name, message_id) exists
  // (kAlreadyExists); the caller rolls back those inserted before it.
  absl::Status Insert(std::span<TaskRecord> tasks, UndoLog& undo);
  std::vector<std::optional<TaskRecord>> Get(std::span<const TaskKey> keys,
                                             Fields fields) const;
  std::vector<std::optional<TaskRecord>> GetByMessage(
      std::string_view queue, std::span<const int64_t> message_ids,
      Fields fields) const;
  // Compare-and-set on (status, attempts), applied in order; a missing task
  // does not apply. Moves the fields it writes from `updates`.
  std::vector<bool> Update(std::span<TaskUpdate> updates, UndoLog& undo);
  // Queued and started tasks of a run (of one step if set), by step then
  // task index.
  std::vector<TaskRecord> GetUnfinished(const RunId& run_id,
                                        std::optional<int> step_index,
                                        Fields fields) const;
  std::vector<TaskRecord> List(const RunId& run_id) const;
  // Per step, one entry per task of the step, by task index.
  std::vector<StepOutputs> GetOutputs(std::span<const StepRef> steps) const;
  // Calls visit(const TaskRecord&) for every task whose message is in
  // `queue`, in no particular order.
  template <typename Visit>
  void ForEachTaskOfQueue(std::string_view queue, Visit visit) const;
  // The task whose message is (queue, message_id); null if none.
  const TaskRecord* OfMessage(std::string_view queue, int64_t message_id) const;
  // Started tasks with stall_at < now, earliest first, at most `limit`.
  std::vector<TaskRecord> FindStalled(absl::Time now, int limit,
                                      Fields fields) const;
  // Deletes the tasks of a run that is being deleted (not their messages):
  // detaches their rows (undo_log.h). They stay listed under their run,
  // whose deletion (RunTable::DeleteRun) must follow. REQUIRES: `tasks` are
  // all of one run's tasks.
  void DeleteTasksOfRun(std::span<const TaskRecord* const> tasks,
                        UndoLog& undo);
  // Frees a row DeleteTasksOfRun detached (on commit).
  void FreeDetached(TaskRow& row) { rows_.Erase(row); }

  // Reverts, newest change first.
  void UndoInsert(const TaskKey& key);
  void UndoUpdate(const TaskKey& key, SavedTaskFields saved);
  void UndoDelete(TaskRow& row);

 private:
  using MessageIndex = absl::flat_hash_map<int64_t, TaskRow*>;
  using StallKey = std::tuple<absl::Time, uint64_t, int, int>;

  static TaskRecord CopyOf(const TaskRecord& task, Fields fields);
  // Removes a row from every index.
  void Unindex(const TaskRow& row);
  void IndexStall(TaskRow& row);
  void UnindexStall(const TaskRow& row);
  void ReindexMessage(TaskRow& row, int64_t old_message);

  RunTable& runs_;
  RowArena<TaskRow> rows_;
  absl::flat_hash_map<TaskKey, TaskRow*> by_key_;
  absl::flat_hash_map<std::string, MessageIndex> by_message_;
  absl::btree_map<StallKey, TaskRow*> stalled_;
};

template <typename Visit>
void TaskTable::ForEachTaskOfQueue(std::string_view queue, Visit visit) const {
  auto queue_it = by_message_.find(ToAbsl(queue));
  if (queue_it == by_message_.end()) return;
  for (const auto& [message_id, row] : queue_it->second) visit(row->task);
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_TASK_TABLE_H_
