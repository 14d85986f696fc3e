// Coverage: which queues and (flow, step) pairs of the active versions have
// live workers (docs/decisions/0027-coverage-and-worker-registry.md).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "engine_impl.h"
#include "sluice/engine.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"

namespace sluice {
namespace {

// The stored flows that are the active version of their alias, with the
// alias each belongs to.
absl::StatusOr<std::vector<std::pair<std::string, FlowShape>>> ActiveFlows(
    Transaction& tx) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<AliasRecord> aliases, tx.ListAliases());
  absl::flat_hash_map<std::string, std::string> active_slug;
  for (const AliasRecord& a : aliases) active_slug[a.alias] = a.active_slug;
  SLUICE_ASSIGN_OR_RETURN(std::vector<FlowRecord> flows, tx.ListFlows());
  std::vector<std::pair<std::string, FlowShape>> active;
  for (const FlowRecord& record : flows) {
    std::string alias = AliasOf(record);
    auto it = active_slug.find(alias);
    bool is_active = it == active_slug.end() ? alias == record.slug
                                             : it->second == record.slug;
    if (!is_active) continue;
    SLUICE_ASSIGN_OR_RETURN(FlowShape shape,
                            FlowShape::FromJson(record.definition));
    active.emplace_back(std::move(alias), std::move(shape));
  }
  return active;
}

// Whether a worker's registration says it runs (flow, step) on its queue.
// A row without `served` (written before it existed) serves every step of
// its one flow.
bool Serves(const WorkerRecord& worker, std::string_view flow,
            std::string_view step) {
  if (worker.served.empty()) return worker.flow_slug == flow;
  for (const ServedSteps& s : worker.served) {
    if (s.flow_slug != flow) continue;
    return std::find(s.steps.begin(), s.steps.end(), step) != s.steps.end();
  }
  return false;
}

}  // namespace

std::vector<const StepCoverage*> QueueCoverage::Unserved() const {
  std::vector<const StepCoverage*> unserved;
  for (const StepCoverage& step : steps) {
    if (step.live_workers == 0) unserved.push_back(&step);
  }
  return unserved;
}

absl::StatusOr<std::vector<QueueCoverage>> Engine::Coverage(
    absl::Duration liveness) {
  if (liveness <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(StrCat("Coverage liveness ",
                                             absl::FormatDuration(liveness),
                                             " must be positive"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, impl_->Begin());
  SLUICE_ASSIGN_OR_RETURN(auto active, ActiveFlows(*tx));
  SLUICE_ASSIGN_OR_RETURN(std::vector<WorkerRecord> workers, tx->ListWorkers());
  absl::Time now = impl_->Now();
  std::erase_if(workers, [&](const WorkerRecord& w) {
    return w.stopped_at.has_value() || now - w.last_heartbeat_at > liveness;
  });

  std::map<std::string, QueueCoverage> by_queue;  // in name order
  for (const auto& [alias, shape] : active) {
    for (const StepShape& step : shape.steps) {
      QueueCoverage& queue = by_queue[step.queue_name];
      queue.queue = step.queue_name;
      if (std::find(queue.flows.begin(), queue.flows.end(), shape.slug) ==
          queue.flows.end()) {
        queue.flows.push_back(shape.slug);
      }
      StepCoverage covered{alias, shape.slug, step.slug, 0};
      // A Wait step needs no handler: any worker of its queue applies its
      // timeout (docs/decisions/0030-signals.md).
      bool any_worker = step.kind == StepKind::kWait;
      for (const WorkerRecord& w : workers) {
        if (w.queue_name == step.queue_name &&
            (any_worker || Serves(w, shape.slug, step.slug))) {
          ++covered.live_workers;
        }
      }
      queue.steps.push_back(std::move(covered));
    }
  }
  std::vector<QueueCoverage> coverage;
  coverage.reserve(by_queue.size());
  for (auto& [name, queue] : by_queue) {
    for (const WorkerRecord& w : workers) {
      if (w.queue_name == name) ++queue.live_workers;
    }
    coverage.push_back(std::move(queue));
  }
  return coverage;
}

}  // namespace sluice
