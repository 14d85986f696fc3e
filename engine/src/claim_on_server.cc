#include "claim_on_server.h"

#include <memory>
#include <utility>

#include "claim_parts.h"
#include "lease.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice::claim_internal {
namespace {

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

}  // namespace

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

// The whole claim in one call to the transaction (one round trip on a
// server), when every message it reads is a queued task of a step in
// `steps`; nullopt, with the transaction over and nothing changed, when
// one is not, so the engine's claim must decide.
absl::StatusOr<std::optional<std::vector<ClaimedTask>>> ClaimOnServer(
    Engine& engine, internal::OneTripClaims& tx, const ServerSteps& steps,
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

}  // namespace sluice::claim_internal
