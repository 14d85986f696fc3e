// Engine::FinishTasks: what a worker reports about the tasks it claimed
// (heartbeats and releases are in leases.cc).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "apply_here.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "fan_out_internal.h"
#include "finish_plan.h"
#include "lease.h"
#include "ledger.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/internal/one_trip_finishes.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "taken_back.h"

namespace sluice {
namespace {

using finish_internal::Plan;
using finish_internal::PlanFailure;
using finish_internal::PlanResult;
using finish_internal::Tally;

// A handler's completion write that failed, and why.
struct WriteFailure {
  size_t result = 0;
  absl::Status status;
};

// Runs the completion writes of the results whose tasks complete here
// (TaskContext::WriteOnCompletion); the first failure is returned in
// `failed`, and the transaction must then be dropped.
absl::Status RunCompletionWrites(Transaction& tx,
                                 std::span<const TaskResult> results,
                                 std::span<const Plan> plans,
                                 const std::vector<bool>& applied,
                                 std::optional<WriteFailure>& failed) {
  for (size_t u = 0; u < plans.size(); ++u) {
    const Plan& plan = plans[u];
    const NativeWrite& write = results[plan.result].completion_write;
    if (!applied[u] || plan.disposition != ResultDisposition::kCompleted ||
        !write) {
      continue;
    }
    absl::Status status = tx.RunNative(write);
    if (!status.ok()) {
      failed = WriteFailure{plan.result, std::move(status)};
      return failed->status;
    }
  }
  return absl::OkStatus();
}

// The failure an attempt records when its completion write failed: the
// write's status, its message prefixed, its payloads (RetryAfter,
// NonRetryable) kept.
absl::Status CompletionWriteFailed(const absl::Status& status) {
  absl::Status failed(status.code(), StrCat("the handler's completion write "
                                            "failed: ",
                                            status.message()));
  status.ForEachPayload([&failed](absl::string_view url, const absl::Cord& p) {
    failed.SetPayload(url, p);
  });
  return failed;
}

// The claim's record of `result`'s task (TaskResult::claimed), if it names
// that task as started in the result's attempt; else null, and the task is
// read.
const TaskRecord* ClaimedRecord(const TaskResult& result) {
  const TaskRecord* claimed = result.claimed.get();
  if (claimed == nullptr || claimed->key != result.key ||
      claimed->status != TaskStatus::kStarted ||
      claimed->attempts != result.attempt) {
    return nullptr;
  }
  return claimed;
}

// Whether `result` is a FanOut with children, acked after its batch in a
// transaction of its own (FinishFanOut).
bool FansOut(const TaskResult& result) {
  return result.outcome.ok() && result.outcome->is_fan_out() &&
         !result.outcome->fan_out().children.empty();
}

// The tasks of the results without a claim's record (ClaimedRecord), read;
// the others' entries stay empty.
absl::StatusOr<std::vector<std::optional<TaskRecord>>> ReadUnclaimed(
    Transaction& tx, std::span<const TaskResult> results,
    std::span<const TaskKey> keys) {
  std::vector<std::optional<TaskRecord>> tasks(results.size());
  std::vector<TaskKey> to_read;
  std::vector<size_t> read_index;
  for (size_t i = 0; i < results.size(); ++i) {
    if (ClaimedRecord(results[i]) != nullptr) continue;
    to_read.push_back(keys[i]);
    read_index.push_back(i);
  }
  if (to_read.empty()) return tasks;
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> read,
                          tx.GetTasks(to_read, Fields::kNoPayloads));
  for (size_t k = 0; k < read.size(); ++k) {
    tasks[read_index[k]] = std::move(read[k]);
  }
  return tasks;
}

// What a late result leaves to do: an ended task's message may still
// need archiving, by queue.
using LateArchives = absl::flat_hash_map<std::string, std::vector<int64_t>>;

// Whether `task`, as read, still runs `attempt`. If not, the result is late:
// not found if the task is gone, else stale (its `disposition` as it
// stands), with an ended task's message noted in `archives`.
bool AttemptStillHolds(const std::optional<TaskRecord>& task, int attempt,
                       ResultDisposition& disposition, LateArchives& archives) {
  if (AttemptHolds(task, attempt)) return true;
  if (!task) {
    disposition = ResultDisposition::kNotFound;
  } else if (IsTerminal(task->status)) {
    archives[task->queue_name].push_back(task->message_id);
  }
  return false;
}

// Plans once more, from a fresh read in the same transaction, the writes
// that failed their compare-and-set: a cancel request that landed after the
// first read (or the claim) now cancels a failure, and stays on a
// completion. Writes them, and appends to updates, plans and applied. A task
// that is gone or no longer runs the attempt ends as a first read would have
// ended it: not found, or stale (an ended task's message archived).
absl::Status ReplanRaced(Transaction& tx, FlowLookup& flows,
                         const EngineOptions& options,
                         std::span<const TaskResult> results, absl::Time now,
                         std::vector<TaskUpdate>& updates,
                         std::vector<Plan>& plans, std::vector<bool>& applied,
                         LateArchives& archives,
                         std::vector<ResultDisposition>& dispositions) {
  std::vector<size_t> raced;
  std::vector<TaskKey> keys;
  for (size_t u = 0; u < applied.size(); ++u) {
    if (applied[u]) continue;
    raced.push_back(plans[u].result);
    keys.push_back(updates[u].task.key);
  }
  if (raced.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                          tx.GetTasks(keys, Fields::kNoPayloads));
  std::vector<TaskUpdate> again;
  std::vector<Plan> again_plans;
  for (size_t k = 0; k < raced.size(); ++k) {
    const TaskResult& result = results[raced[k]];
    // Gone, ended or taken by another transaction since.
    if (!AttemptStillHolds(tasks[k], result.attempt, dispositions[raced[k]],
                           archives)) {
      continue;
    }
    SLUICE_RETURN_IF_ERROR(PlanResult(flows, options, result, raced[k],
                                      *std::move(tasks[k]), now, again,
                                      again_plans));
  }
  if (again.empty()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied_again,
                          tx.UpdateTasks(again));
  for (size_t u = 0; u < again.size(); ++u) {
    updates.push_back(std::move(again[u]));
    plans.push_back(std::move(again_plans[u]));
    applied.push_back(applied_again[u]);
  }
  return absl::OkStatus();
}

// Copies of the outputs that complete single-task steps, taken before the
// update (which may move them): applying a completion here then needs no
// read of the output it has just written.
OutputsInHand KeepSingleTaskOutputs(std::span<const TaskUpdate> updates,
                                    std::span<const Plan> plans) {
  OutputsInHand in_hand;
  for (size_t u = 0; u < updates.size(); ++u) {
    const TaskRecord& t = updates[u].task;
    if (plans[u].report == ReportKind::kCompleted &&
        plans[u].step->shape->kind != StepKind::kMap && t.key.task_index == 0) {
      in_hand.emplace(t.key, t.output);
    }
  }
  return in_hand;
}

// tx.UpdateTasks(updates). With `here` and a transaction that offers
// internal::OneTripFinishes, also reads, in the same call, the runs of the
// completions it writes into `ahead`, as ApplyCompletionsHere would read
// them later: locked without waiting, step states without payloads.
absl::StatusOr<std::vector<bool>> UpdateAndReadAhead(
    Transaction& tx, std::span<TaskUpdate> updates, std::span<const Plan> plans,
    bool here, std::optional<RunsReadAhead>& ahead) {
  auto* one_trip =
      here ? dynamic_cast<internal::OneTripFinishes*>(&tx) : nullptr;
  std::vector<RunId> ids;
  if (one_trip != nullptr) {
    for (size_t u = 0; u < updates.size(); ++u) {
      if (plans[u].report == ReportKind::kCompleted) {
        ids.push_back(updates[u].task.key.run_id);
      }
    }
  }
  if (ids.empty()) return tx.UpdateTasks(updates);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  SLUICE_ASSIGN_OR_RETURN(
      internal::OneTripFinishes::Updated updated,
      one_trip->UpdateTasksThenReadRuns(updates, ids, LockMode::kSkipLocked,
                                        Fields::kNoPayloads));
  ahead = RunsReadAhead{std::move(ids), std::move(updated.runs)};
  return std::move(updated.applied);
}

// The writes and plans of `results`, made before their transaction begins
// (so that a backend which serializes writers, SQLite or memory, holds its
// lock only for the writes), when every result carries its claim's record
// (ClaimedRecord), none is a FanOut with children, and every flow is
// cached. Else nullopt, and the transaction plans them.
struct EarlyPlans {
  std::vector<TaskUpdate> updates;
  std::vector<Plan> plans;
};

std::optional<EarlyPlans> PlanBeforeTransaction(
    Engine::Impl& impl, std::span<const TaskResult> results, absl::Time now) {
  EarlyPlans early;
  early.updates.reserve(results.size());
  early.plans.reserve(results.size());
  FlowLookup flows(impl);
  for (size_t i = 0; i < results.size(); ++i) {
    const TaskResult& result = results[i];
    const TaskRecord* claimed = ClaimedRecord(result);
    if (claimed == nullptr || FansOut(result)) return std::nullopt;
    if (!PlanResult(flows, impl.options(), result, i, *claimed, now,
                    early.updates, early.plans)
             .ok()) {
      return std::nullopt;
    }
  }
  return early;
}

// FinishTasks in one transaction. A failed completion write fails it with
// `failed` set; the caller retries without that write.
// With `here` set, completions apply in the same transaction where they
// can (ApplyCompletionsHere); `here` is cleared if that failed, and the
// caller retries without it, so an apply that fails never fails a result.
// `relay` is set when an apply wrote child reports.
struct ApplyHere {
  bool here = false;
  bool relay = false;
};

absl::StatusOr<FinishOutcome> FinishInOneTransaction(
    Engine::Impl& impl, std::span<const TaskResult> results,
    std::span<const TaskKey> keys, std::optional<WriteFailure>& failed,
    std::vector<size_t>& fan_outs, ApplyHere& apply) {
  FinishOutcome outcome;
  outcome.dispositions.assign(results.size(), ResultDisposition::kStale);
  const EngineOptions& options = impl.options();
  absl::Time now = impl.Now();
  std::optional<EarlyPlans> early = PlanBeforeTransaction(impl, results, now);
  // Copied before the transaction where the plans are: a backend that
  // serializes writers then holds its lock for the writes only.
  OutputsInHand in_hand;
  if (early && apply.here) {
    in_hand = KeepSingleTaskOutputs(early->updates, early->plans);
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  std::vector<TaskUpdate> updates;
  std::vector<Plan> plans;
  FlowLookup flows(impl, *tx);
  LateArchives late_archives;
  if (early) {
    updates = std::move(early->updates);
    plans = std::move(early->plans);
  } else {
    updates.reserve(results.size());
    plans.reserve(results.size());
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::optional<TaskRecord>> tasks,
                            ReadUnclaimed(*tx, results, keys));
    for (size_t i = 0; i < results.size(); ++i) {
      const TaskResult& result = results[i];
      if (FansOut(result)) {
        fan_outs.push_back(i);
        continue;
      }
      if (const TaskRecord* claimed = ClaimedRecord(result)) {
        SLUICE_RETURN_IF_ERROR(PlanResult(flows, options, result, i, *claimed,
                                          now, updates, plans));
        continue;
      }
      if (!AttemptStillHolds(tasks[i], result.attempt, outcome.dispositions[i],
                             late_archives)) {
        continue;
      }
      SLUICE_RETURN_IF_ERROR(PlanResult(flows, options, result, i,
                                        *std::move(tasks[i]), now, updates,
                                        plans));
    }
  }

  std::vector<OutboxReport> reports;
  reports.reserve(updates.size());
  std::vector<AttemptRecord> attempts;
  attempts.reserve(updates.size());
  absl::flat_hash_map<std::string, std::vector<VisibilityUpdate>> retries;
  LateArchives archives = std::move(late_archives);
  absl::flat_hash_map<std::string, std::vector<int64_t>> deletes;
  TransactionEffects effects;
  std::vector<size_t> tallied;  // updates the metrics count, after commit
  std::optional<RunsReadAhead> ahead;
  if (!updates.empty()) {
    if (apply.here && !early) in_hand = KeepSingleTaskOutputs(updates, plans);
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<bool> applied,
        UpdateAndReadAhead(*tx, updates, plans, apply.here, ahead));
    SLUICE_RETURN_IF_ERROR(ReplanRaced(*tx, flows, options, results, now,
                                       updates, plans, applied, archives,
                                       outcome.dispositions));
    SLUICE_RETURN_IF_ERROR(
        RunCompletionWrites(*tx, results, plans, applied, failed));
    for (size_t u = 0; u < updates.size(); ++u) {
      if (!applied[u]) continue;  // another transaction got there first
      Plan& plan = plans[u];
      const TaskRecord& t = updates[u].task;
      outcome.dispositions[plan.result] = plan.disposition;
      tallied.push_back(u);
      // A completed task's row holds all its message and its attempt's
      // ledger entry said: the message is deleted and the entry is derived
      // when the ledger is read (ledger.h).
      const bool completed = plan.disposition == ResultDisposition::kCompleted;
      if (!completed) attempts.push_back(std::move(plan.attempt));
      if (plan.archive) {
        (completed ? deletes : archives)[t.queue_name].push_back(t.message_id);
      }
      if (plan.visible_at) {
        // A retry goes to the back of its priority (effect-mq's rule).
        retries[t.queue_name].push_back(
            {t.message_id, *plan.visible_at, /*to_tail=*/true});
        if (*plan.visible_at <= now)
          effects.queues_to_wake.insert(t.queue_name);
      }
      if (plan.report) {
        reports.push_back(OutboxReport{.task = t.key,
                                       .flow_slug = t.flow_slug,
                                       .kind = *plan.report,
                                       .created_at = now});
      }
    }
  }
  for (auto& [queue, updates_for_queue] : retries) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(queue, updates_for_queue));
  }
  for (auto& [queue, ids] : archives) {
    SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(queue, ids, now));
  }
  for (auto& [queue, ids] : deletes) {
    SLUICE_RETURN_IF_ERROR(tx->DeleteMessages(queue, ids));
  }
  if (!attempts.empty()) SLUICE_RETURN_IF_ERROR(tx->AppendAttempts(attempts));
  bool applied_here = false;
  if (!reports.empty() && apply.here) {
    applied_here = true;
    absl::StatusOr<std::vector<OutboxReport>> rest =
        ApplyCompletionsHere(impl, *tx, std::move(reports), in_hand, effects,
                             ahead ? &*ahead : nullptr);
    if (!rest.ok()) {
      apply.here = false;
      return rest.status();
    }
    reports = *std::move(rest);
  }
  if (!reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(outcome.report_ids, tx->AppendReports(reports));
  }
  const bool relay = effects.child_reports;
  absl::Status committed = impl.Commit(*tx, std::move(effects));
  if (applied_here && committed.code() == absl::StatusCode::kInternal) {
    // A counter the apply moved was not what it expected, checked as the
    // transaction commits (internal::CheckedCounterMoves): as for an apply
    // that fails before, the results are recorded again without it.
    apply.here = false;
  }
  SLUICE_RETURN_IF_ERROR(committed);
  apply.relay = relay;
  StepTally tally;
  for (size_t u : tallied) Tally(plans[u], updates[u].task, now, tally);
  impl.metrics().AddTasks(tally);
  return outcome;
}

}  // namespace

