// The rows of the memory store's tables.
//
// A deletion leaves its rows in place until the transaction ends, and the
// undo log points at them, so these types are shared by the tables that own
// the rows and the log (undo_log.h).
#ifndef SLUICE_BACKENDS_MEMORY_ROWS_H_
#define SLUICE_BACKENDS_MEMORY_ROWS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "boost/intrusive/set_hook.hpp"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice::memory {

// One step of a run: its state, if inserted, and the run's tasks of that step
// by task index (rows owned by TaskTable).
struct StepEntry {
  int step_index = 0;
  std::optional<StepStateRecord> state;  // tasks may come without one
  absl::InlinedVector<const TaskRecord*, 1> tasks;
};

// A run and everything keyed by it, found with one hash probe (RunTable).
struct RunEntry {
  RunRecord run;
  uint64_t sequence = 0;                    // insert order, breaks ties
  absl::InlinedVector<StepEntry, 1> steps;  // by step index
  // The attempts ledger, by (step, task, attempt). Usually empty or short:
  // a vector costs one pointer-sized word when empty.
  std::vector<AttemptRecord> attempts;
};

// A task (TaskTable).
struct TaskRow {
  TaskRecord task;
  uint64_t run_sequence = 0;  // RunEntry::sequence of the task's run
};

// A message as its queue keeps it, live or archived, at a stable address in
// the queue's arena (MessageQueue). While live it is linked into exactly one
// of the queue's two intrusive indexes (visible or hidden) through
// `order_hook`, so indexing a message allocates nothing; an archived message
// is in neither.
struct QueuedMessage {
  // Auto-unlink: destroying a linked message takes it out of its index.
  using OrderHook = boost::intrusive::set_member_hook<
      boost::intrusive::link_mode<boost::intrusive::auto_unlink>>;

  int64_t id = 0;
  int read_count = 0;
  int priority = 0;  // claim order: higher first
  absl::Time enqueued_at;
  absl::Time visible_at;
  // Claim order within a priority: lower first. Given at send, increasing in
  // send order; a move to the tail gives a new one (MessageQueue).
  int64_t seq = 0;
  Json body;  // null when `task_body` holds it
  // A task's message body, kept as its parts until someone reads it.
  std::optional<TaskMessageBody> task_body;
  std::optional<absl::Time> archived_at;  // set once archived
  OrderHook order_hook;
};

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_ROWS_H_
