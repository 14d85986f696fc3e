// Engine::Claim: read a batch, classify all of it, then claim.
#include <string>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "queue_name.h"
#include "run_options.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "wait_steps.h"

namespace sluice {
namespace {

constexpr int kMaxClaimBatch = 1000;

// kUnreadable: a queued task whose stored row can't be read (its input, or
// its status, which then reads as queued). It is failed instead of handed
// to a handler, its message archived, and its run failed by report.
// kWaitTimeout: a queued Wait step's task, whose message became visible
// because its timeout passed: the engine applies the timeout policy; no
// handler runs, so any worker of the queue may do it.
enum class Verdict {
  kClaim,
  kDuplicate,
  kArchive,
  kUnreadable,
  kWaitTimeout,
  kFatal
};

struct Classified {
  Verdict verdict = Verdict::kFatal;
  const CompiledStep* step = nullptr;
  std::string problem;  // for kFatal: names ids, flows and steps, no bodies
};

absl::Status ValidateClaimRequest(const ClaimRequest& request) {
  SLUICE_RETURN_IF_ERROR(queue_name::Validate(request.queue));
  if (request.limit < 1 || request.limit > kMaxClaimBatch) {
    return absl::InvalidArgumentError(StrCat(
        "claim limit ", request.limit, " is out of range 1..", kMaxClaimBatch));
  }
  if (request.worker_id.empty()) {
    return absl::InvalidArgumentError("claim needs a worker_id");
  }
  return absl::OkStatus();
}

// How long a read hides messages: the lease of the served steps on this
// queue when they all share one timeout (then a claimed message needs no
// second write), else just the claim grace until each claim sets its own.
absl::StatusOr<absl::Duration> ReadVisibility(FlowLookup& flows,
                                              const ClaimRequest& request,
                                              const EngineOptions& options) {
  std::optional<absl::Duration> common;
  for (const auto& [slug, steps] : request.served.flows()) {
    absl::StatusOr<const CompiledFlow*> flow = flows.Get(slug);
    if (!flow.ok()) {
      if (flow.status().code() == absl::StatusCode::kNotFound) continue;
      return flow.status();
    }
    for (size_t i = 0; i < steps.size() && i < (*flow)->steps().size(); ++i) {
      const CompiledStep& step = (*flow)->step(static_cast<int>(i));
      if (!steps[i] || step.shape->queue_name != request.queue ||
          step.is_wait()) {
        continue;  // a Wait step's task is never leased
      }
      if (common && *common != step.timeout) return options.claim_grace;
      common = step.timeout;
    }
  }
  return common ? *common + options.claim_grace : options.claim_grace;
}

// The update that fails a queued task whose row can't be read, for good:
// no attempt is consumed and no policy applies, since no retry could read it.
TaskUpdate FailUnreadable(const TaskRecord& t, const CompiledStep& step,
                          absl::Time now) {
  TaskUpdate u;
  u.expected_status = t.status;
  u.expected_attempts = t.attempts;
  u.skip_if_locked = true;
  u.task.key = t.key;
  u.task.status = TaskStatus::kFailed;
  u.task.attempts = t.attempts;
  u.task.error = UnreadableError(StrCat("step \"", step.shape->slug, "\" task ",
                                        t.key.task_index, ": ", t.unreadable));
  u.task.finished_at = now;
  u.task.requeued_count = t.requeued_count;
  u.task.worker_id = t.worker_id;
  u.task.budget_start = t.budget_start;
  u.task.message_id = t.message_id;
  return u;
}

// Development recompilation fences off workers that deployed an older
// generation of a flow: their handlers are for a shape that is gone.
absl::Status CheckGenerations(Transaction& tx, const ClaimRequest& request) {
  for (const FlowGeneration& mine : request.generations) {
    SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> stored,
                            tx.GetFlow(mine.flow_slug));
    if (!stored || stored->generation == mine.generation) continue;
    return absl::FailedPreconditionError(StrCat(
        "worker ", request.worker_id, " on queue \"", request.queue,
        "\": flow \"", mine.flow_slug, "\" was recompiled (generation ",
        stored->generation, ") after this worker deployed generation ",
        mine.generation,
        "; restart the worker with the new definition. Nothing was claimed "
        "and the batch was left visible"));
  }
  return absl::OkStatus();
}

void CountClaimed(MetricsRegistry& metrics, std::string_view queue,
                  const std::vector<ClaimedTask>& claimed) {
  if (claimed.empty()) return;
  StepTally tally;
  for (const ClaimedTask& task : claimed) {
    ++tally.For(task.flow_slug, task.step_slug).claimed;
  }
  metrics.AddTasks(tally);
  metrics.CountClaim(queue, static_cast<int64_t>(claimed.size()));
}

}  // namespace

