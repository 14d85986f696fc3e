// The writes of one engine transaction, gathered so they reach the backend
// in a few batched calls: new runs, step states and tasks with their
// messages, changes to stored records, and counter moves.
#ifndef SLUICE_ENGINE_WRITE_BATCH_H_
#define SLUICE_ENGINE_WRITE_BATCH_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine_impl.h"
#include "sluice/backend.h"
#include "sluice/internal/checked_counters.h"

namespace sluice {

class WriteBatch {
 public:
  // Where an updated run or step state was queued: with its counters moving
  // (UpdateRunAndCounter, UpdateStepStateAndCounters) or not.
  struct Slot {
    bool counted = false;
    size_t index = 0;
  };

  // Room for `runs` new runs and a task each, or `runs` updated runs (with
  // their counters moving or not), so that a batch's records are not moved
  // as their vectors grow.
  void ReserveNewRuns(size_t runs) {
    new_runs_.reserve(runs);
    new_run_inputs_.reserve(runs);
    new_tasks_.reserve(runs);
    new_messages_.reserve(runs);
    archive_new_.reserve(runs);
  }
  void ReserveUpdatedRuns(size_t runs) {
    updated_runs_.reserve(runs);
    counted_runs_.runs.reserve(runs);
    counted_runs_.deltas.reserve(runs);
    counted_runs_.expected.reserve(runs);
  }
  // `lent_input`, if set, is the run's input (its record's is null), which
  // its owner keeps until Flush.
  void InsertRun(RunRecord&& run, const Json* lent_input = nullptr) {
    new_runs_.push_back(std::move(run));
    new_run_inputs_.push_back(lent_input);
  }
  // Copies each lent input into its run's record, for a backend that would
  // copy it inside the transaction (internal/stores_payload_copies.h).
  void OwnLentInputs() {
    for (size_t i = 0; i < new_runs_.size(); ++i) {
      if (new_run_inputs_[i] == nullptr) continue;
      new_runs_[i].input = *new_run_inputs_[i];
      new_run_inputs_[i] = nullptr;
    }
  }
  void InsertStepState(StepStateRecord s) {
    new_step_states_.push_back(std::move(s));
  }
  Slot UpdateRun(RunRecord&& run) {
    updated_runs_.push_back(std::move(run));
    return {false, updated_runs_.size() - 1};
  }
  Slot UpdateStepState(StepStateRecord s) {
    updated_step_states_.push_back(std::move(s));
    return {false, updated_step_states_.size() - 1};
  }
  // The updated step state at `step` leaves its output to the updated run
  // at `run`, whose output object holds it under `slug`: a completed run's
  // output holds its leaf steps' outputs, and a large map's is not copied.
  // Flush moves the value into the step state for that record's write and
  // back after it.
  void LendOutput(Slot step, Slot run, std::string slug) {
    lent_outputs_.push_back({step, run, std::move(slug)});
  }
  // A conditional task write; `attempt`, if set, is the ledger entry of the
  // attempt it ends, appended only if the write applies.
  void UpdateTask(TaskUpdate update,
                  std::optional<AttemptRecord> attempt = std::nullopt) {
    task_updates_.push_back(std::move(update));
    task_attempts_.push_back(std::move(attempt));
  }

  // Counter moves, applied with add-and-return. The engine computed the
  // values it expects under the run's lock; Flush() fails with kInternal if
  // the backend returns anything else, so a drifted counter is never
  // committed.
  void AddStepCounters(StepCounterDelta delta, StepCounters expected) {
    step_deltas_.push_back(std::move(delta));
    expected_steps_.push_back(expected);
  }
  void AddRunRemainingSteps(RunCounterDelta delta, int expected) {
    run_deltas_.push_back(std::move(delta));
    expected_runs_.push_back(expected);
  }
  // A changed record whose counters move too: the backend may write the row
  // once instead of twice (UpdateStepStatesAndCounters).
  Slot UpdateStepStateAndCounters(StepStateRecord s, StepCounterDelta delta,
                                  StepCounters expected) {
    counted_steps_.states.push_back(std::move(s));
    counted_steps_.deltas.push_back(std::move(delta));
    counted_steps_.expected.push_back(expected);
    return {true, counted_steps_.states.size() - 1};
  }
  Slot UpdateRunAndCounter(RunRecord&& run, RunCounterDelta delta,
                           int expected) {
    counted_runs_.runs.push_back(std::move(run));
    counted_runs_.deltas.push_back(std::move(delta));
    counted_runs_.expected.push_back(expected);
    return {true, counted_runs_.runs.size() - 1};
  }

