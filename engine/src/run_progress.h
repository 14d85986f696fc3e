// Moves one run forward inside a transaction: resolves conditions, completes
// taskless steps, starts ready steps, applies task outcomes, and settles the
// run. This is where pgflow's rules live; backends only store the result.
//
// The caller holds the run's lock (GetRun with kForUpdate) for an existing
// run. Steps are visited in definition order, which is topological, so one
// pass resolves everything a change makes ready.
#ifndef SLUICE_ENGINE_RUN_PROGRESS_H_
#define SLUICE_ENGINE_RUN_PROGRESS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiled_flow.h"
#include "sluice/backend.h"
#include "sluice/events.h"
#include "write_batch.h"

namespace sluice {

class RunProgress {
 public:
  struct Context {
    Transaction& tx;
    const CompiledFlow& flow;
    absl::Time now;
    WriteBatch& writes;
    std::vector<Event>* events;  // null when nobody listens
  };

  // A run that is not stored yet: `input` must already be validated.
  static RunProgress ForNewRun(Context context, RunId run_id, Json input);
  // A stored run with all its step states.
  RunProgress(Context context, RunRecord run,
              std::vector<StepStateRecord> steps);

  const RunRecord& run() const { return run_; }
  bool ended() const { return IsTerminal(run_.status); }

  // `count` tasks of `step` completed (their reports). Ignored unless the
  // step is started.
  absl::Status CompleteTasks(int step, int count);
  // A task of `step` used up its attempts: applies when_exhausted.
  absl::Status ExhaustTask(int step, const std::string& error);
  // A task of `step` produced output its dependent map can't use.
  absl::Status FailTypeViolation(int step, const std::string& error);
  // Cancels the run and everything unfinished in it.
  absl::Status Cancel();

  // Resolves every step that is ready, then completes the run if done.
  absl::Status Advance();
  // Hands the changed records to the write batch.
  void Finish();

 private:
  RunProgress(Context context, RunRecord run,
              std::vector<StepStateRecord> steps, bool fresh);

  StepStateRecord& state(int step) { return steps_[step]; }
  void MarkDirty(int step) { dirty_[step] = true; }
  void Emit(EventKind kind, int step, std::optional<Json> value = std::nullopt,
            std::string error = "", SkipReason reason = SkipReason::kNone);

  // Counter moves: add-and-return on stored runs, in memory on new ones.
  absl::StatusOr<int> AddRemainingTasks(int step, int delta);
  absl::Status AddRemainingDeps(int step, int delta);
  absl::Status AddRemainingSteps(int delta);

  Json StepInput(int step) const;
  absl::Status ResolveReadyStep(int step);
  absl::Status StartStep(int step, const Json& input);
  absl::Status CompleteStep(int step, Json output);
  absl::Status ReleaseDependents(int step);
  absl::Status SkipStep(int step, SkipReason reason, const std::string& error);
  absl::Status SkipCascade(int step, SkipReason reason,
                           const std::string& error);
  absl::Status FailStep(int step, const std::string& error);
  absl::Status EndRun(RunStatus status, const std::string& error);
  // Ends the unfinished tasks of `step` (of every step if -1).
  absl::Status EndUnfinishedTasks(int step, TaskStatus status);
  void MaybeCompleteRun();

  Context ctx_;
  RunRecord run_;
  std::vector<StepStateRecord> steps_;
  std::vector<bool> dirty_;
  bool run_dirty_ = false;
  bool fresh_;
  // Tasks created by this transaction, by step: handles into the batch.
  std::vector<std::vector<size_t>> new_tasks_;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_RUN_PROGRESS_H_
