// Engine::Claim: read a batch, classify all of it, then claim.
#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "queue_name.h"
#include "run_options.h"
#include "sluice/engine.h"
#include "sluice/internal/one_trip_claims.h"
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

// Calls fn(flow slug, step index, step) for each step the request serves
// on its queue whose tasks are leased (not Wait steps), in deployed flows.
template <typename Fn>
absl::Status ForEachLeasedStep(FlowLookup& flows, const ClaimRequest& request,
                               Fn fn) {
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
      fn(slug, static_cast<int>(i), step);
    }
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

using internal::MessagesWithTasks;
using internal::OneTripClaims;

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

// A claimed task's policy and lease, computed once per task and claim.
struct ClaimTerms {
  TaskPolicy policy;
  LeaseTimes lease;
};

ClaimTerms TermsOf(const CompiledStep& step, const TaskRecord& t,
                   absl::Time now, const EngineOptions& options) {
  TaskPolicy policy = EffectivePolicy(step, t);
  LeaseTimes lease = ComputeLease(policy.timeout, now, options);
  return {std::move(policy), lease};
}

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

// The steps a claim on the server may take tasks of, with their leases at
// `now`, and each one's compiled step beside it.
struct ServerSteps {
  std::vector<internal::ClaimableStep> claimable;
  std::vector<const CompiledStep*> compiled;

  const CompiledStep* Find(std::string_view flow_slug, int step_index) const {
    for (size_t i = 0; i < claimable.size(); ++i) {
      if (claimable[i].step_index == step_index &&
          claimable[i].flow_slug == flow_slug) {
        return compiled[i];
      }
    }
    return nullptr;
  }
};

absl::StatusOr<ServerSteps> ServerStepsOf(FlowLookup& flows,
                                          const ClaimRequest& request,
                                          absl::Time now,
                                          const EngineOptions& options) {
  ServerSteps steps;
  SLUICE_RETURN_IF_ERROR(ForEachLeasedStep(
      flows, request,
      [&](std::string_view slug, int index, const CompiledStep& step) {
        LeaseTimes lease = ComputeLease(step.timeout, now, options);
        steps.claimable.push_back({.flow_slug = slug,
                                   .step_index = index,
                                   .stall_at = lease.stall_at,
                                   .visible_until = lease.visible_until});
        steps.compiled.push_back(&step);
      }));
  return steps;
}

// Tasks a claim on the server took whose stored rows can't be read:
// `updates` fail them for good as the engine's claim does
// (FailUnreadable), giving back the attempt the server counted; their
// messages `archive` are archived and `reports` fail their runs. If this
// fails, stall recovery takes the tasks back and a later claim fails them.
void FailUnreadableClaims(Engine& engine, const ClaimRequest& request,
                          std::vector<TaskUpdate> updates,
                          std::vector<int64_t> archive,
                          std::vector<OutboxReport> reports, absl::Time now) {
  Engine::Impl& impl = engine.impl();
  absl::StatusOr<std::vector<int64_t>> report_ids =
      [&]() -> absl::StatusOr<std::vector<int64_t>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
    SLUICE_RETURN_IF_ERROR(tx->UpdateTasks(updates).status());
    SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(request.queue, archive, now));
    std::vector<int64_t> ids;
    if (!reports.empty()) {
      SLUICE_ASSIGN_OR_RETURN(ids, tx->AppendReports(reports));
    }
    SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, {}));
    return ids;
  }();
  if (!report_ids.ok()) {
    impl.Log(LogLevel::kWarning,
             StrCat("claim on queue \"", request.queue, "\": failing ",
                    updates.size(), " unreadable tasks failed (",
                    report_ids.status().ToString(),
                    "); stall recovery takes them back"));
    return;
  }
  PushReports(engine, *report_ids);
}

