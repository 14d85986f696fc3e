// Report application (the outbox's push and reconcile paths) and stall
// recovery.
#include <map>
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "run_progress.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "write_batch.h"

namespace sluice {
namespace {

constexpr int kMaxBatch = 10'000;

// Applies the reports of one run: completions counted once per step, then
// final failures, then whatever became ready.
absl::Status ApplyRunReports(Engine::Impl& impl, Transaction& tx,
                             const RunId& run_id,
                             const std::vector<OutboxReport>& reports,
                             absl::Time now, WriteBatch& writes,
                             TransactionEffects& effects) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<RunRecord> run,
                          tx.GetRun(run_id, LockMode::kForUpdate));
  if (!run || IsTerminal(run->status)) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledFlow> flow,
                          impl.FlowFor(tx, run->flow_slug));
  SLUICE_ASSIGN_OR_RETURN(std::vector<StepStateRecord> steps,
                          tx.GetStepStates(run_id));
  RunProgress progress(
      RunProgress::Context{tx, *flow, now, writes,
                           impl.wants_events() ? &effects.events : nullptr},
      std::move(*run), std::move(steps));

  std::map<int, int> completions;
  std::vector<const OutboxReport*> failures;
  for (const OutboxReport& r : reports) {
    if (r.task.step_index < 0 || r.task.step_index >= flow->step_count()) {
      return absl::InternalError(
          StrCat("report ", r.report_id, " names step ", r.task.step_index,
                 " of flow \"", flow->slug(), "\", which does not exist"));
    }
    if (r.kind == ReportKind::kCompleted) {
      ++completions[r.task.step_index];
    } else {
      failures.push_back(&r);
    }
  }
  for (const auto& [step, count] : completions) {
    SLUICE_RETURN_IF_ERROR(progress.CompleteTasks(step, count));
  }
  if (!failures.empty()) {
    std::vector<TaskKey> keys;
    for (const OutboxReport* r : failures) keys.push_back(r->task);
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                            tx.GetTasks(keys, TaskFields::kNoPayloads));
    for (size_t i = 0; i < failures.size(); ++i) {
      const OutboxReport& r = *failures[i];
      std::string error = tasks[i] ? tasks[i]->error : "task failed";
      if (r.kind == ReportKind::kTypeViolation) {
        const CompiledStep& step = flow->step(r.task.step_index);
        for (int d : step.dependents) {
          if (flow->step(d).shape->kind != StepKind::kMap) continue;
          error =
              StrCat("[TYPE_VIOLATION] Map step \"", flow->step(d).shape->slug,
                     "\" expects array input but dependency \"",
                     step.shape->slug, "\" produced something else: ", error);
          break;
        }
        SLUICE_RETURN_IF_ERROR(
            progress.FailTypeViolation(r.task.step_index, error));
      } else {
        SLUICE_RETURN_IF_ERROR(progress.ExhaustTask(r.task.step_index, error));
      }
    }
  }
  SLUICE_RETURN_IF_ERROR(progress.Advance());
  progress.Finish();
  return absl::OkStatus();
}

// Applies reports already taken from the outbox in `tx`, runs in ascending
// id order (the engine's lock order).
absl::Status ApplyTakenReports(Engine::Impl& impl, Transaction& tx,
                               std::vector<OutboxReport> reports,
                               TransactionEffects& effects) {
  std::map<RunId, std::vector<OutboxReport>> by_run;
  for (OutboxReport& r : reports) by_run[r.task.run_id].push_back(std::move(r));
  absl::Time now = impl.Now();
  WriteBatch writes;
  for (const auto& [run_id, run_reports] : by_run) {
    SLUICE_RETURN_IF_ERROR(
        ApplyRunReports(impl, tx, run_id, run_reports, now, writes, effects));
  }
  return writes.Flush(tx, now, effects);
}

}  // namespace

