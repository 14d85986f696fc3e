// Report application (the outbox's push and reconcile paths) and stall
// recovery.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "apply_here.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "ledger.h"
#include "run_progress.h"
#include "sluice/engine.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "taken_back.h"
#include "write_batch.h"

namespace sluice {
namespace {

constexpr int kMaxBatch = 10'000;

// The reports of one run, sorted out: completions counted per step, final
// failures in report order, and the first problem that means the run's
// stored data can't be read (then the run fails and nothing else applies).
struct RunReports {
  RunId run_id;
  // (step index, completions) in step order; a batch's run usually
  // completes one step.
  absl::InlinedVector<std::pair<int, int>, 1> completions;
  std::vector<const OutboxReport*> failures;
  std::string unreadable;  // an UnreadableError, or empty
};

// The reports of each run a batch names, in run id order.
using ReportsByRun = std::vector<RunReports>;

std::string TypeViolationError(const CompiledFlow& flow, int step_index,
                               const std::string& task_error) {
  const CompiledStep& step = flow.step(step_index);
  for (int d : step.dependents) {
    if (flow.step(d).shape->kind != StepKind::kMap) continue;
    return StrCat("[TYPE_VIOLATION] Map step \"", flow.step(d).shape->slug,
                  "\" expects array input but dependency \"", step.shape->slug,
                  "\" produced something else: ", task_error);
  }
  return task_error;
}

// Counts one completion of `step` in `rr`, keeping step order.
void CountCompletion(RunReports& rr, int step) {
  auto it = std::lower_bound(
      rr.completions.begin(), rr.completions.end(), step,
      [](const std::pair<int, int>& c, int s) { return c.first < s; });
  if (it == rr.completions.end() || it->first != step) {
    it = rr.completions.insert(it, {step, 0});
  }
  ++it->second;
}

// Sorts reports by run. A report that can't be read fails its run; one
// that doesn't even name its run can only be dropped (it is already taken).
ReportsByRun SortReports(Engine::Impl& impl,
                         const std::vector<OutboxReport>& reports) {
  std::vector<const OutboxReport*> sorted;
  sorted.reserve(reports.size());
  for (const OutboxReport& r : reports) {
    if (!r.unreadable.empty() && r.task.run_id.IsNil()) {
      impl.Log(LogLevel::kWarning,
               StrCat("outbox report ", r.report_id, " can't be read (",
                      r.unreadable, ") and names no run; dropped it"));
      continue;
    }
    sorted.push_back(&r);
  }
  // Stable: a run's failures stay in report order.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const OutboxReport* a, const OutboxReport* b) {
                     return a->task.run_id < b->task.run_id;
                   });
  ReportsByRun by_run;
  for (const OutboxReport* r : sorted) {
    if (by_run.empty() || by_run.back().run_id != r->task.run_id) {
      by_run.emplace_back().run_id = r->task.run_id;
    }
    RunReports& rr = by_run.back();
    if (!r->unreadable.empty()) {
      if (rr.unreadable.empty()) {
        rr.unreadable = UnreadableError(
            StrCat("outbox report ", r->report_id, ": ", r->unreadable));
      }
    } else if (r->kind == ReportKind::kCompleted) {
      CountCompletion(rr, r->task.step_index);
    } else {
      rr.failures.push_back(r);
    }
  }
  return by_run;
}

// Notes in `rr` a report that names a step its flow doesn't have.
void CheckReportedSteps(const CompiledFlow& flow, RunReports& rr) {
  auto check = [&](int step) {
    if (!rr.unreadable.empty() || (step >= 0 && step < flow.step_count())) {
      return;
    }
    rr.unreadable = UnreadableError(
        StrCat("a report names step ", step, " of flow \"", flow.slug(),
               "\", which has ", flow.step_count(), " steps"));
  };
  for (const auto& [step, count] : rr.completions) check(step);
  for (const OutboxReport* r : rr.failures) check(r->task.step_index);
}

