#include "run_deletion.h"

#include <limits>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "message_queue.h"

namespace sluice::memory {
namespace {

// Deletes the tasks of one run and their messages.
void DeleteTasksOf(MemoryStore& store, const RunId& run_id,
                   std::vector<const TaskRecord*>& tasks, UndoLog& undo) {
  tasks.clear();
  store.runs.ForEachTask(
      run_id, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
      [&](const TaskRecord& task) { tasks.push_back(&task); });
  // A run's tasks usually share a queue: look it up once.
  MessageQueue* queue = nullptr;
  std::string_view queue_name;
  for (const TaskRecord* task : tasks) {
    if (queue == nullptr || queue_name != task->queue_name) {
      queue = store.catalog.FindQueue(task->queue_name);
      queue_name = queue == nullptr ? std::string_view() : queue->record().name;
    }
    if (queue != nullptr) queue->Delete(task->message_id, undo);
  }
  store.tasks.DeleteTasksOfRun(tasks, undo);
}

}  // namespace

int DeleteRuns(MemoryStore& store, std::span<const RunId> run_ids,
               UndoLog& undo) {
  absl::flat_hash_set<RunId> deleted;
  deleted.reserve(run_ids.size());
  std::vector<const TaskRecord*> tasks;
  for (const RunId& run_id : run_ids) {
    if (!store.runs.Contains(run_id)) continue;
    DeleteTasksOf(store, run_id, tasks, undo);
    store.runs.DeleteRun(run_id, undo);
    deleted.insert(run_id);
  }
  if (!deleted.empty()) {
    store.outbox.DeleteReportsOf(deleted, undo);
    store.children.DeleteLinksOf(deleted, undo);
  }
  return static_cast<int>(deleted.size());
}

}  // namespace sluice::memory
