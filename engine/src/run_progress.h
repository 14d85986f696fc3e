// Moves one run forward inside a transaction: resolves conditions, completes
// taskless steps, starts ready steps, applies task outcomes, and settles the
// run. This is where pgflow's rules live; backends only store the result.
//
// The caller holds the run's lock (GetRuns with kForUpdate) for a stored
// run, so the run's counters and step states can be worked out in memory;
// Finish() hands the changes to the WriteBatch, counters as add-and-return
// deltas checked against the values computed here. Steps are visited in
// definition order, which is topological, so one pass resolves everything a
// change makes ready.
//
// A stored run may be loaded without payloads (run input, step outputs);
// they are read on first need, which most transitions never have.
#ifndef SLUICE_ENGINE_RUN_PROGRESS_H_
#define SLUICE_ENGINE_RUN_PROGRESS_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "compiled_flow.h"
#include "metrics_registry.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/events.h"
#include "sluice/internal/one_trip_reads.h"
#include "write_batch.h"

namespace sluice {

// The runs `run_ids` and their step states with payloads (Fields::kAll), in
// one call where `tx` offers internal::OneTripRunReads.
absl::StatusOr<internal::RunsWithSteps> ReadPayloads(
    Transaction& tx, std::span<const RunId> run_ids);

class RunProgress {
 public:
  struct Context {
    // Null while new runs are planned before their transaction begins
    // (StartRuns): a path that must read the store then fails instead.
    Transaction* tx;
    const CompiledFlow& flow;
    absl::Time now;
    WriteBatch& writes;
    std::vector<Event>* events;  // null when nobody listens
    RunTally* runs = nullptr;    // runs started and ended, for the metrics
  };

  // What a new run starts with besides its id and input.
  struct NewRunSettings {
    int priority = 0;
    std::string external_key;
    Json metadata;
    Json options;  // RunRecord::options; its task keys go onto every task
    // The run's first tasks stay hidden until then (a delay or run_at).
    std::optional<absl::Time> not_before;
    // Default: now. A run re-created in place keeps its first start time.
    std::optional<absl::Time> started_at;
    // The caller's own input, if it lives until the batch is flushed; the
    // run's `input` is then null. The run keeps no copy: its root map reads
    // the elements there, and the batch stores the input from there.
    const Json* lasting_input = nullptr;
  };

  // A run that is not stored yet: `input` must already be validated.
  static RunProgress ForNewRun(Context context, RunId run_id, Json input,
                               NewRunSettings settings);
  static RunProgress ForNewRun(Context context, RunId run_id, Json input) {
    return ForNewRun(context, run_id, std::move(input), NewRunSettings());
  }
  // A stored run with all its step states, read with `fields`.
  RunProgress(Context context, RunRecord&& run,
              std::vector<StepStateRecord>&& steps, Fields fields);

  const RunRecord& run() const { return run_; }
  // The run's input: its record's, or a new run's lasting input.
  const Json& input() const {
    return lasting_input_ != nullptr ? *lasting_input_ : run_.input;
  }
  const CompiledFlow& flow() const { return ctx_.flow; }
  bool ended() const { return IsTerminal(run_.status); }
  // Whether `count` more completions finish `step` (to fetch its outputs
  // ahead, together with other runs').
  bool WouldComplete(int step, int count) const;

  // Whether completing the steps `completing` (all in this transaction)
  // will read the run's payloads: a dependent they release starts at once
  // and reads its input, or the run completes and its output holds a leaf's
  // stored output. A guess, so that a batch reads the payloads of all its
  // runs in one call (ReadPayloads, AdoptPayloads); a run that needs them
  // unguessed reads its own.
  bool PayloadsNeededAfter(std::span<const int> completing) const;
  // The run's payloads, read by the caller with ReadPayloads. Ignored once
  // they are loaded.
  void AdoptPayloads(RunRecord&& run, std::vector<StepStateRecord>&& stored);

  // `count` tasks of `step` completed (their reports). Ignored unless the
  // step is started. `outputs`, if given, are the step's task outputs. An
  // output that can't be read fails the step (and the run).
  absl::Status CompleteTasks(int step, int count,
                             std::optional<StepOutputs> outputs = std::nullopt);
  // A task of `step` used up its attempts: applies when_exhausted.
  absl::Status ExhaustTask(int step, const std::string& error);
  // A task of `step` produced output its dependent map can't use.
  absl::Status FailTypeViolation(int step, const std::string& error);
  // Stored data of the run can't be read ("stored data unreadable: ..."):
  // fails `step` if it is still running (-1 for none) and the run, whatever
  // the step's policies. Ignored once the run has ended.
  absl::Status FailUnreadable(int step, const std::string& error);
  // What of the run's state (its row, its step states) did not decode, as
  // an UnreadableError; empty if everything did.
  std::string UnreadableState() const;
  // Cancels the run and everything unfinished in it (kImmediate), or
  // cancels its queued tasks and asks its started ones to stop (kRequest;
  // the run ends at once if none is started). kFailedPrecondition if the
  // run already ended.
  absl::Status Cancel(CancelMode mode);
  // Makes a failed or cancelled run started again (RetryRun): the run and
  // the steps in `reset` (failed or cancelled ones) lose their end, a reset
  // step with tasks is started again with `open_tasks` of them to finish
  // (completing at once if that is 0), and the rest waits for its
  // dependencies. Then resolves what is ready.
  absl::Status Reopen(const std::vector<int>& reset,
                      const std::vector<int>& open_tasks);