// The error a task whose stored data can't be read ends its run with: the
// one the claim gave it, else what its row says.
std::string UnreadableTaskError(const CompiledFlow& flow, const TaskKey& key,
                                const std::optional<TaskRecord>& task) {
  if (task && task->status == TaskStatus::kFailed &&
      absl::StartsWith(task->error, UnreadableError(""))) {
    return task->error;
  }
  std::string what = StrCat("step \"", flow.step(key.step_index).shape->slug,
                            "\" task ", key.task_index);
  if (!task) return UnreadableError(StrCat(what, ": the task row is missing"));
  if (task->unreadable.empty()) return UnreadableError(what);
  return UnreadableError(StrCat(what, ": ", task->unreadable));
}

// Whether `in_hand` holds the output of `step`'s one task.
bool InHand(const OutputsInHand& in_hand, const RunId& run, int step) {
  return in_hand.contains(TaskKey{run, step, 0});
}

// The outputs of `step` from `in_hand`, moved out of it, if it holds them.
std::optional<StepOutputs> TakeInHand(OutputsInHand& in_hand, const RunId& run,
                                      int step) {
  auto it = in_hand.find(TaskKey{run, step, 0});
  if (it == in_hand.end()) return std::nullopt;
  StepOutputs held;
  held.outputs.push_back(std::move(it->second));
  in_hand.erase(it);
  return held;
}

// Runs read (and locked) for applying reports, with their step states when
// the transaction reads both in one call (internal::OneTripRunReads); else
// ApplyToRuns reads the states of the runs it applies to.
struct LockedRuns {
  std::vector<std::optional<RunRecord>> runs;
  std::optional<std::vector<std::vector<StepStateRecord>>> steps;
};

absl::StatusOr<LockedRuns> ReadRunsToApply(Transaction& tx,
                                           std::span<const RunId> ids,
                                           LockMode lock) {
  LockedRuns read;
  if (auto* one_trip = dynamic_cast<internal::OneTripRunReads*>(&tx)) {
    SLUICE_ASSIGN_OR_RETURN(
        internal::RunsWithSteps both,
        one_trip->ReadRunsWithSteps(ids, lock, Fields::kNoPayloads));
    read.runs = std::move(both.runs);
    read.steps = std::move(both.steps);
    return read;
  }
  SLUICE_ASSIGN_OR_RETURN(read.runs,
                          tx.GetRuns(ids, lock, Fields::kNoPayloads));
  return read;
}