  // Queues a new task and its message (sent at Flush, visible at
  // `visible_at`, claimed by `priority`). Returns a handle for EndNewTask.
  size_t CreateTask(TaskRecord task, TaskMessageBody message_body,
                    absl::Time visible_at, int priority = 0);
  // Gives a task created in this batch a terminal status before it is
  // written; its message is archived as soon as it is sent.
  void EndNewTask(size_t handle, TaskStatus status, absl::Time now);
  // A task created in this batch, to change before it is written.
  TaskRecord& NewTask(size_t handle) { return new_tasks_[handle]; }
  // A map step's tasks: one per element of `elements` (a JSON array), its
  // index the task index and a copy of it the input, otherwise alike.
  struct MapTasks {
    TaskRecord prototype;  // key.task_index and input are set per element
    std::shared_ptr<const Json> elements;
    std::string step_slug;  // for the message bodies
    absl::Time visible_at;
    int priority = 0;
  };
  // Queues a map's tasks and their messages. Flush makes them as it writes
  // them, so a map over many elements never holds every task, input copy
  // and message body at once. Returns a handle for EndMapTasks.
  size_t CreateMapTasks(MapTasks map);
  // Gives every task of a map queued in this batch a terminal status before
  // it is written; their messages are archived as soon as they are sent.
  void EndMapTasks(size_t handle, TaskStatus status, absl::Time now);
  // New tasks reach the backend this many at a time (one SendMessages per
  // queue and one InsertTasks a chunk), in the order they were created.
  static constexpr size_t kTaskChunk = 1024;

  // A ledger entry of a task created in this batch (written after it).
  void AppendAttempt(AttemptRecord attempt) {
    new_attempts_.push_back(std::move(attempt));
  }

  void Archive(const std::string& queue, int64_t message_id) {
    archives_[queue].push_back(message_id);
  }
  // A child run's terminal report (fan-out), appended at Flush.
  void AppendChildReport(ChildReport report) {
    child_reports_.push_back(std::move(report));
  }
  bool has_child_reports() const { return !child_reports_.empty(); }

  // Writes everything: inserts first (runs, step states, messages, tasks),
  // then updates, counters and archives. Records the queues that got new
  // messages in `effects`, hidden ones too: an idle worker wakes to learn
  // when the earliest becomes visible.
  absl::Status Flush(Transaction& tx, absl::Time now,
                     TransactionEffects& effects);

 private:
  absl::Status SendAndInsertTasks(Transaction& tx, absl::Time now,
                                  TransactionEffects& effects);
  absl::Status MoveCounters(Transaction& tx);
  absl::Status UpdateCounted(Transaction& tx);
  // UpdateCounted where the backend checks the counters itself.
  absl::Status UpdateCountedChecked(internal::CheckedCounterMoves& tx);
  // Moves each lent output whose step state is in the counted (or plain)
  // vector into that step state (`to_steps`), or back into its run.
  void MoveLentOutputs(bool counted_steps, bool to_steps);

  struct LentOutput {
    Slot step;
    Slot run;
    std::string slug;
  };

  struct PendingMap {
    MapTasks tasks;
    size_t tasks_before;  // new_tasks_ created before it, written first
    std::optional<TaskStatus> ended;
    absl::Time ended_at;
  };
  struct CountedSteps {
    std::vector<StepStateRecord> states;
    std::vector<StepCounterDelta> deltas;
    std::vector<StepCounters> expected;
  };
  struct CountedRuns {
    std::vector<RunRecord> runs;
    std::vector<RunCounterDelta> deltas;
    std::vector<int> expected;
  };

  std::vector<RunRecord> new_runs_;
  std::vector<const Json*> new_run_inputs_;  // one per new run
  std::vector<StepStateRecord> new_step_states_;
  std::vector<TaskRecord> new_tasks_;
  std::vector<OutgoingMessage> new_messages_;  // one per new task
  std::vector<bool> archive_new_;              // one per new task
  std::vector<AttemptRecord> new_attempts_;    // of new tasks
  std::vector<PendingMap> new_maps_;
  std::vector<RunRecord> updated_runs_;
  std::vector<StepStateRecord> updated_step_states_;
  std::vector<TaskUpdate> task_updates_;
  std::vector<std::optional<AttemptRecord>> task_attempts_;  // one per update
  std::vector<StepCounterDelta> step_deltas_;
  std::vector<StepCounters> expected_steps_;
  std::vector<RunCounterDelta> run_deltas_;
  std::vector<int> expected_runs_;
  CountedSteps counted_steps_;
  CountedRuns counted_runs_;
  absl::flat_hash_map<std::string, std::vector<int64_t>> archives_;
  std::vector<ChildReport> child_reports_;
  std::vector<LentOutput> lent_outputs_;
};

// The body of a task's message, for any pgmq client reading the queue.
TaskMessageBody MessageBody(const TaskRecord& task,
                            const std::string& step_slug);

}  // namespace sluice

#endif  // SLUICE_ENGINE_WRITE_BATCH_H_
