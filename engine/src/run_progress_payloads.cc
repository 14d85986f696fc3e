// RunProgress's payloads (the run's input, its steps' stored outputs): read
// on first need, or taken from a read that served a whole batch of runs.
#include <algorithm>

#include "run_progress.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {

absl::StatusOr<internal::RunsWithSteps> ReadPayloads(
    Transaction& tx, std::span<const RunId> run_ids) {
  if (auto* one_trip = dynamic_cast<internal::OneTripRunReads*>(&tx)) {
    return one_trip->ReadRunsWithSteps(run_ids, LockMode::kNone, Fields::kAll);
  }
  internal::RunsWithSteps read;
  SLUICE_ASSIGN_OR_RETURN(read.runs,
                          tx.GetRuns(run_ids, LockMode::kNone, Fields::kAll));
  SLUICE_ASSIGN_OR_RETURN(read.steps, tx.GetStepStates(run_ids, Fields::kAll));
  return read;
}

absl::Status RunProgress::LoadPayloads() {
  if (payloads_loaded_) return absl::OkStatus();
  RunId id = run_.run_id;
  SLUICE_ASSIGN_OR_RETURN(Transaction * tx, Store());
  SLUICE_ASSIGN_OR_RETURN(internal::RunsWithSteps read,
                          ReadPayloads(*tx, std::span(&id, 1)));
  if (read.runs.empty() || !read.runs[0]) {
    return absl::InternalError(
        StrCat("run ", id.ToString(), " vanished while it was locked"));
  }
  AdoptPayloads(std::move(*read.runs[0]), std::move(read.steps[0]));
  return absl::OkStatus();
}

void RunProgress::AdoptPayloads(RunRecord&& run,
                                std::vector<StepStateRecord>&& stored) {
  if (payloads_loaded_) return;
  run_.input = std::move(run.input);
  std::string unreadable = std::move(run.unreadable);
  for (StepStateRecord& s : stored) {
    if (s.step_index < 0 || s.step_index >= ctx_.flow.step_count()) continue;
    if (!s.unreadable.empty()) {
      AddUnreadable(unreadable,
                    StrCat("step \"", ctx_.flow.step(s.step_index).shape->slug,
                           "\": ", s.unreadable));
    }
    // Outputs set in this transaction are newer than what is stored.
    StepStateRecord& mine = state(s.step_index);
    if (!mine.output.has_value()) mine.output = std::move(s.output);
  }
  if (!unreadable.empty()) unreadable_payloads_ = UnreadableError(unreadable);
  payloads_loaded_ = true;
}

bool RunProgress::PayloadsNeededAfter(std::span<const int> completing) const {
  if (payloads_loaded_ || ended() || completing.empty()) return false;
  // A dependent they release that starts at once and reads its input.
  for (int done : completing) {
    for (int d : ctx_.flow.step(done).dependents) {
      const StepStateRecord& st = steps_[d];
      if (st.status != StepStatus::kCreated || !StepReadsInput(d)) continue;
      int released = 0;
      for (int dep : ctx_.flow.step(d).dependencies) {
        released += static_cast<int>(
            std::count(completing.begin(), completing.end(), dep));
      }
      if (st.remaining_deps - released <= 0) return true;
    }
  }
  // The run completes, and its output holds a leaf's stored output.
  return run_.remaining_steps <= static_cast<int>(completing.size()) &&
         LeafOutputIsStored();
}

}  // namespace sluice
