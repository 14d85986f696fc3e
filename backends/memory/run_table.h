// The memory backend's runs, their step states, and the per-run order of
// their tasks.
#ifndef SLUICE_BACKENDS_MEMORY_RUN_TABLE_H_
#define SLUICE_BACKENDS_MEMORY_RUN_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "row_arena.h"
#include "sluice/ids.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Everything keyed by run lives in one entry per run, found with one hash
// probe: the run record, its step states by step index, and per step the
// run's tasks by task index (rows owned by TaskTable). A step's tasks are
// normally created in index order, so keeping them sorted is an append.
//
// As with a foreign key, step states and tasks can only be added to a run
// that exists. Each run gets a sequence number when inserted; it breaks
// ties the way the SQLite backend does (its `seq` column): ListRuns lists
// newest first by started_at, then by descending sequence (the later insert
// is the newer run), and TaskTable orders stalled tasks by (stall_at, run
// sequence, step, task). Neither started_at nor the sequence changes after
// insert.
//
// Rolling back a run's insertion removes its entry: by then every step state
// and task added to it has been rolled back (rollback reverts newest first),
// and no newer entry is left, which is what RowArena needs.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class RunTable {
 public:
  // --- Runs ---------------------------------------------------------------

  // Stops at the first run whose id exists (kAlreadyExists); the caller rolls
  // back those inserted before it.
  absl::Status InsertRuns(std::span<const RunRecord> runs, UndoLog& undo);
  // nullptr if absent. Valid until the next change.
  const RunRecord* FindRun(const RunId& run_id) const;
  // Writes status, output, remaining_steps, error and finished_at.
  // kNotFound if the run does not exist.
  absl::Status UpdateRun(const RunRecord& run, UndoLog& undo);
  // kNotFound if the run does not exist.
  absl::StatusOr<int> AddRemainingSteps(const RunId& run_id, int delta,
                                        UndoLog& undo);
  // Runs of `flow_slug` (all flows if empty), newest first, at most `limit`.
  std::vector<RunRecord> ListRuns(std::string_view flow_slug, int limit) const;

  // --- Step states --------------------------------------------------------

  // Stops at the first state whose run does not exist (kNotFound) or whose
  // (run, step index) exists (kAlreadyExists).
  absl::Status InsertStepStates(std::span<const StepStateRecord> states,
                                UndoLog& undo);
  // All step states of a run, by step index.
  std::vector<StepStateRecord> GetStepStates(const RunId& run_id) const;
  // Writes the fields UpdateStepStates names (not remaining_deps). Stops at
  // the first state that does not exist (kNotFound).
  absl::Status UpdateStepStates(std::span<const StepStateRecord> states,
                                UndoLog& undo);
  // Adds `delta` to a counter and returns the new value; a remaining_tasks
  // not set yet counts as 0 (as SQL's coalesce would). kNotFound if the step
  // state does not exist.
  absl::StatusOr<int> AddStepCounter(const RunId& run_id, int step_index,
                                     StepCounter counter, int delta,
                                     UndoLog& undo);

  // --- The run's tasks, kept by TaskTable ---------------------------------

  // The run's sequence number, or nullopt if the run does not exist.
  std::optional<uint64_t> SequenceOf(const RunId& run_id) const;
  // Lists `task` under its run and step. REQUIRES: its run exists and its
  // key is not listed. TaskTable's own undo entry takes it out again.
  void AddTask(const TaskRecord& task);
  // REQUIRES: `task` is listed.
  void RemoveTask(const TaskRecord& task);
  // Calls visit(const TaskRecord&) for the run's tasks of steps first_step
  // through last_step, by step then task index.
  template <typename Visit>
  void ForEachTask(const RunId& run_id, int first_step, int last_step,
                   Visit visit) const;

  // --- Undo hooks, called newest change first ------------------------------

  void UndoInsertRun(const RunId& run_id);
  void UndoUpdateRun(const RunId& run_id, SavedRunFields saved);
  void UndoAddRemainingSteps(const RunId& run_id, int old_value);
  void UndoInsertStepState(const RunId& run_id, int step_index);
  void UndoUpdateStepState(const RunId& run_id, int step_index,
                           SavedStepFields saved);
  void UndoAddStepCounter(const RunId& run_id, int step_index,
                          StepCounter counter, std::optional<int> old_value);

 private:
  struct StepEntry {
    int step_index = 0;
    std::optional<StepStateRecord> state;  // tasks may come without one
    absl::InlinedVector<const TaskRecord*, 1> tasks;  // by task index
  };
  struct RunEntry {
    RunRecord run;
    uint64_t sequence = 0;
    absl::InlinedVector<StepEntry, 1> steps;  // by step index
  };
  struct ListKey {
    absl::Time started_at;
    uint64_t sequence = 0;
    RunId run_id;
  };
  struct NewestFirst {
    bool operator()(const ListKey& a, const ListKey& b) const {
      return std::tie(b.started_at, b.sequence) <
             std::tie(a.started_at, a.sequence);
    }
  };
  using ListIndex = absl::btree_set<ListKey, NewestFirst>;

  RunEntry* FindEntry(const RunId& run_id);
  const RunEntry* FindEntry(const RunId& run_id) const;
  static StepEntry* FindStep(RunEntry& entry, int step_index);
  static StepEntry& FindOrAddStep(RunEntry& entry, int step_index);
  // Removes the step entry if it holds neither a state nor tasks.
  static void DropStepIfEmpty(RunEntry& entry, int step_index);
  StepStateRecord* FindStepState(const RunId& run_id, int step_index);

  RowArena<RunEntry> entries_;
  absl::flat_hash_map<RunId, RunEntry*> by_id_;
  absl::flat_hash_map<std::string, ListIndex> by_flow_;
  uint64_t next_sequence_ = 1;
};

template <typename Visit>
void RunTable::ForEachTask(const RunId& run_id, int first_step, int last_step,
                           Visit visit) const {
  const RunEntry* entry = FindEntry(run_id);
  if (entry == nullptr) return;
  auto step = std::lower_bound(
      entry->steps.begin(), entry->steps.end(), first_step,
      [](const StepEntry& s, int index) { return s.step_index < index; });
  for (; step != entry->steps.end() && step->step_index <= last_step; ++step) {
    for (const TaskRecord* task : step->tasks) visit(*task);
  }
}

}  // namespace sluice::memory

#endif  // SLUICE_BACKENDS_MEMORY_RUN_TABLE_H_
