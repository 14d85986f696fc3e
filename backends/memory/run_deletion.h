// Deleting runs with everything that belongs to them, across the tables.
#ifndef SLUICE_BACKENDS_MEMORY_RUN_DELETION_H_
#define SLUICE_BACKENDS_MEMORY_RUN_DELETION_H_

#include <span>

#include "memory_store.h"
#include "sluice/ids.h"
#include "undo_log.h"

namespace sluice::memory {

// Deletes each run that exists with its step states, its tasks, their
// messages (live or archived) and the outbox reports of its tasks; skips ids
// that do not exist (or were deleted earlier in the list). Returns the number
// of runs deleted.
//
// Rows are detached, not destroyed (undo_log.h): a rollback relinks them as
// they were, and the commit frees them. That keeps deleting and rolling back
// free of copies, and a run keeps its task listing while detached.
int DeleteRuns(MemoryStore& store, std::span<const RunId> run_ids,
               UndoLog& undo);

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_RUN_DELETION_H_