// Applies the reports of `by_run` to `runs`, read in the same order, which
// `tx` has read without payloads and locked. Every other read is one call
// for the whole batch: the step states without payloads (unless `runs`
// brought them), the outputs of every step the batch completes, the errors
// of failed tasks, and the payloads of the runs whose completions start a
// step that reads its input (RunProgress::PayloadsNeededAfter).
// `in_hand` holds outputs of single-task steps that need no read.
absl::Status ApplyToRuns(Engine::Impl& impl, Transaction& tx,
                         ReportsByRun& by_run, LockedRuns runs,
                         OutputsInHand& in_hand, TransactionEffects& effects) {
  std::vector<RunId> live_ids;
  std::vector<RunRecord*> live_runs;  // into `runs`, moved from once
  std::vector<RunReports*> live_reports;
  std::vector<std::vector<StepStateRecord>> states;
  live_ids.reserve(runs.runs.size());
  live_runs.reserve(runs.runs.size());
  live_reports.reserve(runs.runs.size());
  for (size_t i = 0; i < runs.runs.size(); ++i) {
    std::optional<RunRecord>& run = runs.runs[i];
    if (!run || IsTerminal(run->status)) continue;  // reports drop
    live_ids.push_back(by_run[i].run_id);
    live_runs.push_back(&*run);
    live_reports.push_back(&by_run[i]);
    if (runs.steps) states.push_back(std::move((*runs.steps)[i]));
  }
  if (live_ids.empty()) return absl::OkStatus();
  if (!runs.steps) {
    SLUICE_ASSIGN_OR_RETURN(states,
                            tx.GetStepStates(live_ids, Fields::kNoPayloads));
  }

  absl::Time now = impl.Now();
  WriteBatch writes;
  writes.ReserveUpdatedRuns(live_ids.size());
  FlowLookup flows(impl, tx);
  std::vector<RunProgress> progress;
  progress.reserve(live_ids.size());
  std::vector<StepRef> completing;
  std::vector<TaskKey> failed_keys;
  // Runs whose completions will read their payloads, read together below.
  std::vector<size_t> payload_runs;
  std::vector<RunId> payload_ids;
  std::vector<int> completes;
  for (size_t i = 0; i < live_ids.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow,
                            flows.Get(live_runs[i]->flow_slug));
    RunReports& rr = *live_reports[i];
    CheckReportedSteps(*flow, rr);
    progress.emplace_back(
        RunProgress::Context{&tx, *flow, now, writes,
                             impl.wants_events() ? &effects.events : nullptr,
                             &effects.runs},
        std::move(*live_runs[i]), std::move(states[i]), Fields::kNoPayloads);
    if (rr.unreadable.empty())
      rr.unreadable = progress.back().UnreadableState();
    if (!rr.unreadable.empty()) continue;  // the run fails; nothing to read
    completes.clear();
    for (const auto& [step, count] : rr.completions) {
      if (!progress.back().WouldComplete(step, count)) continue;
      completes.push_back(step);
      if (!InHand(in_hand, live_ids[i], step)) {
        completing.push_back(StepRef{live_ids[i], step});
      }
    }
    if (progress.back().PayloadsNeededAfter(completes)) {
      payload_runs.push_back(progress.size() - 1);
      payload_ids.push_back(live_ids[i]);
    }
    for (const OutboxReport* r : rr.failures) failed_keys.push_back(r->task);
  }
  std::vector<StepOutputs> outputs;
  if (!completing.empty()) {
    SLUICE_ASSIGN_OR_RETURN(outputs, tx.GetTaskOutputs(completing));
  }
  std::vector<std::optional<TaskRecord>> failed_tasks;
  if (!failed_keys.empty()) {
    SLUICE_ASSIGN_OR_RETURN(failed_tasks,
                            tx.GetTasks(failed_keys, Fields::kNoPayloads));
  }
  if (!payload_ids.empty()) {
    SLUICE_ASSIGN_OR_RETURN(internal::RunsWithSteps payloads,
                            ReadPayloads(tx, payload_ids));
    for (size_t k = 0; k < payload_runs.size(); ++k) {
      if (!payloads.runs[k]) continue;  // LoadPayloads will say so
      progress[payload_runs[k]].AdoptPayloads(std::move(*payloads.runs[k]),
                                              std::move(payloads.steps[k]));
    }
  }
  size_t next_output = 0;
  size_t next_failure = 0;
  for (size_t i = 0; i < progress.size(); ++i) {
    RunProgress& run = progress[i];
    const RunReports& rr = *live_reports[i];
    if (!rr.unreadable.empty()) {
      SLUICE_RETURN_IF_ERROR(run.FailUnreadable(-1, rr.unreadable));
      run.Finish();
      continue;
    }
    for (const auto& [step, count] : rr.completions) {
      std::optional<StepOutputs> prefetched;
      if (next_output < completing.size() &&
          completing[next_output].run_id == live_ids[i] &&
          completing[next_output].step_index == step) {
        prefetched = std::move(outputs[next_output++]);
      } else {
        prefetched = TakeInHand(in_hand, live_ids[i], step);
      }
      SLUICE_RETURN_IF_ERROR(
          run.CompleteTasks(step, count, std::move(prefetched)));
    }
    for (const OutboxReport* r : rr.failures) {
      const std::optional<TaskRecord>& task = failed_tasks[next_failure++];
      int step = r->task.step_index;
      if (r->kind == ReportKind::kUnreadable) {
        SLUICE_RETURN_IF_ERROR(run.FailUnreadable(
            step, UnreadableTaskError(run.flow(), r->task, task)));
        continue;
      }
      // A task its run asked to stop ended cancelled: nothing to apply but
      // the settling of the cancel request (Advance, below).
      if (task && task->status == TaskStatus::kCancelled) continue;
      std::string error = task ? task->error : "task failed";
      if (r->kind == ReportKind::kTypeViolation) {
        SLUICE_RETURN_IF_ERROR(run.FailTypeViolation(
            step, TypeViolationError(run.flow(), step, error)));
      } else {
        SLUICE_RETURN_IF_ERROR(run.ExhaustTask(step, error));
      }
    }
    SLUICE_RETURN_IF_ERROR(run.Advance());
    run.Finish();
  }
  return writes.Flush(tx, now, effects);
}