absl::StatusOr<FinishOutcome> Engine::FinishTasks(
    std::span<const TaskResult> results, FinishOptions options) {
  std::vector<TaskKey> keys;
  keys.reserve(results.size());
  for (const TaskResult& r : results) {
    if (r.attempt < 1) {
      return absl::InvalidArgumentError(
          StrCat("FinishTasks: attempt ", r.attempt, " is invalid (>= 1)"));
    }
    keys.push_back(r.key);
  }
  SLUICE_RETURN_IF_ERROR(ValidateKeys(keys, "FinishTasks"));
  if (results.empty()) return FinishOutcome{};
  // A failed completion write rolls back its whole transaction (on Postgres
  // the server has aborted it anyway); the batch is then stored again with
  // that attempt failed by the write's status. Each round drops one write,
  // so this ends.
  std::vector<TaskResult> adjusted;
  std::span<const TaskResult> current = results;
  ApplyHere apply{.here = options.apply_completions};
  while (true) {
    std::optional<WriteFailure> failed;
    std::vector<size_t> fan_outs;
    const bool applying = apply.here;
    absl::StatusOr<FinishOutcome> outcome =
        FinishInOneTransaction(*impl_, current, keys, failed, fan_outs, apply);
    if (applying && !apply.here) {
      impl_->Log(LogLevel::kWarning,
                 StrCat("applying completions while recording them failed (",
                        outcome.status().ToString(),
                        "); recording them for the outbox instead"));
      continue;
    }
    if (apply.relay) RelayAfterApply();
    if (!failed) {
      if (!outcome.ok()) return outcome;
      // Each FanOut is acked after the batch, in its own transaction.
      for (size_t i : fan_outs) {
        SLUICE_RETURN_IF_ERROR(FinishFanOut(current[i], i, *outcome));
      }
      return outcome;
    }
    if (adjusted.empty()) adjusted.assign(results.begin(), results.end());
    TaskResult& result = adjusted[failed->result];
    result.outcome = CompletionWriteFailed(failed->status);
    result.completion_write = nullptr;
    current = adjusted;
  }
}