// The whole claim in one call to the transaction (one round trip on a
// server), when every message it reads is a queued task of a step in
// `steps`; nullopt, with the transaction over and nothing changed, when
// one is not, so the engine's claim must decide.
absl::StatusOr<std::optional<std::vector<ClaimedTask>>> ClaimOnServer(
    Engine& engine, OneTripClaims& tx, const ServerSteps& steps,
    const ClaimRequest& request, absl::Time now,
    std::optional<absl::Time>* next_visible_at) {
  Engine::Impl& impl = engine.impl();
  const EngineOptions& options = impl.options();
  SLUICE_ASSIGN_OR_RETURN(
      internal::ServerClaimed read,
      tx.ClaimAndCommit({.queue = request.queue,
                         .now = now,
                         .limit = request.limit,
                         .worker_id = request.worker_id,
                         .steps = steps.claimable,
                         .lost_visible_until = now + options.claim_grace,
                         .read_next_visible = next_visible_at != nullptr}));
  if (!read.plain) return std::nullopt;
  std::vector<ClaimedTask> claimed;
  claimed.reserve(read.tasks.size());
  std::vector<TaskUpdate> unreadable;
  std::vector<int64_t> archive;
  std::vector<OutboxReport> reports;
  for (size_t i = 0; i < read.tasks.size(); ++i) {
    if (!read.claimed[i]) continue;
    TaskRecord& t = read.tasks[i];
    const CompiledStep* step = steps.Find(t.flow_slug, t.key.step_index);
    if (step == nullptr) {
      return absl::InternalError(StrCat(
          "claim on queue \"", request.queue, "\": the server claimed message ",
          read.message_ids[i], " of a step this claim did not offer"));
    }
    if (!t.unreadable.empty()) {
      TaskUpdate u = FailUnreadable(t, *step, now);
      u.expected_status = TaskStatus::kStarted;
      u.expected_attempts = t.attempts + 1;
      u.skip_if_locked = false;
      NoteUnreadable(impl, request, read.message_ids[i], t, u.task.error, now,
                     reports);
      unreadable.push_back(std::move(u));
      archive.push_back(read.message_ids[i]);
      continue;
    }
    claimed.push_back(ClaimedFrom(t, *step, t.attempts + 1,
                                  TermsOf(*step, t, now, options), now,
                                  request.worker_id));
  }
  CountClaimed(impl.metrics(), request.queue, claimed);
  if (!unreadable.empty()) {
    FailUnreadableClaims(engine, request, std::move(unreadable),
                         std::move(archive), std::move(reports), now);
  }
  if (claimed.empty() && next_visible_at != nullptr) {
    *next_visible_at = read.next_visible_at;
  }
  return claimed;
}

// The engine's claim: read a batch, classify all of it, then claim.
absl::StatusOr<std::vector<ClaimedTask>> ClaimInEngine(
    Engine& engine, const ClaimRequest& request,
    std::unique_ptr<Transaction> tx,
    std::optional<absl::Time>* next_visible_at) {
  Engine::Impl& impl = engine.impl();
  const EngineOptions& options = impl.options();
  absl::Time now = impl.Now();
  FlowLookup flows(impl, *tx);
  SLUICE_ASSIGN_OR_RETURN(absl::Duration read_for,
                          ReadVisibility(flows, request, options));
  absl::Time read_until = now + read_for;
  // One call, so a server backend reads messages and tasks in one trip.
  SLUICE_ASSIGN_OR_RETURN(MessagesWithTasks read,
                          ReadWithTasks(*tx, request, now, read_until));
  if (read.messages.empty()) {
    if (next_visible_at != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(*next_visible_at,
                              tx->NextVisibleAt(request.queue, now));
    }
    return std::vector<ClaimedTask>();
  }
  std::vector<int64_t> ids;
  ids.reserve(read.messages.size());
  for (const MessageRecord& m : read.messages) ids.push_back(m.message_id);
  std::vector<std::optional<TaskRecord>>& tasks = read.tasks;

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
        TaskUpdate& u = updates.emplace_back();  // in place: no record move
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
        NoteUnreadable(impl, request, ids[i], t, updates.back().task.error, now,
                       reports);
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
  // Only claims (besides duplicates and archives): which of them apply
  // changes nothing else this transaction writes, so the updates and COMMIT
  // go to the backend in one call (one round trip on a server), and the
  // few lost to another transaction are dealt with after (RevealLost).
  const bool one_trip =
      !updates.empty() &&
      std::all_of(update_index.begin(), update_index.end(), [&](size_t i) {
        return verdicts[i].verdict == Verdict::kClaim;
      });
  if (one_trip) {
    std::vector<ClaimTerms> terms;
    terms.reserve(update_index.size());
    for (size_t i : update_index) {
      terms.push_back(TermsOf(*verdicts[i].step, *tasks[i], now, options));
      if (terms.back().lease.visible_until != read_until) {
        visibility.push_back({ids[i], terms.back().lease.visible_until});
      }
    }
    if (!visibility.empty()) {
      SLUICE_RETURN_IF_ERROR(tx->SetVisibility(request.queue, visibility));
    }
    if (!archive.empty()) {
      SLUICE_RETURN_IF_ERROR(tx->ArchiveMessages(request.queue, archive, now));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            UpdateAndCommit(*tx, updates));
    std::vector<VisibilityUpdate> lost;
    claimed.reserve(updates.size());
    for (size_t u = 0; u < updates.size(); ++u) {
      size_t i = update_index[u];
      if (!applied[u]) {
        lost.push_back({ids[i], now + options.claim_grace});
        continue;
      }
      claimed.push_back(ClaimedFrom(*tasks[i], *verdicts[i].step,
                                    updates[u].task.attempts, terms[u], now,
                                    request.worker_id));
    }
    CountClaimed(impl.metrics(), request.queue, claimed);
    bool want_hint = claimed.empty() && next_visible_at != nullptr;
    if (!lost.empty() || want_hint) {
      RevealLost(impl, request, std::move(lost), now,
                 want_hint ? next_visible_at : nullptr);
    }
    return claimed;
  }
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
      ClaimTerms terms = TermsOf(*verdicts[i].step, *tasks[i], now, options);
      if (terms.lease.visible_until != read_until) {
        visibility.push_back({ids[i], terms.lease.visible_until});
      }
      claimed.push_back(ClaimedFrom(*tasks[i], *verdicts[i].step,
                                    updates[u].task.attempts, terms, now,
                                    request.worker_id));
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
  if (claimed.empty() && next_visible_at != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(*next_visible_at,
                            tx->NextVisibleAt(request.queue, now));
  }
  SLUICE_RETURN_IF_ERROR(impl.Commit(*tx, {}));
  CountClaimed(impl.metrics(), request.queue, claimed);
  PushReports(engine, report_ids);
  return claimed;
}

