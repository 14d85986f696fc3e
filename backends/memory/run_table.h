// The memory backend's runs, their step states, and the per-run order of
// their tasks.
#ifndef SLUICE_BACKENDS_MEMORY_RUN_TABLE_H_
#define SLUICE_BACKENDS_MEMORY_RUN_TABLE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "row_arena.h"
#include "rows.h"
#include "sluice/backend.h"
#include "sluice/ids.h"
#include "sluice/records.h"
#include "undo_log.h"

namespace sluice::memory {

// Everything keyed by run lives in one RunEntry per run, found with one hash
// probe: the run record, its step states by step index, and per step the
// run's tasks by task index (rows owned by TaskTable). A step's tasks are
// normally created in index order, so keeping them sorted is an append.
//
// As with a foreign key, step states, tasks and ledger entries can only be
// added to a run that exists, and a run is deleted right after its tasks
// (DeleteRun); its ledger goes with its entry. Each run gets a sequence
// number when inserted; it breaks ties the way the SQLite backend does (its
// `seq` column): FindFinishedRuns lists earliest first by finished_at, then
// by sequence; and TaskTable orders stalled tasks by (stall_at, run
// sequence, step, task). ListRuns breaks ties by run id, as the interface
// says: per flow, runs are indexed by (started_at, run id) and ended runs by
// (finished_at, run id), and a listing merges the indexes of the flows it
// asks for (run_table_list.cc). Neither started_at nor the sequence changes
// after insert.
//
// External keys are unique per flow: an index maps (flow, key) to the run.
//
// Every change records its undo in the given UndoLog. Not thread-safe: the
// store's lock guards it.
class RunTable {
 public:
  // --- Runs ---------------------------------------------------------------

  // Moves from `runs`. Stops at the first run whose id, or whose non-empty
  // (flow_slug, external_key), exists (kAlreadyExists); the caller rolls
  // back those inserted before it.
  absl::Status InsertRuns(std::span<RunRecord> runs,
                          std::span<const Json* const> inputs, UndoLog& undo);
  // One entry per id, in order.
  std::vector<std::optional<RunRecord>> GetRuns(std::span<const RunId> run_ids,
                                                Fields fields) const;
  bool Contains(const RunId& run_id) const { return by_id_.contains(run_id); }
  // Writes status, output, error, finished_at and cancel_requested. Stops at
  // the first run that does not exist (kNotFound).
  absl::Status UpdateRuns(std::span<RunRecord> runs, UndoLog& undo);
  // Stops at the first run that does not exist (kNotFound).
  absl::StatusOr<std::vector<int>> AddRemainingSteps(
      std::span<const RunCounterDelta> deltas, UndoLog& undo);
  // See Transaction::ListRuns (run_table_list.cc).
  std::vector<RunRecord> ListRuns(const RunQuery& query, Fields fields) const;
  // One entry per key, in order; nullopt where no run of `flow_slug` has it.
  std::vector<std::optional<RunRecord>> FindByKey(
      std::string_view flow_slug, std::span<const std::string> external_keys,
      Fields fields) const;
  // The flow's runs by status (run_table_list.cc).
  RunCounts CountRuns(std::string_view flow_slug) const;
  // Ended runs with finished_at < finished_before, earliest first, at most
  // `limit`, without payloads.
  std::vector<RunRecord> FindFinished(absl::Time finished_before,
                                      int limit) const;
  // Deletes the run with its step states: detaches its entry (undo_log.h), task
  // listing and all. REQUIRES: the run exists and its tasks were detached
  // first (TaskTable::DeleteTasksOfRun).
  void DeleteRun(const RunId& run_id, UndoLog& undo);
  // Frees an entry DeleteRun detached (on commit).
  void FreeDetached(RunEntry& entry) { entries_.Erase(entry); }

  // --- Attempts ledger ----------------------------------------------------

  // Stops at the first entry whose run does not exist (kNotFound) or whose
  // (task, attempt) exists (kAlreadyExists).
  absl::Status AppendAttempts(std::span<const AttemptRecord> attempts,
                              UndoLog& undo);
  // The run's ledger by step, task, then attempt; empty if no such run.
  std::vector<AttemptRecord> ListAttempts(const RunId& run_id) const;