absl::Status Engine::FinishFanOut(const TaskResult& result, size_t index,
                                  FinishOutcome& outcome) {
  SLUICE_ASSIGN_OR_RETURN(
      FanOutAck ack,
      AckFanOut(*impl_, result.key, result.attempt, result.outcome->fan_out()));
  if (ack.invalid.ok() && !ack.cancel_requested) {
    outcome.dispositions[index] = ack.disposition;
    outcome.report_ids.insert(outcome.report_ids.end(), ack.report_ids.begin(),
                              ack.report_ids.end());
    if (absl::Status s = CreateRemoteChildren(*impl_, ack.remote); !s.ok()) {
      impl_->Log(LogLevel::kWarning,
                 StrCat("fan-out: creating children in another store failed (",
                        s.ToString(), "); the sweeper will create them"));
    }
    return absl::OkStatus();
  }
  // Retrying cannot fix a FanOut the engine refuses: fail the attempt. A
  // run that asked the task to stop gets it cancelled (PlanFailure).
  TaskResult failed{
      result.key, result.attempt,
      ack.cancel_requested
          ? absl::CancelledError(
                "cancelled: its run asked it to stop before its fan-out "
                "was recorded")
          : NonRetryable(ToStd(ack.invalid.message()))};
  SLUICE_ASSIGN_OR_RETURN(FinishOutcome got,
                          FinishTasks(std::span(&failed, 1)));
  outcome.dispositions[index] = got.dispositions[0];
  outcome.report_ids.insert(outcome.report_ids.end(), got.report_ids.begin(),
                            got.report_ids.end());
  return absl::OkStatus();
}

}  // namespace sluice
