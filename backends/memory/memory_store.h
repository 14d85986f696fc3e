// Everything the memory backend stores, and how a transaction's changes are
// made final or taken back.
#ifndef SLUICE_BACKENDS_MEMORY_MEMORY_STORE_H_
#define SLUICE_BACKENDS_MEMORY_MEMORY_STORE_H_

#include "catalog.h"
#include "child_tables.h"
#include "dedupe_registry.h"
#include "outbox.h"
#include "run_table.h"
#include "task_table.h"
#include "undo_log.h"

namespace sluice::memory {

// The tables. Not thread-safe: MemoryBackend::State's lock guards it.
struct MemoryStore {
  Catalog catalog;
  RunTable runs;  // runs and step states
  TaskTable tasks{runs};
  Outbox outbox;
  DedupeRegistry dedupe;
  ChildTables children;  // fan-out links and child reports
};

// Makes the changes in `undo` final: frees the rows its deletions detached,
// then leaves it empty.
void CommitChanges(MemoryStore& store, UndoLog& undo);

// Reverts every change in `undo`, newest first, and leaves it empty. Afterwards
// `store` is exactly as it was when `undo` was last empty.
void RollBack(MemoryStore& store, UndoLog& undo);

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_MEMORY_STORE_H_