  // Resolves every step that is ready, then completes the run if done. A
  // cancel-requested run starts nothing new, and ends cancelled once none
  // of its tasks is started (completed, if its work all completed first).
  absl::Status Advance();
  // Hands the changes to the write batch.
  void Finish();

 private:
  // ctx_.tx, or kFailedPrecondition if there is none.
  absl::StatusOr<Transaction*> Store() const;

  RunProgress(Context context, RunRecord&& run,
              std::vector<StepStateRecord>&& steps, bool fresh,
              bool payloads_loaded);

  StepStateRecord& state(int step) { return steps_[step]; }
  void MarkDirty(int step) { dirty_[step] = true; }
  // Copies `value` (null: none) and `error` only when someone subscribes
  // to events: most engines have no subscriber, and a run's input and
  // outputs are the bulk of its cost.
  void Emit(EventKind kind, int step, const Json* value = nullptr,
            std::string_view error = "", SkipReason reason = SkipReason::kNone);

  // Counter moves: in memory, and for a stored run recorded as deltas.
  void AddRemainingTasks(int step, int delta);
  void AddRemainingDeps(int step, int delta);
  void AddRemainingSteps(int delta);

  // Reads the run input and stored step outputs, once. Payloads that don't
  // decode are noted in unreadable_payloads_.
  absl::Status LoadPayloads();
  absl::StatusOr<Json> StepInput(int step);
  // Whether `step`, once ready, reads its input (a condition, or a step
  // that is not a map).
  bool StepReadsInput(int step) const;
  absl::Status ResolveReadyStep(int step);
  // Takes `input`: a single task's input is the step's, moved, not copied.
  absl::Status StartStep(int step, Json input);
  absl::Status DeliverHeldSignal(int step);
  absl::Status CompleteStep(int step, Json output);
  absl::Status ReleaseDependents(int step);
  absl::Status SkipStep(int step, SkipReason reason, const std::string& error);
  absl::Status SkipCascade(int step, SkipReason reason,
                           const std::string& error);
  absl::Status FailStep(int step, const std::string& error);
  absl::Status EndRun(RunStatus status, const std::string& error);
  // Ends the unfinished tasks of `step` (of every step if -1).
  absl::Status EndUnfinishedTasks(int step, TaskStatus status);
  absl::Status MaybeCompleteRun();
  // Whether a leaf step completed in an earlier transaction, so that its
  // output, which the run's output holds, is only in the store.
  bool LeafOutputIsStored() const;
  // A cancel-requested run with no started task ends cancelled.
  absl::Status SettleCancelRequest();
  // A parked task of this run ends: its pending children are owed a cancel.
  absl::Status CancelChildrenOf(const TaskKey& parent);

  Context ctx_;
  RunRecord run_;
  std::vector<StepStateRecord> steps_;
  // The per-step members are inline for flows of up to kInlineSteps steps:
  // a run's transaction then allocates none of them (most runs are a
  // job's one step).
  static constexpr size_t kInlineSteps = 4;
  absl::InlinedVector<bool, kInlineSteps> dirty_;
  // Written leaf steps whose outputs the completed run's output holds
  // (MaybeCompleteRun); Finish lends them back for their writes.
  std::vector<int> lent_outputs_;
  // By step, for stored runs.
  absl::InlinedVector<StepCounterDelta, kInlineSteps> step_deltas_;
  int remaining_steps_delta_ = 0;
  bool run_dirty_ = false;
  bool fresh_;
  // Whether the run's one step has no stored state: a fresh run of a flow
  // with an implicit step, or a stored one whose state was derived
  // (sluice/internal/implicit_steps.h).
  bool implicit_ = false;
  // Whether MaybeCompleteRun moved the implicit step's output into the
  // run's (Finish copies it back if the step state is written after all).
  bool implicit_output_moved_ = false;
  // Whether the run had ended before this transaction (then Finish() owes
  // no child report).
  bool ended_at_start_;
  bool payloads_loaded_;
  std::string unreadable_payloads_;  // an UnreadableError, or empty
  // A fresh run's first tasks are hidden until then.
  std::optional<absl::Time> not_before_;
  const Json* lasting_input_ = nullptr;  // NewRunSettings::lasting_input
  // TaskRecord::options of the run's tasks, worked out on first need.
  std::optional<Json> task_options_;
  // Tasks created by this transaction, by step: handles into the batch.
  absl::InlinedVector<absl::InlinedVector<size_t, 1>, kInlineSteps> new_tasks_;
  // Map steps started by this transaction: handles into the batch.
  absl::InlinedVector<std::optional<size_t>, kInlineSteps> new_maps_;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_RUN_PROGRESS_H_