  // --- Step states --------------------------------------------------------

  // Moves from `states`. Stops at the first state whose run does not exist
  // (kNotFound) or whose (run, step index) exists (kAlreadyExists).
  absl::Status InsertStepStates(std::span<StepStateRecord> states,
                                UndoLog& undo);
  // The step states of each run by step index, one entry per id, in order.
  std::vector<std::vector<StepStateRecord>> GetStepStates(
      std::span<const RunId> run_ids, Fields fields) const;
  // Writes the fields UpdateStepStates names (not the counters). Stops at
  // the first state that does not exist (kNotFound).
  absl::Status UpdateStepStates(std::span<StepStateRecord> states,
                                UndoLog& undo);
  // Adds each delta and returns the new counters; an unset remaining_tasks
  // counts as 0 (as SQL's coalesce would) and becomes set. Stops at the
  // first state that does not exist (kNotFound).
  absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
      std::span<const StepCounterDelta> deltas, UndoLog& undo);

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
  void UndoDeleteRun(RunEntry& entry);
  void UndoInsertStepState(const RunId& run_id, int step_index);
  void UndoUpdateStepState(const RunId& run_id, int step_index,
                           SavedStepFields saved);
  void UndoAddStepCounters(const undo::StepCountersAdded& old_counters);
  void UndoAppendAttempt(const TaskKey& task, int attempt);

 private:
  // (started_at or finished_at, run id): the listing order, oldest first.
  using TimeKey = std::pair<absl::Time, RunId>;
  using TimeIndex = absl::btree_map<TimeKey, const RunEntry*>;
  // A flow's runs by start, and its ended runs by finish, one index per
  // outcome (FinishedSlot): retention's newest run of an outcome the flow
  // never had is then found at once, not after every other ended run.
  struct FlowIndexes {
    TimeIndex started;
    std::array<TimeIndex, 3> finished;
  };
  static_assert(static_cast<int>(RunStatus::kCancelled) -
                    static_cast<int>(RunStatus::kCompleted) ==
                2);
  // The `finished` index of an ended run's status.
  static size_t FinishedSlot(RunStatus status) {
    return static_cast<size_t>(status) -
           static_cast<size_t>(RunStatus::kCompleted);
  }
  // (finished_at, sequence) of an ended run.
  using FinishedKey = std::pair<absl::Time, uint64_t>;
  // External key -> run, per flow.
  using KeyIndex = absl::flat_hash_map<std::string, RunEntry*>;

  // Adds a new entry to the indexes; removes one.
  void Index(RunEntry& entry);
  void Unindex(const RunEntry& entry);
  // Keeps the finished index in step with a change of status or finished_at:
  // call Unindex before the change and Index after.
  void IndexFinished(RunEntry& entry);
  void UnindexFinished(const RunEntry& entry);
  // Writes what UpdateRuns writes and returns the old values.
  SavedRunFields ExchangeMutableFields(RunEntry& entry, RunRecord& next);
  // The run that holds this external key, if any.
  const RunEntry* FindByKey(std::string_view flow_slug,
                            std::string_view external_key) const;

  RunEntry* FindEntry(const RunId& run_id);
  const RunEntry* FindEntry(const RunId& run_id) const;
  static StepEntry* FindStep(RunEntry& entry, int step_index);
  static StepEntry& FindOrAddStep(RunEntry& entry, int step_index);
  // Removes the step entry if it holds neither a state nor tasks.
  static void DropStepIfEmpty(RunEntry& entry, int step_index);
  StepStateRecord* FindStepState(const RunId& run_id, int step_index);

  RowArena<RunEntry> entries_;
  absl::flat_hash_map<RunId, RunEntry*> by_id_;
  absl::flat_hash_map<std::string, FlowIndexes> by_flow_;
  absl::flat_hash_map<std::string, KeyIndex> by_key_;
  absl::btree_map<FinishedKey, RunEntry*> finished_;
  uint64_t next_sequence_ = 1;
};

// A copy of a stored run; without input and output under kNoPayloads.
RunRecord CopyOfRun(const RunRecord& run, Fields fields);

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
