// The memory backend's small registries: flows, queues and workers.
#ifndef SLUICE_BACKENDS_MEMORY_CATALOG_H_
#define SLUICE_BACKENDS_MEMORY_CATALOG_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "message_queue.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Flows and workers are listed in slug / id order. Queues are owned here, one
// heap object each, so undo entries and callers may hold a MessageQueue*
// across inserts; a queue is only destroyed by rolling back its creation,
// which happens after every entry that points at it has been reverted.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class Catalog {
 public:
  const FlowRecord* FindFlow(std::string_view slug) const;
  // kAlreadyExists if a flow with this slug exists.
  absl::Status InsertFlow(const FlowRecord& flow, UndoLog& undo);
  std::vector<FlowRecord> ListFlows() const;

  // nullptr if no such queue. In memory every queue is registered: the
  // registry entry and the physical queue are one object.
  MessageQueue* FindQueue(std::string_view name);
  const MessageQueue* FindQueue(std::string_view name) const;
  // kAlreadyExists if the queue exists.
  absl::Status CreateQueue(const QueueRecord& queue, UndoLog& undo);
  // Every queue's registry entry, by name.
  std::vector<QueueRecord> ListQueues() const;

  // Inserts or replaces the whole record.
  void UpsertWorker(const WorkerRecord& worker, UndoLog& undo);
  std::vector<WorkerRecord> ListWorkers() const;
  // See Transaction::DeleteInactiveWorkers.
  int DeleteInactiveWorkers(absl::Time inactive_before, int limit,
                            UndoLog& undo);

  // Reverts, newest change first.
  void UndoInsertFlow(const std::string& slug);
  void UndoCreateQueue(const std::string& name);
  void UndoUpsertWorker(SavedWorker saved);

 private:
  absl::btree_map<std::string, FlowRecord, std::less<>> flows_;
  absl::flat_hash_map<std::string, std::unique_ptr<MessageQueue>> queues_;
  absl::btree_map<std::string, WorkerRecord, std::less<>> workers_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_CATALOG_H_