// Applies reports already taken from the outbox in `tx`, their runs locked
// in ascending id order (the engine's lock order).
absl::Status ApplyTakenReports(Engine::Impl& impl, Transaction& tx,
                               std::vector<OutboxReport> reports,
                               TransactionEffects& effects) {
  ReportsByRun by_run = SortReports(impl, reports);
  if (by_run.empty()) return absl::OkStatus();
  std::vector<RunId> run_ids;
  run_ids.reserve(by_run.size());
  for (const RunReports& rr : by_run) run_ids.push_back(rr.run_id);
  SLUICE_ASSIGN_OR_RETURN(LockedRuns runs,
                          ReadRunsToApply(tx, run_ids, LockMode::kForUpdate));
  OutputsInHand none;  // the outbox path holds no results
  return ApplyToRuns(impl, tx, by_run, std::move(runs), none, effects);
}

// The runs `ids` (sorted) from `ahead`, if it holds them all.
std::optional<LockedRuns> TakeReadAhead(RunsReadAhead* ahead,
                                        std::span<const RunId> ids) {
  if (ahead == nullptr) return std::nullopt;
  std::vector<size_t> at;
  at.reserve(ids.size());
  for (const RunId& id : ids) {
    auto it = std::lower_bound(ahead->ids.begin(), ahead->ids.end(), id);
    if (it == ahead->ids.end() || *it != id) return std::nullopt;
    at.push_back(static_cast<size_t>(it - ahead->ids.begin()));
  }
  LockedRuns runs;
  runs.steps.emplace();
  for (size_t k : at) {
    runs.runs.push_back(std::move(ahead->runs.runs[k]));
    runs.steps->push_back(std::move(ahead->runs.steps[k]));
  }
  return runs;
}

}  // namespace

absl::StatusOr<std::vector<OutboxReport>> ApplyCompletionsHere(
    Engine::Impl& impl, Transaction& tx, std::vector<OutboxReport> reports,
    OutputsInHand& in_hand, TransactionEffects& effects, RunsReadAhead* ahead) {
  std::vector<RunId> ids;
  for (const OutboxReport& r : reports) {
    if (r.kind == ReportKind::kCompleted) ids.push_back(r.task.run_id);
  }
  if (ids.empty()) return reports;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // Never waits: this transaction already holds its tasks, and a run's
  // lock is taken before its tasks' everywhere else.
  std::optional<LockedRuns> read_ahead = TakeReadAhead(ahead, ids);
  if (!read_ahead) {
    SLUICE_ASSIGN_OR_RETURN(read_ahead,
                            ReadRunsToApply(tx, ids, LockMode::kSkipLocked));
  }
  LockedRuns runs = *std::move(read_ahead);
  // A pending cancel may end other tasks of the run, which other
  // transactions may hold: the outbox path settles it.
  auto applies_here = [](const std::optional<RunRecord>& run) {
    return run && !run->cancel_requested;
  };
  absl::flat_hash_set<RunId> here;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (applies_here(runs.runs[i])) here.insert(ids[i]);
  }
  LockedRuns here_runs;
  if (here.size() == ids.size()) {
    here_runs = std::move(runs);  // the usual case: every run read applies
  } else {
    if (runs.steps) here_runs.steps.emplace();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!applies_here(runs.runs[i])) continue;
      here_runs.runs.push_back(std::move(runs.runs[i]));
      if (runs.steps) here_runs.steps->push_back(std::move((*runs.steps)[i]));
    }
  }
  std::vector<OutboxReport> applied, rest;
  for (OutboxReport& r : reports) {
    bool now = r.kind == ReportKind::kCompleted && here.contains(r.task.run_id);
    (now ? applied : rest).push_back(std::move(r));
  }
  if (applied.empty()) return rest;
  ReportsByRun by_run = SortReports(impl, applied);
  SLUICE_RETURN_IF_ERROR(
      ApplyToRuns(impl, tx, by_run, std::move(here_runs), in_hand, effects));
  return rest;
}

absl::Status Engine::ApplyReports(std::span<const int64_t> report_ids) {
  SLUICE_ASSIGN_OR_RETURN(bool child_reports, ApplyReportsOnly(report_ids));
  if (child_reports) RelayAfterApply();
  return absl::OkStatus();
}

