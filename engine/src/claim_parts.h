// The pieces of Engine::Claim (claim.cc): reading a batch, what happens to
// tasks that can't be read, the handler's view of a claimed task, and the
// commit and clean-up around a claim.
#ifndef SLUICE_ENGINE_CLAIM_PARTS_H_
#define SLUICE_ENGINE_CLAIM_PARTS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "compiled_flow.h"
#include "engine_impl.h"
#include "lease.h"
#include "metrics_registry.h"
#include "sluice/engine.h"
#include "sluice/internal/one_trip_claims.h"

namespace sluice::claim_internal {

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

// Development recompilation fences off workers that deployed an older
// generation of a flow: their handlers are for a shape that is gone. Each
// flow's deploy lock is held to the claim's commit: on Postgres each
// statement reads the latest commits, so without it a recompile and a
// new run committed between this check and the read would be claimed by
// the old generation. Slug order, so two claims never wait on each other.
absl::Status CheckGenerations(Transaction& tx, const ClaimRequest& request);

// How long a read hides messages: the lease of the served steps on this
// queue when they all share one timeout (then a claimed message needs no
// second write), else just the claim grace until each claim sets its own.
absl::StatusOr<absl::Duration> ReadVisibility(FlowLookup& flows,
                                              const ClaimRequest& request,
                                              const EngineOptions& options);

// A claim's update of task `t` as read: expecting its status and attempts,
// never waiting on its lock, keeping what the claim does not change. The
// caller sets the task's new state.
TaskUpdate ClaimUpdateOf(const TaskRecord& t);

// The update that fails a queued task whose row can't be read, for good:
// no attempt is consumed and no policy applies, since no retry could read it.
TaskUpdate FailUnreadable(const TaskRecord& t, const CompiledStep& step,
                          absl::Time now);

// Logs an unreadable task `t` (as read) that the claim failed with
// `error`, its message `message_id` archived, and reports it, so that its
// run fails, if the row names a run.
void NoteUnreadable(Engine::Impl& impl, const ClaimRequest& request,
                    int64_t message_id, const TaskRecord& t,
                    std::string_view error, absl::Time now,
                    std::vector<OutboxReport>& reports);

// Applies the reports a claim committed (unreadable tasks, timed out
// waits): the push path; the reconcile path catches them if this fails.
void PushReports(Engine& engine, std::span<const int64_t> report_ids);

// Counts a claim's tasks in the metrics.
void CountClaimed(MetricsRegistry& metrics, std::string_view queue,
                  const std::vector<ClaimedTask>& claimed);

// The claim's read, in one call where the transaction offers it.
absl::StatusOr<internal::MessagesWithTasks> ReadWithTasks(
    Transaction& tx, const ClaimRequest& request, absl::Time now,
    absl::Time read_until);

// The claim's updates and commit, in one call where the transaction offers
// it. The claim publishes no events and wakes nobody, so it needs nothing
// of Impl::Commit but the commit.
absl::StatusOr<std::vector<bool>> UpdateAndCommit(
    Transaction& tx, std::span<TaskUpdate> updates);

// A claimed task's policy and lease, computed once per task and claim.
struct ClaimTerms {
  TaskPolicy policy;
  LeaseTimes lease;
};

// The policy and lease of task `t` of `step`, claimed at `now`.
ClaimTerms TermsOf(const CompiledStep& step, const TaskRecord& t,
                   absl::Time now, const EngineOptions& options);

// The handler's view of a task whose claim at `now` by `worker_id` applied,
// as attempt `attempt`. Consumes `t`, the task as the claim read it.
ClaimedTask ClaimedFrom(TaskRecord& t, const CompiledStep& step, int attempt,
                        const ClaimTerms& terms, absl::Time now,
                        std::string_view worker_id);

// After a claim committed in one trip: the messages of tasks it lost to
// another transaction become visible again soon (the claim had hidden them
// until its lease's end), so whoever comes next sees each task as it ends
// up; and an idle worker learns when to look again. If this fails, those
// messages reappear when the lease would have ended.
void RevealLost(Engine::Impl& impl, const ClaimRequest& request,
                std::vector<VisibilityUpdate> lost, absl::Time now,
                std::optional<absl::Time>* next_visible_at);

}  // namespace sluice::claim_internal

#endif  // SLUICE_ENGINE_CLAIM_PARTS_H_
