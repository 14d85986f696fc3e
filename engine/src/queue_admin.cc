// Queue administration (pause, resume, counts) and removing runs.
#include "engine_impl.h"
#include "queue_name.h"
#include "run_options.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

absl::Status UnknownQueue(std::string_view queue) {
  return absl::NotFoundError(
      StrCat("queue \"", queue,
             "\" is not registered; deploy a flow or job that uses it"));
}

}  // namespace

absl::Status Engine::Impl::SetPaused(std::string_view queue, bool paused) {
  SLUICE_RETURN_IF_ERROR(queue_name::Validate(queue));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, Begin());
  SLUICE_ASSIGN_OR_RETURN(std::optional<QueueRecord> entry,
                          tx->GetQueue(queue));
  if (!entry) return UnknownQueue(queue);
  if (entry->paused == paused) return absl::OkStatus();
  SLUICE_RETURN_IF_ERROR(tx->SetQueuePaused(queue, paused));
  TransactionEffects effects;
  // Resuming makes waiting tasks claimable: wake idle workers.
  if (!paused) effects.queues_to_wake.insert(std::string(queue));
  return Commit(*tx, std::move(effects));
}

absl::Status Engine::PauseQueue(std::string_view queue) {
  return impl_->SetPaused(queue, true);
}

absl::Status Engine::ResumeQueue(std::string_view queue) {
  return impl_->SetPaused(queue, false);
}

absl::StatusOr<QueueState> Engine::Counts(std::string_view queue) {
  SLUICE_RETURN_IF_ERROR(queue_name::Validate(queue));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::optional<QueueRecord> entry,
                          tx->GetQueue(queue));
  if (!entry) return UnknownQueue(queue);
  QueueState state;
  state.queue = std::string(queue);
  state.paused = entry->paused;
  SLUICE_ASSIGN_OR_RETURN(
      state.counts, tx->CountTasks(queue, impl_->Now(), TaskCounts::kAll));
  return state;
}

absl::Status DeleteRunsAndKeys(Transaction& tx,
                               std::span<const RunRecord> runs) {
  std::vector<RunId> ids;
  ids.reserve(runs.size());
  for (const RunRecord& run : runs) ids.push_back(run.run_id);
  SLUICE_RETURN_IF_ERROR(tx.DeleteRuns(ids).status());
  // A dedupe entry naming a deleted run is dead; drop it rather than keep
  // it until a later enqueue of the key takes it over.
  for (const RunRecord& run : runs) {
    std::optional<Dedupe> dedupe = ParseRunOptions(run.options).dedupe;
    if (!dedupe) continue;
    SLUICE_RETURN_IF_ERROR(
        tx.DeleteDedupe(run.flow_slug, dedupe->key, run.run_id).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<RunRecord> LockRun(Transaction& tx, const RunId& run_id,
                                  std::string_view prefix) {
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> runs,
      tx.GetRuns(std::span(&run_id, 1), LockMode::kForUpdate,
                 Fields::kNoPayloads));
  if (runs.empty() || !runs[0]) {
    return absl::NotFoundError(
        StrCat(prefix, "run ", run_id.ToString(), " does not exist"));
  }
  return std::move(*runs[0]);
}

absl::Status Engine::RemoveRun(const RunId& run_id) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(RunRecord run, LockRun(*tx, run_id));
  if (!IsTerminal(run.status)) {
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<TaskRecord> unfinished,
        tx->GetUnfinishedTasks(run_id, std::nullopt, Fields::kNoPayloads));
    for (const TaskRecord& task : unfinished) {
      if (task.status != TaskStatus::kStarted) continue;
      return absl::FailedPreconditionError(
          StrCat("run ", run_id.ToString(), " has a started task (step ",
                 task.key.step_index, ", task ", task.key.task_index,
                 "); cancel the run (Engine::CancelRun) and remove it once it "
                 "ended"));
    }
  }
  SLUICE_RETURN_IF_ERROR(DeleteRunsAndKeys(*tx, std::span(&run, 1)));
  return impl_->Commit(*tx, {});
}

}  // namespace sluice