void Engine::RelayAfterApply() {
  // The push path of the fan-out relay; the sweeper catches up if this
  // fails.
  if (absl::Status s = RelayChildReports().status(); !s.ok()) {
    impl_->Log(LogLevel::kWarning,
               StrCat("relaying child reports failed (", s.ToString(),
                      "); the sweeper will relay them"));
  }
}

absl::StatusOr<bool> Engine::ApplyReportsOnly(
    std::span<const int64_t> report_ids) {
  if (report_ids.empty()) return false;
  for (int64_t id : report_ids) {
    if (id <= 0) {
      return absl::InvalidArgumentError(
          StrCat("ApplyReports: report id ", id, " is invalid (ids are > 0)"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(std::vector<OutboxReport> reports,
                          tx->TakeReports(report_ids));
  if (reports.empty()) return false;  // applied elsewhere
  TransactionEffects effects;
  SLUICE_RETURN_IF_ERROR(
      ApplyTakenReports(*impl_, *tx, std::move(reports), effects));
  const bool child_reports = effects.child_reports;
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  return child_reports;
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
  // Every write of a started task's message makes it visible at
  // max(stall_at, that write's time) + claim_grace at the latest (lease.h
  // says how), so a task stalled before `now` has its message visible by
  // now + claim_grace.
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<TaskRecord> stalled,
      tx->FindStalledTasks({.now = now,
                            .messages_visible_by = now + options.claim_grace,
                            .limit = limit},
                           Fields::kNoPayloads));
  if (stalled.empty()) return 0;
  std::vector<TaskUpdate> updates;
  std::vector<AttemptRecord> entries;
  std::vector<std::string_view> step_slugs;  // for the metrics
  FlowLookup flows(*impl_, *tx);
  for (TaskRecord& t : stalled) {
    SLUICE_ASSIGN_OR_RETURN(const CompiledFlow* flow, flows.Get(t.flow_slug));
    step_slugs.push_back(flow->step(t.key.step_index).shape->slug);
    TaskPolicy policy = EffectivePolicy(flow->step(t.key.step_index), t);
    TaskUpdate u{.task = t,
                 .expected_status = t.status,
                 .expected_attempts = t.attempts};
    TaskRecord& next = u.task;
    next.stall_at.reset();
    AttemptRecord entry = EndedAttempt(t, AttemptOutcome::kStalled, now);
    if (t.cancel_requested) {
      // Its run asked it to stop and its handler never reported: cancelled.
      next.status = TaskStatus::kCancelled;
      next.finished_at = now;
      next.error =
          "cancelled: its lease expired after its run asked it to stop";
      entry.outcome = AttemptOutcome::kCancelled;
      entry.error = next.error;
    } else if (t.requeued_count >= options.stall_budget) {
      next.status = TaskStatus::kFailed;
      next.finished_at = now;
      next.error =
          StrCat("stalled: its lease expired ", t.requeued_count + 1,
                 " times, over the stall budget of ", options.stall_budget);
      entry.outcome = AttemptOutcome::kFailed;
      entry.error = next.error;
    } else if (BudgetUsed(t) >= policy.max_attempts) {
      next.status = TaskStatus::kFailed;
      next.finished_at = now;
      next.error = StrCat("stalled: its lease expired during attempt ",
                          BudgetUsed(t), " of ", policy.max_attempts);
      entry.outcome = AttemptOutcome::kFailed;
      entry.error = next.error;
    } else {
      next.status = TaskStatus::kQueued;
      next.started_at.reset();
      next.requeued_count = t.requeued_count + 1;
      entry.error = "its lease expired";
    }
    updates.push_back(std::move(u));
    entries.push_back(std::move(entry));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx->UpdateTasks(updates));
  StepTally tally;
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!applied[i]) continue;
    StepTally::Entry& e = tally.For(updates[i].task.flow_slug, step_slugs[i]);
    ++e.stalled;
    if (updates[i].task.status == TaskStatus::kFailed) ++e.failed;
  }
  TransactionEffects effects;
  SLUICE_ASSIGN_OR_RETURN(
      TakenBack taken,
      WriteTakenBack(*tx, updates, applied, entries, now, effects));
  const std::vector<int64_t>& report_ids = taken.report_ids;
  const int handled = taken.applied;
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, std::move(effects)));
  impl_->metrics().AddTasks(tally);
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