// Engine::Claim; when it takes nothing and `next_visible_at` is set, also
// when to look again, read in the same transaction (an idle worker's claim
// then costs one transaction, not two).
absl::StatusOr<std::vector<ClaimedTask>> ClaimBatchOf(
    Engine& engine, const ClaimRequest& request,
    std::optional<absl::Time>* next_visible_at) {
  Engine::Impl& impl = engine.impl();
  SLUICE_RETURN_IF_ERROR(ValidateClaimRequest(request));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl.Begin());
  if (impl.options().development_recompile) {
    // Checking generations takes a read of its own: the engine's claim.
    SLUICE_RETURN_IF_ERROR(CheckGenerations(*tx, request));
    return ClaimInEngine(engine, request, std::move(tx), next_visible_at);
  }
  auto* one_trip = dynamic_cast<OneTripClaims*>(tx.get());
  if (one_trip == nullptr || impl.server_claims().SkipServer(request.queue)) {
    return ClaimInEngine(engine, request, std::move(tx), next_visible_at);
  }
  absl::Time now = impl.Now();
  FlowLookup flows(impl, *tx);
  SLUICE_ASSIGN_OR_RETURN(ServerSteps steps,
                          ServerStepsOf(flows, request, now, impl.options()));
  if (steps.claimable.empty()) {
    return ClaimInEngine(engine, request, std::move(tx), next_visible_at);
  }
  SLUICE_ASSIGN_OR_RETURN(
      std::optional<std::vector<ClaimedTask>> claimed,
      ClaimOnServer(engine, *one_trip, steps, request, now, next_visible_at));
  if (claimed.has_value()) return *std::move(claimed);
  // Some message needs the engine's judgement; the server changed nothing.
  impl.server_claims().FellBack(request.queue);
  SLUICE_ASSIGN_OR_RETURN(tx, impl.Begin());
  return ClaimInEngine(engine, request, std::move(tx), next_visible_at);
}

}  // namespace

absl::StatusOr<std::vector<ClaimedTask>> Engine::Claim(
    const ClaimRequest& request) {
  return ClaimBatchOf(*this, request, nullptr);
}

absl::StatusOr<ClaimBatch> Engine::ClaimWithHint(const ClaimRequest& request) {
  ClaimBatch batch;
  SLUICE_ASSIGN_OR_RETURN(batch.tasks,
                          ClaimBatchOf(*this, request, &batch.next_visible_at));
  return batch;
}

}  // namespace sluice