absl::StatusOr<std::vector<ClaimedTask>> Engine::Claim(
    const ClaimRequest& request) {
  SLUICE_RETURN_IF_ERROR(ValidateClaimRequest(request));
  const EngineOptions& options = impl_->options();
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  if (options.development_recompile) {
    SLUICE_RETURN_IF_ERROR(CheckGenerations(*tx, request));
  }
  absl::Time now = impl_->Now();
  FlowLookup flows(*impl_, *tx);
  SLUICE_ASSIGN_OR_RETURN(absl::Duration read_for,
                          ReadVisibility(flows, request, options));
  absl::Time read_until = now + read_for;
  SLUICE_ASSIGN_OR_RETURN(std::vector<MessageRecord> messages,
                          tx->ReadMessages(request.queue, now, request.limit,
                                           read_until, Fields::kNoPayloads));
  if (messages.empty()) return std::vector<ClaimedTask>();
  std::vector<int64_t> ids;
  ids.reserve(messages.size());
  for (const MessageRecord& m : messages) ids.push_back(m.message_id);
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<TaskRecord>> tasks,
      tx->GetTasksByMessage(request.queue, ids, Fields::kAll));

  // Classify the whole batch before changing anything.
  std::vector<Classified> verdicts(ids.size());
  int fatal = 0;
  std::string first_problem;
  for (size_t i = 0; i < ids.size(); ++i) {
    Classified& c = verdicts[i];
    if (!tasks[i]) {
      c.problem = StrCat("message ", ids[i], " has no task");
    } else {
      const TaskRecord& t = *tasks[i];
      absl::StatusOr<const CompiledFlow*> flow = flows.Get(t.flow_slug);
      if (!flow.ok()) {
        if (flow.status().code() != absl::StatusCode::kNotFound) {
          return flow.status();
        }
        c.problem = StrCat("message ", ids[i], " belongs to flow \"",
                           t.flow_slug, "\", which is not deployed");
      } else if (t.key.step_index >= (*flow)->step_count()) {
        c.problem = StrCat("message ", ids[i], " names step ", t.key.step_index,
                           " of flow \"", t.flow_slug, "\", which has only ",
                           (*flow)->step_count(), " steps");
      } else {
        c.step = &(*flow)->step(t.key.step_index);
        if (t.queue_name != request.queue ||
            c.step->shape->queue_name != request.queue) {
          // The task's snapshot names its queue; a definition that puts the
          // step elsewhere is just as wrong for this worker.
          c.problem = StrCat(
              "message ", ids[i], " of flow \"", t.flow_slug, "\" step \"",
              c.step->shape->slug, "\" belongs on queue \"",
              t.queue_name != request.queue ? t.queue_name
                                            : c.step->shape->queue_name,
              "\"");
        } else if (t.status == TaskStatus::kQueued && t.unreadable.empty() &&
                   c.step->is_wait()) {
          c.verdict = Verdict::kWaitTimeout;
        } else if (!request.served.Contains(t.flow_slug, t.key.step_index)) {
          c.problem = StrCat("message ", ids[i], " is for flow \"", t.flow_slug,
                             "\" step \"", c.step->shape->slug,
                             "\", which this worker does not serve");
        } else if (t.status == TaskStatus::kQueued && !t.unreadable.empty()) {
          c.verdict = Verdict::kUnreadable;
        } else if (t.status == TaskStatus::kQueued) {
          c.verdict = Verdict::kClaim;
        } else if (t.status == TaskStatus::kStarted) {
          c.verdict = Verdict::kDuplicate;
        } else {
          c.verdict = Verdict::kArchive;
        }
      }
    }
    if (c.verdict == Verdict::kFatal) {
      if (fatal++ == 0) first_problem = c.problem;
    }
  }
  if (fatal > 0) {
    // Dropping the transaction undoes the read: the batch stays visible.
    return absl::FailedPreconditionError(StrCat(
        "worker ", request.worker_id, " on queue \"", request.queue,
        "\": ", fatal, " of ", ids.size(), " messages can't be claimed (",
        first_problem, "); the batch was left visible and nothing claimed"));
  }

  std::vector<TaskUpdate> updates;
  std::vector<size_t> update_index;
  std::vector<VisibilityUpdate> visibility;
  std::vector<int64_t> archive;
  std::vector<OutboxReport> reports;
  std::vector<AttemptRecord> wait_attempts;  // one per kWaitTimeout update
  std::vector<ReportKind> wait_reports;
  updates.reserve(ids.size());
  update_index.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TaskRecord& t = *tasks[i];
    switch (verdicts[i].verdict) {
      case Verdict::kClaim: {
        LeaseTimes lease = ComputeLease(
            EffectivePolicy(*verdicts[i].step, t).timeout, now, options);
        TaskUpdate u;
        u.expected_status = t.status;
        u.expected_attempts = t.attempts;
        u.skip_if_locked = true;
        u.task.key = t.key;
        u.task.status = TaskStatus::kStarted;
        u.task.attempts = t.attempts + 1;
        u.task.error = t.error;
        u.task.started_at = now;
        u.task.stall_at = lease.stall_at;
        u.task.requeued_count = t.requeued_count;
        u.task.worker_id = request.worker_id;
        u.task.budget_start = t.budget_start;
        u.task.message_id = t.message_id;
        updates.push_back(std::move(u));
        update_index.push_back(i);
        break;
      }
      case Verdict::kDuplicate:
        // Hide it until stall recovery could take the task back; re-reading
        // it sooner would only find the same duplicate.
        visibility.push_back({ids[i], std::max(t.stall_at.value_or(now),
                                               now + options.claim_grace)});
        break;
      case Verdict::kArchive:
        archive.push_back(ids[i]);
        break;
      case Verdict::kUnreadable:
        // Out of the way whatever happens to the update: the message is
        // archived, and the report fails the run (if the row names one).
        archive.push_back(ids[i]);
        updates.push_back(FailUnreadable(t, *verdicts[i].step, now));
        update_index.push_back(i);
        if (!t.key.run_id.IsNil()) {
          reports.push_back(OutboxReport{.task = t.key,
                                         .flow_slug = t.flow_slug,
                                         .kind = ReportKind::kUnreadable,
                                         .created_at = now});
        }
        impl_->Log(LogLevel::kWarning,
                   StrCat("claim on queue \"", request.queue, "\": message ",
                          ids[i], ": ", updates.back().task.error,
                          "; failed its task and archived the message"));
        break;
      case Verdict::kWaitTimeout: {
        WaitEnd end =
            EndWait(t, *verdicts[i].step, std::nullopt, request.worker_id, now);
        end.update.skip_if_locked = true;  // a claim never waits on a task
        updates.push_back(std::move(end.update));
        update_index.push_back(i);
        wait_attempts.push_back(std::move(end.attempt));
        wait_reports.push_back(end.report);
        break;
      }
      case Verdict::kFatal:
        break;
    }
  }
  std::vector<ClaimedTask> claimed;
  std::vector<AttemptRecord> timed_out;  // ledger entries of ended waits
  if (!updates.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            tx->UpdateTasks(updates));
    claimed.reserve(updates.size());
    size_t next_wait = 0;
    for (size_t u = 0; u < updates.size(); ++u) {
      Verdict verdict = verdicts[update_index[u]].verdict;
      if (verdict == Verdict::kUnreadable) continue;
      if (verdict == Verdict::kWaitTimeout) {
        size_t w = next_wait++;
        if (!applied[u]) {
          // A signal is ending it; look again soon to archive the message.
          visibility.push_back(
              {ids[update_index[u]], now + options.claim_grace});
          continue;
        }
        const TaskRecord& ended = updates[u].task;
        archive.push_back(ids[update_index[u]]);
        timed_out.push_back(std::move(wait_attempts[w]));
        reports.push_back(OutboxReport{.task = ended.key,
                                       .flow_slug = ended.flow_slug,
                                       .kind = wait_reports[w],
                                       .created_at = now});
        continue;
      }
      if (!applied[u]) {
        // Changed since the read, or held by another transaction (one that
        // may be ending the task): not ours. Let the message be read again
        // soon, so whoever comes next sees the task as it ends up.
        visibility.push_back({ids[update_index[u]], now + options.claim_grace});
        continue;
      }
      size_t i = update_index[u];
      TaskRecord& t = *tasks[i];
      const CompiledStep& step = *verdicts[i].step;
      TaskPolicy policy = EffectivePolicy(step, t);
      LeaseTimes lease = ComputeLease(policy.timeout, now, options);
      if (lease.visible_until != read_until) {
        visibility.push_back({ids[i], lease.visible_until});
      }
      claimed.push_back(ClaimedTask{
          .key = t.key,
          .flow_slug = t.flow_slug,
          .step_slug = step.shape->slug,
          .attempt = updates[u].task.attempts,
          // The attempt number the budget ends at, so that a handler can
          // compare it with `attempt` however often the task was released
          // or its run retried.
          .max_attempts = t.budget_start + policy.max_attempts,
          .input = std::move(t.input),
          .deadline = lease.deadline,
          .traceparent = TraceparentOf(t.options),
      });
    }
  }
  if (!visibility.empty()) {
    SLUICE_RETURN_IF_ERROR(tx->SetVisibility(request.queue, visibility));
  }
  if (!archive.empty()) {
    SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(request.queue, archive, now));
  }
  if (!timed_out.empty()) SLUICE_RETURN_IF_ERROR(tx->AppendAttempts(timed_out));
  std::vector<int64_t> report_ids;
  if (!reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(report_ids, tx->AppendReports(reports));
  }
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  CountClaimed(impl_->metrics(), request.queue, claimed);
  // The push path; the reconcile path catches them if this fails.
  if (absl::Status applied = ApplyReports(report_ids); !applied.ok()) {
    impl_->Log(LogLevel::kWarning,
               StrCat("claim: applying reports of unreadable tasks and timed "
                      "out waits failed (",
                      applied.ToString(), "); the sweeper will apply them"));
  }
  return claimed;
}

absl::StatusOr<ClaimBatch> Engine::ClaimWithHint(const ClaimRequest& request) {
  ClaimBatch batch;
  SLUICE_ASSIGN_OR_RETURN(batch.tasks, Claim(request));
  if (!batch.tasks.empty()) return batch;
  // Only an idle claim pays for the hint.
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(batch.next_visible_at,
                          tx->NextVisibleAt(request.queue, impl_->Now()));
  return batch;
}

}  // namespace sluice
