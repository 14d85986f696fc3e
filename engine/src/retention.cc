// Retention: deleting ended runs that their keep rules no longer keep.
//
// A flow (or job) has keep rules per outcome (FlowOptions::keep), and a run
// may carry its own (EnqueueOptions::keep, in RunRecord::options). As in
// effect-mq, where the job that just ended applies its policy to its peers,
// the rule of the most recently ended run of a (flow, outcome) decides for
// all runs of that flow and outcome: its own rule for that outcome if it has
// one, else the flow's. Count and age clauses apply independently (a run
// goes if either says so). Workers' sweeps call ApplyRetention, which
// deletes in bounded batches; only ended runs are ever deleted.
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "engine_impl.h"
#include "run_options.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

constexpr RunStatus kEnded[] = {RunStatus::kCompleted, RunStatus::kFailed,
                                RunStatus::kCancelled};
constexpr int kPage = 1000;

bool HasRule(const KeepRule& rule) {
  return rule.count.has_value() || rule.age.has_value();
}

RunQuery EndedRuns(const std::string& flow_slug, RunStatus status) {
  RunQuery query;
  query.flow_slugs = {flow_slug};
  query.statuses = {status};
  query.order_by = RunQuery::OrderBy::kFinishedAt;
  query.newest_first = true;
  return query;
}

class RetentionPass {
 public:
  RetentionPass(Transaction& tx, absl::Time now, int limit)
      : tx_(tx), now_(now), limit_(limit) {}

  absl::Status Visit(const FlowShape& flow);
  int room() const { return limit_ - static_cast<int>(doomed_.size()); }
  std::vector<RunId> TakeDoomed() { return std::move(doomed_); }

 private:
  absl::Status VisitOutcome(const FlowShape& flow, RunStatus status);
  // Dooms the runs of `query` from position `skip` on, up to the room left.
  absl::Status DoomFrom(RunQuery query, int skip);
  void Doom(const RunId& id) {
    if (room() > 0 && seen_.insert(id).second) doomed_.push_back(id);
  }

  Transaction& tx_;
  absl::Time now_;
  int limit_;
  std::vector<RunId> doomed_;
  absl::flat_hash_set<RunId> seen_;
};

absl::Status RetentionPass::Visit(const FlowShape& flow) {
  for (RunStatus status : kEnded) {
    if (room() <= 0) break;
    SLUICE_RETURN_IF_ERROR(VisitOutcome(flow, status));
  }
  return absl::OkStatus();
}

absl::Status RetentionPass::VisitOutcome(const FlowShape& flow,
                                         RunStatus status) {
  RunQuery newest = EndedRuns(flow.slug, status);
  newest.limit = 1;
  SLUICE_ASSIGN_OR_RETURN(std::vector<RunRecord> latest,
                          tx_.ListRuns(newest, Fields::kNoPayloads));
  if (latest.empty()) return absl::OkStatus();
  KeepRule rule = KeepRuleFor(flow.options.keep, status);
  if (std::optional<Keep> own = ParseRunOptions(latest[0].options).keep) {
    const KeepRule& own_rule = KeepRuleFor(*own, status);
    if (HasRule(own_rule)) rule = own_rule;
  }
  if (rule.count) {
    SLUICE_RETURN_IF_ERROR(DoomFrom(EndedRuns(flow.slug, status), *rule.count));
  }
  if (rule.age && room() > 0) {
    RunQuery old = EndedRuns(flow.slug, status);
    // Ended at or before now - age: [from, to) with to just after it.
    old.to = now_ - *rule.age + absl::Microseconds(1);
    SLUICE_RETURN_IF_ERROR(DoomFrom(std::move(old), 0));
  }
  return absl::OkStatus();
}

absl::Status RetentionPass::DoomFrom(RunQuery query, int skip) {
  int position = 0;
  while (room() > 0) {
    query.limit = std::min(kPage, std::max(1, skip - position + room()));
    SLUICE_ASSIGN_OR_RETURN(std::vector<RunRecord> page,
                            tx_.ListRuns(query, Fields::kNoPayloads));
    for (const RunRecord& run : page) {
      if (position++ >= skip) Doom(run.run_id);
    }
    if (page.size() < static_cast<size_t>(query.limit)) break;
    const RunRecord& last = page.back();
    query.after = RunQuery::Position{last.finished_at.value_or(last.started_at),
                                     last.run_id};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> Engine::ApplyRetention(int limit) {
  if (limit < 1 || limit > 10'000) {
    return absl::InvalidArgumentError(
        StrCat("ApplyRetention limit ", limit, " is out of range 1..10000"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  absl::Time now = impl_->Now();
  SLUICE_ASSIGN_OR_RETURN(int expired, tx->DeleteExpiredDedupe(now, limit));
  SLUICE_ASSIGN_OR_RETURN(std::vector<FlowRecord> flows, tx->ListFlows());
  RetentionPass pass(*tx, now, limit);
  for (const FlowRecord& record : flows) {
    if (pass.room() <= 0) break;
    SLUICE_ASSIGN_OR_RETURN(FlowShape shape,
                            FlowShape::FromJson(record.definition));
    SLUICE_RETURN_IF_ERROR(pass.Visit(shape));
  }
  std::vector<RunId> doomed = pass.TakeDoomed();
  std::sort(doomed.begin(), doomed.end());  // the engine locks in id order
  // Lock and re-read: a run retried since the listing is started again and
  // must stay.
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::optional<RunRecord>> locked,
      tx->GetRuns(doomed, LockMode::kForUpdate, Fields::kNoPayloads));
  std::vector<RunRecord> ended;
  for (std::optional<RunRecord>& run : locked) {
    if (run && IsTerminal(run->status)) ended.push_back(std::move(*run));
  }
  if (ended.empty() && expired == 0) return 0;
  SLUICE_RETURN_IF_ERROR(DeleteRunsAndKeys(*tx, ended));
  SLUICE_RETURN_IF_ERROR(impl_->Commit(*tx, {}));
  return static_cast<int>(ended.size());
}

}  // namespace sluice
