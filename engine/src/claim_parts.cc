#include "claim_parts.h"

#include <memory>
#include <string>
#include <utility>

#include "run_options.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::claim_internal {
namespace {

using internal::MessagesWithTasks;
using internal::OneTripClaims;

// What a claim at `now` by `worker_id` wrote over the queued task `t`, as
// attempt `attempt` (the claim's update sets exactly these columns).
std::shared_ptr<const TaskRecord> AsClaimed(TaskRecord&& t, int attempt,
                                            absl::Time now,
                                            const LeaseTimes& lease,
                                            std::string_view worker_id) {
  t.status = TaskStatus::kStarted;
  t.attempts = attempt;
  t.started_at = now;
  t.finished_at.reset();
  t.stall_at = lease.stall_at;
  t.worker_id = worker_id;
  t.output.reset();
  t.cancel_requested = false;
  return std::make_shared<const TaskRecord>(std::move(t));
}

}  // namespace

// Development recompilation fences off workers that deployed an older
// generation of a flow: their handlers are for a shape that is gone. Each
// flow's deploy lock is held to the claim's commit: on Postgres each
// statement reads the latest commits, so without it a recompile and a
// new run committed between this check and the read would be claimed by
// the old generation. Slug order, so two claims never wait on each other.
absl::Status CheckGenerations(Transaction& tx, const ClaimRequest& request) {
  std::vector<const FlowGeneration*> flows;
  for (const FlowGeneration& mine : request.generations) flows.push_back(&mine);
  std::sort(flows.begin(), flows.end(),
            [](const FlowGeneration* a, const FlowGeneration* b) {
              return a->flow_slug < b->flow_slug;
            });
  for (const FlowGeneration* flow : flows) {
    SLUICE_RETURN_IF_ERROR(tx.LockFlowSlug(flow->flow_slug));
  }
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

// How long a read hides messages: the lease of the served steps on this
// queue when they all share one timeout (then a claimed message needs no
// second write), else just the claim grace until each claim sets its own.
absl::StatusOr<absl::Duration> ReadVisibility(FlowLookup& flows,
                                              const ClaimRequest& request,
                                              const EngineOptions& options) {
  std::optional<absl::Duration> common;
  bool mixed = false;
  SLUICE_RETURN_IF_ERROR(ForEachLeasedStep(
      flows, request, [&](std::string_view, int, const CompiledStep& step) {
        mixed = mixed || (common && *common != step.timeout);
        common = step.timeout;
      }));
  if (mixed) return options.claim_grace;
  return common ? *common + options.claim_grace : options.claim_grace;
}

TaskUpdate ClaimUpdateOf(const TaskRecord& t) {
  TaskUpdate u;
  u.expected_status = t.status;
  u.expected_attempts = t.attempts;
  u.skip_if_locked = true;
  u.task.key = t.key;
  u.task.requeued_count = t.requeued_count;
  u.task.budget_start = t.budget_start;
  u.task.message_id = t.message_id;
  return u;
}

// The update that fails a queued task whose row can't be read, for good:
// no attempt is consumed and no policy applies, since no retry could read it.
TaskUpdate FailUnreadable(const TaskRecord& t, const CompiledStep& step,
                          absl::Time now) {
  TaskUpdate u = ClaimUpdateOf(t);
  u.task.status = TaskStatus::kFailed;
  u.task.attempts = t.attempts;
  u.task.error = UnreadableError(StrCat("step \"", step.shape->slug, "\" task ",
                                        t.key.task_index, ": ", t.unreadable));
  u.task.finished_at = now;
  u.task.worker_id = t.worker_id;
  return u;
}

// Logs an unreadable task `t` (as read) that the claim failed with
// `error`, its message `message_id` archived, and reports it, so that its
// run fails, if the row names a run.
void NoteUnreadable(Engine::Impl& impl, const ClaimRequest& request,
                    int64_t message_id, const TaskRecord& t,
                    std::string_view error, absl::Time now,
                    std::vector<OutboxReport>& reports) {
  if (!t.key.run_id.IsNil()) {
    reports.push_back(OutboxReport{.task = t.key,
                                   .flow_slug = t.flow_slug,
                                   .kind = ReportKind::kUnreadable,
                                   .created_at = now});
  }
  impl.Log(
      LogLevel::kWarning,
      StrCat("claim on queue \"", request.queue, "\": message ", message_id,
             ": ", error, "; failed its task and archived the message"));
}

// Applies the reports a claim committed (unreadable tasks, timed out
// waits): the push path; the reconcile path catches them if this fails.
void PushReports(Engine& engine, std::span<const int64_t> report_ids) {
  if (absl::Status applied = engine.ApplyReports(report_ids); !applied.ok()) {
    engine.impl().Log(
        LogLevel::kWarning,
        StrCat("claim: applying reports of unreadable tasks and timed "
               "out waits failed (",
               applied.ToString(), "); the sweeper will apply them"));
  }
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

// The claim's read, in one call where the transaction offers it.
absl::StatusOr<MessagesWithTasks> ReadWithTasks(Transaction& tx,
                                                const ClaimRequest& request,
                                                absl::Time now,
                                                absl::Time read_until) {
  if (auto* one_trip = dynamic_cast<OneTripClaims*>(&tx)) {
    return one_trip->ReadMessagesWithTasks(request.queue, now, request.limit,
                                           read_until, Fields::kAll);
  }
  MessagesWithTasks read;
  SLUICE_ASSIGN_OR_RETURN(read.messages,
                          tx.ReadMessages(request.queue, now, request.limit,
                                          read_until, Fields::kNoPayloads));
  if (read.messages.empty()) return read;
  std::vector<int64_t> ids;
  ids.reserve(read.messages.size());
  for (const MessageRecord& m : read.messages) ids.push_back(m.message_id);
  SLUICE_ASSIGN_OR_RETURN(
      read.tasks, tx.GetTasksByMessage(request.queue, ids, Fields::kAll));
  return read;
}

// The claim's updates and commit, in one call where the transaction offers
// it. The claim publishes no events and wakes nobody, so it needs nothing
// of Impl::Commit but the commit.
absl::StatusOr<std::vector<bool>> UpdateAndCommit(
    Transaction& tx, std::span<TaskUpdate> updates) {
  if (auto* one_trip = dynamic_cast<OneTripClaims*>(&tx)) {
    return one_trip->UpdateTasksAndCommit(updates);
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied, tx.UpdateTasks(updates));
  SLUICE_RETURN_IF_ERROR(tx.Commit());
  return applied;
}

ClaimTerms TermsOf(const CompiledStep& step, const TaskRecord& t,
                   absl::Time now, const EngineOptions& options) {
  TaskPolicy policy = EffectivePolicy(step, t);
  LeaseTimes lease = ComputeLease(policy.timeout, now, options);
  return {std::move(policy), lease};
}

// The handler's view of a task whose claim at `now` by `worker_id` applied,
// as attempt `attempt`. Consumes `t`, the task as the claim read it.
ClaimedTask ClaimedFrom(TaskRecord& t, const CompiledStep& step, int attempt,
                        const ClaimTerms& terms, absl::Time now,
                        std::string_view worker_id) {
  ClaimedTask claimed{
      .key = t.key,
      .flow_slug = t.flow_slug,
      .step_slug = step.shape->slug,
      .attempt = attempt,
      // The attempt number the budget ends at, so that a handler can
      // compare it with `attempt` however often the task was released or
      // its run retried.
      .max_attempts = t.budget_start + terms.policy.max_attempts,
      .input = std::move(t.input),
      .deadline = terms.lease.deadline,
      .traceparent = TraceparentOf(t.options),
  };
  claimed.record =
      AsClaimed(std::move(t), attempt, now, terms.lease, worker_id);
  return claimed;
}

// After a claim committed in one trip: the messages of tasks it lost to
// another transaction become visible again soon (the claim had hidden them
// until its lease's end), so whoever comes next sees each task as it ends
// up; and an idle worker learns when to look again. If this fails, those
// messages reappear when the lease would have ended.
void RevealLost(Engine::Impl& impl, const ClaimRequest& request,
                std::vector<VisibilityUpdate> lost, absl::Time now,
                std::optional<absl::Time>* next_visible_at) {
  absl::Status status = [&]() -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
    if (!lost.empty()) {
      SLUICE_RETURN_IF_ERROR(tx->SetVisibility(request.queue, lost));
    }
    if (next_visible_at != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(*next_visible_at,
                              tx->NextVisibleAt(request.queue, now));
    }
    return impl.Commit(*tx, {});
  }();
  if (!status.ok()) {
    impl.Log(
        LogLevel::kWarning,
        StrCat("claim on queue \"", request.queue, "\": making ", lost.size(),
               " messages of tasks another transaction held visible "
               "again failed (",
               status.ToString(), "); they reappear when their lease ends"));
  }
}

}  // namespace sluice::claim_internal
