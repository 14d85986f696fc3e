// The memory backend's small registries: flows, aliases, queues and workers.
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
  // False if no such flow.
  bool DeleteFlow(std::string_view slug, UndoLog& undo);
  // Replaces the stored flow's definition and generation; kNotFound if
  // absent.
  absl::Status UpdateFlow(const FlowRecord& flow, UndoLog& undo);

  const AliasRecord* FindAlias(std::string_view alias) const;
  // Inserts or replaces.
  void PutAlias(const AliasRecord& alias, UndoLog& undo);
  // By alias.
  std::vector<AliasRecord> ListAliases() const;

  // nullptr if no such queue. In memory every queue is registered: the
  // registry entry and the physical queue are one object.
  MessageQueue* FindQueue(std::string_view name);
  const MessageQueue* FindQueue(std::string_view name) const;
  // kAlreadyExists if the queue exists.
  absl::Status CreateQueue(const QueueRecord& queue, UndoLog& undo);
  // Every queue's registry entry, by name.
  std::vector<QueueRecord> ListQueues() const;
  // Drops the queue with all its messages; false if no such queue. The
  // object is detached, not destroyed, until the transaction ends, so undo
  // entries that point at it stay valid.
  bool DeleteQueue(std::string_view name, UndoLog& undo);
  // Destroys a queue DeleteQueue detached (on commit).
  void FreeDetachedQueue(MessageQueue* queue);

  // Inserts or replaces the whole record.
  void UpsertWorker(const WorkerRecord& worker, UndoLog& undo);
  std::vector<WorkerRecord> ListWorkers() const;
  // See Transaction::DeleteInactiveWorkers.
  int DeleteInactiveWorkers(absl::Time inactive_before, int limit,
                            UndoLog& undo);

  // Reverts, newest change first.
  void UndoInsertFlow(const std::string& slug);
  void UndoChangeFlow(SavedFlow saved);
  void UndoPutAlias(SavedAlias saved);
  void UndoCreateQueue(const std::string& name);
  void UndoDeleteQueue(MessageQueue* queue);
  void UndoUpsertWorker(SavedWorker saved);

 private:
  absl::btree_map<std::string, FlowRecord, std::less<>> flows_;
  absl::btree_map<std::string, AliasRecord, std::less<>> aliases_;
  absl::flat_hash_map<std::string, std::unique_ptr<MessageQueue>> queues_;
  // Queues deleted by the open transaction (DeleteQueue), by address.
  absl::flat_hash_map<MessageQueue*, std::unique_ptr<MessageQueue>>
      detached_queues_;
  absl::btree_map<std::string, WorkerRecord, std::less<>> workers_;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_CATALOG_H_
