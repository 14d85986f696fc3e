// Engine::Claim: read a batch, classify all of it, then claim.
#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "claim_on_server.h"
#include "claim_parts.h"
#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "queue_name.h"
#include "sluice/engine.h"
#include "sluice/internal/one_trip_claims.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "wait_steps.h"

namespace sluice {
namespace {

using claim_internal::CheckGenerations;
using claim_internal::ClaimedFrom;
using claim_internal::ClaimOnServer;
using claim_internal::ClaimTerms;
using claim_internal::ClaimUpdateOf;
using claim_internal::CountClaimed;
using claim_internal::FailUnreadable;
using claim_internal::NoteUnreadable;
using claim_internal::PushReports;
using claim_internal::ReadVisibility;
using claim_internal::ReadWithTasks;
using claim_internal::RevealLost;
using claim_internal::ServerSteps;
using claim_internal::ServerStepsOf;
using claim_internal::TermsOf;
using claim_internal::UpdateAndCommit;
using internal::OneTripClaims;

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

// The verdict on message `id` and its task (nullopt: it has none). Only
// kFatal comes with a problem.
absl::StatusOr<Classified> Classify(FlowLookup& flows,
                                    const ClaimRequest& request, int64_t id,
                                    const std::optional<TaskRecord>& task) {
  Classified c;
  if (!task) {
    c.problem = StrCat("message ", id, " has no task");
    return c;
  }
  const TaskRecord& t = *task;
  absl::StatusOr<const CompiledFlow*> flow = flows.Get(t.flow_slug);
  if (!flow.ok()) {
    if (flow.status().code() != absl::StatusCode::kNotFound) {
      return flow.status();
    }
    c.problem = StrCat("message ", id, " belongs to flow \"", t.flow_slug,
                       "\", which is not deployed");
    return c;
  }
  if (t.key.step_index >= (*flow)->step_count()) {
    c.problem = StrCat("message ", id, " names step ", t.key.step_index,
                       " of flow \"", t.flow_slug, "\", which has only ",
                       (*flow)->step_count(), " steps");
    return c;
  }
  c.step = &(*flow)->step(t.key.step_index);
  if (t.queue_name != request.queue ||
      c.step->shape->queue_name != request.queue) {
    // The task's snapshot names its queue; a definition that puts the step
    // elsewhere is just as wrong for this worker.
    c.problem =
        StrCat("message ", id, " of flow \"", t.flow_slug, "\" step \"",
               c.step->shape->slug, "\" belongs on queue \"",
               t.queue_name != request.queue ? t.queue_name
                                             : c.step->shape->queue_name,
               "\"");
  } else if (t.status == TaskStatus::kQueued && t.unreadable.empty() &&
             c.step->is_wait()) {
    c.verdict = Verdict::kWaitTimeout;
  } else if (!request.served.Contains(t.flow_slug, t.key.step_index)) {
    c.problem =
        StrCat("message ", id, " is for flow \"", t.flow_slug, "\" step \"",
               c.step->shape->slug, "\", which this worker does not serve");
  } else if (t.status == TaskStatus::kQueued && !t.unreadable.empty()) {
    c.verdict = Verdict::kUnreadable;
  } else if (t.status == TaskStatus::kQueued) {
    c.verdict = Verdict::kClaim;
  } else if (t.status == TaskStatus::kStarted) {
    c.verdict = Verdict::kDuplicate;
  } else {
    c.verdict = Verdict::kArchive;
  }
  return c;
}

// A batch the engine's claim read, each message with its task and verdict.
struct ReadBatch {
  std::vector<int64_t> ids;
  std::vector<std::optional<TaskRecord>> tasks;
  std::vector<Classified> verdicts;
};

// Classifies the whole batch before changing anything: kFailedPrecondition,
// naming the first message, if any can't be claimed (dropping the
// transaction then undoes the read, and the batch stays visible).
absl::Status ClassifyBatch(FlowLookup& flows, const ClaimRequest& request,
                           ReadBatch& batch) {
  int fatal = 0;
  std::string first_problem;
  batch.verdicts.reserve(batch.ids.size());
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(
        Classified c, Classify(flows, request, batch.ids[i], batch.tasks[i]));
    if (c.verdict == Verdict::kFatal && fatal++ == 0) first_problem = c.problem;
    batch.verdicts.push_back(std::move(c));
  }
  if (fatal == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(StrCat(
      "worker ", request.worker_id, " on queue \"", request.queue,
      "\": ", fatal, " of ", batch.ids.size(), " messages can't be claimed (",
      first_problem, "); the batch was left visible and nothing claimed"));
}

// What the engine's claim writes for a classified batch.
struct ClaimPlan {
  std::vector<TaskUpdate> updates;
  std::vector<size_t> update_index;  // per update, its message's position
  std::vector<VisibilityUpdate> visibility;
  std::vector<int64_t> archive;
  std::vector<OutboxReport> reports;
  std::vector<AttemptRecord> wait_attempts;  // one per kWaitTimeout update
  std::vector<ReportKind> wait_reports;