absl::Status Engine::ApplyReports(std::span<const int64_t> report_ids) {
  if (report_ids.empty()) return absl::OkStatus();
  for (int64_t id : report_ids) {
    if (id <= 0) {
      return absl::InvalidArgumentError(
          StrCat("ApplyReports: report id ", id, " is invalid (ids are > 0)"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<OutboxReport> reports,
                          tx->TakeReports(report_ids));
  if (reports.empty()) return absl::OkStatus();  // applied elsewhere
  TransactionEffects effects;
  SLUICE_RETURN_IF_ERROR(
      ApplyTakenReports(*impl_, *tx, std::move(reports), effects));
  return impl_->Commit(*tx, std::move(effects));
}

absl::StatusOr<int> Engine::ApplyStaleReports(int limit) {
  if (limit < 1 || limit > kMaxBatch) {
    return absl::InvalidArgumentError(StrCat(
        "ApplyStaleReports limit ", limit, " is out of range 1..", kMaxBatch));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time cutoff = impl_->Now() - impl_->options().report_stale_after;
  SLUICE_ASSIGN_OR_RETURN(std::vector<OutboxReport> reports,
                          tx->TakeStaleReports(cutoff, limit));
  if (reports.empty()) return 0;
  int count = static_cast<int>(reports.size());
  TransactionEffects effects;
  SLUICE_RETURN_IF_ERROR(
      ApplyTakenReports(*impl_, *tx, std::move(reports), effects));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  return count;
}

absl::StatusOr<int> Engine::RecoverStalledTasks(int limit) {
  if (limit < 1 || limit > kMaxBatch) {
    return absl::InvalidArgumentError(StrCat("RecoverStalledTasks limit ",
                                             limit, " is out of range 1..",
                                             kMaxBatch));
  }
  const EngineOptions& options = impl_->options();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  SLUICE_ASSIGN_OR_RETURN(std::vector<TaskRecord> stalled,
                          tx->FindStalledTasks(now, limit));
  if (stalled.empty()) return 0;
  std::vector<TaskUpdate> updates;
  FlowLookup flows(*impl_, *tx);
  for (TaskRecord& t : stalled) {
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
    const CompiledStep& step = flow->step(t.key.step_index);
    TaskUpdate u{.task = t,
                 .expected_status = t.status,
                 .expected_attempts = t.attempts};
    TaskRecord& next = u.task;
    next.stall_at.reset();
    if (t.requeued_count >= options.stall_budget) {
      next.status = TaskStatus::kFailed;
      next.finished_at = now;
      next.error =
          StrCat("stalled: its lease expired ", t.requeued_count + 1,
                 " times, over the stall budget of ", options.stall_budget);
    } else if (t.attempts >= step.max_attempts) {
      next.status = TaskStatus::kFailed;
      next.finished_at = now;
      next.error = StrCat("stalled: its lease expired during attempt ",
                          t.attempts, " of ", step.max_attempts);
    } else {
      next.status = TaskStatus::kQueued;
      next.started_at.reset();
      next.requeued_count = t.requeued_count + 1;
    }
    updates.push_back(std::move(u));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx->UpdateTasks(updates));
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> requeued;
  absl::flat_hash_map<std::string, std::vector<int64_t>> archives;
  std::vector<OutboxReport> reports;
  TransactionEffects effects;
  int handled = 0;
  for (size_t u = 0; u < updates.size(); ++u) {
    if (!applied[u]) continue;
    ++handled;
    const TaskRecord& t = updates[u].task;
    if (t.status == TaskStatus::kQueued) {
      requeued[t.queue_name].push_back({t.message_id, now});
      effects.queues_to_wake.insert(t.queue_name);
    } else {
      archives[t.queue_name].push_back(t.message_id);
      reports.push_back(OutboxReport{.task = t.key,
                                     .flow_slug = t.flow_slug,
                                     .kind = ReportKind::kFailed,
                                     .created_at = now});
    }
  }
  for (auto& [queue, v] : requeued) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(queue, v));
  }
  for (auto& [queue, ids] : archives) {
    SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(queue, ids, now));
  }
  std::vector<int64_t> report_ids;
  if (!reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(report_ids, tx->AppendReports(reports));
  }
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  // The push path; the reconcile path catches them if this fails.
  absl::Status applied_status = ApplyReports(report_ids);
  if (!applied_status.ok()) {
    impl_->Log(
        LogLevel::kWarning,
        StrCat("stall recovery: applying reports failed (",
               applied_status.ToString(), "); the sweeper will apply them"));
  }
  return handled;
}

}  // namespace sluice