  // Only claims (besides duplicates and archives): which of them apply
  // changes nothing else the claim writes, so the updates and COMMIT go to
  // the backend in one call (one round trip on a server), and the few lost
  // to another transaction are dealt with after (RevealLost).
  bool OnlyClaims(const ReadBatch& batch) const {
    return !updates.empty() &&
           std::all_of(update_index.begin(), update_index.end(), [&](size_t i) {
             return batch.verdicts[i].verdict == Verdict::kClaim;
           });
  }
};

// The update that starts queued task `t` as its next attempt.
TaskUpdate StartUpdate(const TaskRecord& t, const CompiledStep& step,
                       const ClaimRequest& request, absl::Time now,
                       const EngineOptions& options) {
  LeaseTimes lease =
      ComputeLease(EffectivePolicy(step, t).timeout, now, options);
  TaskUpdate u = ClaimUpdateOf(t);
  u.task.status = TaskStatus::kStarted;
  u.task.attempts = t.attempts + 1;
  u.task.error = t.error;
  u.task.started_at = now;
  u.task.stall_at = lease.stall_at;
  u.task.worker_id = request.worker_id;
  return u;
}

ClaimPlan PlanClaim(Engine::Impl& impl, const ClaimRequest& request,
                    const ReadBatch& batch, absl::Time now) {
  const EngineOptions& options = impl.options();
  ClaimPlan plan;
  plan.updates.reserve(batch.ids.size());
  plan.update_index.reserve(batch.ids.size());
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    const TaskRecord& t = *batch.tasks[i];
    const int64_t id = batch.ids[i];
    const CompiledStep* step = batch.verdicts[i].step;
    switch (batch.verdicts[i].verdict) {
      case Verdict::kClaim:
        plan.updates.push_back(StartUpdate(t, *step, request, now, options));
        plan.update_index.push_back(i);
        break;
      case Verdict::kDuplicate:
        // Hide it until stall recovery could take the task back; re-reading
        // it sooner would only find the same duplicate.
        plan.visibility.push_back({id, std::max(t.stall_at.value_or(now),
                                                now + options.claim_grace)});
        break;
      case Verdict::kArchive:
        plan.archive.push_back(id);
        break;
      case Verdict::kUnreadable:
        // Out of the way whatever happens to the update: the message is
        // archived, and the report fails the run (if the row names one).
        plan.archive.push_back(id);
        plan.updates.push_back(FailUnreadable(t, *step, now));
        plan.update_index.push_back(i);
        NoteUnreadable(impl, request, id, t, plan.updates.back().task.error,
                       now, plan.reports);
        break;
      case Verdict::kWaitTimeout: {
        WaitEnd end = EndWait(t, *step, std::nullopt, request.worker_id, now);
        end.update.skip_if_locked = true;  // a claim never waits on a task
        plan.updates.push_back(std::move(end.update));
        plan.update_index.push_back(i);
        plan.wait_attempts.push_back(std::move(end.attempt));
        plan.wait_reports.push_back(end.report);
        break;
      }
      case Verdict::kFatal:
        break;
    }
  }
  return plan;
}

// Hides or archives the messages the plan names, in `tx`.
absl::Status WriteMessages(Transaction& tx, const ClaimRequest& request,
                           const ClaimPlan& plan, absl::Time now) {
  if (!plan.visibility.empty()) {
    SLUICE_RETURN_IF_ERROR(tx.SetVisibility(request.queue, plan.visibility));
  }
  if (!plan.archive.empty()) {
    SLUICE_RETURN_IF_ERROR(
        tx.ArchiveMessages(request.queue, plan.archive, now));
  }
  return absl::OkStatus();
}

// A plan of claims only (ClaimPlan::OnlyClaims): the message writes, then
// the updates with COMMIT in one call.
absl::StatusOr<std::vector<ClaimedTask>> ClaimInOneCall(
    Engine::Impl& impl, Transaction& tx, const ClaimRequest& request,
    ReadBatch& batch, ClaimPlan& plan, absl::Time now, absl::Time read_until,
    std::optional<absl::Time>* next_visible_at) {
  const EngineOptions& options = impl.options();
  std::vector<ClaimTerms> terms;
  terms.reserve(plan.update_index.size());
  for (size_t i : plan.update_index) {
    terms.push_back(
        TermsOf(*batch.verdicts[i].step, *batch.tasks[i], now, options));
    if (terms.back().lease.visible_until != read_until) {
      plan.visibility.push_back(
          {batch.ids[i], terms.back().lease.visible_until});
    }
  }
  SLUICE_RETURN_IF_ERROR(WriteMessages(tx, request, plan, now));
  SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                          UpdateAndCommit(tx, plan.updates));
  std::vector<VisibilityUpdate> lost;
  std::vector<ClaimedTask> claimed;
  claimed.reserve(plan.updates.size());
  for (size_t u = 0; u < plan.updates.size(); ++u) {
    size_t i = plan.update_index[u];
    if (!applied[u]) {
      lost.push_back({batch.ids[i], now + options.claim_grace});
      continue;
    }
    claimed.push_back(ClaimedFrom(*batch.tasks[i], *batch.verdicts[i].step,
                                  plan.updates[u].task.attempts, terms[u], now,
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

// Any other plan: the updates, then, knowing which applied, the message
// writes, the ended waits' ledger entries and reports, and the commit.
absl::StatusOr<std::vector<ClaimedTask>> ClaimAndEnd(
    Engine& engine, Transaction& tx, const ClaimRequest& request,
    ReadBatch& batch, ClaimPlan& plan, absl::Time now, absl::Time read_until,
    std::optional<absl::Time>* next_visible_at) {
  Engine::Impl& impl = engine.impl();
  const EngineOptions& options = impl.options();
  std::vector<ClaimedTask> claimed;
  std::vector<AttemptRecord> timed_out;  // ledger entries of ended waits
  if (!plan.updates.empty()) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<bool> applied,
                            tx.UpdateTasks(plan.updates));
    claimed.reserve(plan.updates.size());
    size_t next_wait = 0;
    for (size_t u = 0; u < plan.updates.size(); ++u) {
      const size_t i = plan.update_index[u];
      Verdict verdict = batch.verdicts[i].verdict;
      if (verdict == Verdict::kUnreadable) continue;
      if (verdict == Verdict::kWaitTimeout) {
        size_t w = next_wait++;
        if (!applied[u]) {
          // A signal is ending it; look again soon to archive the message.
          plan.visibility.push_back({batch.ids[i], now + options.claim_grace});
          continue;
        }
        const TaskRecord& ended = plan.updates[u].task;
        plan.archive.push_back(batch.ids[i]);
        timed_out.push_back(std::move(plan.wait_attempts[w]));
        plan.reports.push_back(OutboxReport{.task = ended.key,
                                            .flow_slug = ended.flow_slug,
                                            .kind = plan.wait_reports[w],
                                            .created_at = now});
        continue;
      }
      if (!applied[u]) {
        // Changed since the read, or held by another transaction (one that
        // may be ending the task): not ours. Let the message be read again
        // soon, so whoever comes next sees the task as it ends up.
        plan.visibility.push_back({batch.ids[i], now + options.claim_grace});
        continue;
      }
      ClaimTerms terms =
          TermsOf(*batch.verdicts[i].step, *batch.tasks[i], now, options);
      if (terms.lease.visible_until != read_until) {
        plan.visibility.push_back({batch.ids[i], terms.lease.visible_until});
      }
      claimed.push_back(ClaimedFrom(*batch.tasks[i], *batch.verdicts[i].step,
                                    plan.updates[u].task.attempts, terms, now,
                                    request.worker_id));
    }
  }
  SLUICE_RETURN_IF_ERROR(WriteMessages(tx, request, plan, now));
  if (!timed_out.empty()) SLUICE_RETURN_IF_ERROR(tx.AppendAttempts(timed_out));
  std::vector<int64_t> report_ids;
  if (!plan.reports.empty()) {
    SLUICE_ASSIGN_OR_RETURN(report_ids, tx.AppendReports(plan.reports));
  }
  if (claimed.empty() && next_visible_at != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(*next_visible_at,
                            tx.NextVisibleAt(request.queue, now));
  }
  SLUICE_RETURN_IF_ERROR(impl.Commit(tx, {}));
  CountClaimed(impl.metrics(), request.queue, claimed);
  PushReports(engine, report_ids);
  return claimed;
}

// The engine's claim: read a batch, classify all of it, then claim.
absl::StatusOr<std::vector<ClaimedTask>> ClaimInEngine(
    Engine& engine, const ClaimRequest& request,
    std::unique_ptr<Transaction> tx,
    std::optional<absl::Time>* next_visible_at) {
  Engine::Impl& impl = engine.impl();
  absl::Time now = impl.Now();
  FlowLookup flows(impl, *tx);
  SLUICE_ASSIGN_OR_RETURN(absl::Duration read_for,
                          ReadVisibility(flows, request, impl.options()));
  absl::Time read_until = now + read_for;
  // One call, so a server backend reads messages and tasks in one trip.
  SLUICE_ASSIGN_OR_RETURN(internal::MessagesWithTasks read,
                          ReadWithTasks(*tx, request, now, read_until));
  if (read.messages.empty()) {
    if (next_visible_at != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(*next_visible_at,
                              tx->NextVisibleAt(request.queue, now));
    }
    return std::vector<ClaimedTask>();
  }
  ReadBatch batch;
  batch.ids.reserve(read.messages.size());
  for (const MessageRecord& m : read.messages)
    batch.ids.push_back(m.message_id);
  batch.tasks = std::move(read.tasks);
  SLUICE_RETURN_IF_ERROR(ClassifyBatch(flows, request, batch));
  ClaimPlan plan = PlanClaim(impl, request, batch, now);
  if (plan.OnlyClaims(batch)) {
    return ClaimInOneCall(impl, *tx, request, batch, plan, now, read_until,
                          next_visible_at);
  }
  return ClaimAndEnd(engine, *tx, request, batch, plan, now, read_until,
                     next_visible_at);
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
