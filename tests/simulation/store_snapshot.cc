#include "store_snapshot.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "sluice/internal/implicit_steps.h"
#include "sluice/internal/status_macros.h"

namespace sluice::simulation {
namespace {

absl::StatusOr<std::shared_ptr<const RunSnapshot>> ReadRun(Transaction& tx,
                                                           RunRecord record) {
  auto run = std::make_shared<RunSnapshot>();
  run->run = std::move(record);
  const RunId& id = run->run.run_id;
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<StepStateRecord>> steps,
                          tx.GetStepStates(std::span(&id, 1), Fields::kAll));
  run->steps = std::move(steps[0]);
  if (run->steps.empty()) {
    // A one-step run whose row says its step's state is not stored.
    SLUICE_ASSIGN_OR_RETURN(std::optional<FlowRecord> flow,
                            tx.GetFlow(run->run.flow_slug));
    if (flow) {
      SLUICE_ASSIGN_OR_RETURN(FlowShape shape,
                              FlowShape::FromJson(flow->definition));
      internal::AddImplicitStepState(shape, run->run, run->steps);
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<TaskRecord> tasks, tx.ListTasks(id));
  run->tasks.reserve(tasks.size());
  for (TaskRecord& t : tasks) {
    TaskSnapshot task{std::move(t)};
    SLUICE_ASSIGN_OR_RETURN(
        std::optional<MessageLocation> where,
        tx.LookupMessage(task.task.queue_name, task.task.message_id));
    task.message_found = where.has_value();
    task.message_archived = where.has_value() && where->archived;
    run->tasks.push_back(std::move(task));
  }
  return run;
}

}  // namespace

absl::StatusOr<StoreSnapshot> ReadStore(Backend& backend,
                                        const StoreSnapshot* previous,
                                        const std::vector<RunId>& touched) {
  StoreSnapshot store;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, backend.Begin());
  if (previous == nullptr) {
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<RunRecord> runs,
        tx->ListRuns(RunQuery::OfFlow("", std::numeric_limits<int>::max()),
                     Fields::kAll));
    std::reverse(runs.begin(), runs.end());  // ListRuns gives newest first
    store.runs.reserve(runs.size());
    for (RunRecord& record : runs) {
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const RunSnapshot> run,
                              ReadRun(*tx, std::move(record)));
      store.runs.push_back(std::move(run));
    }
  } else {
    // Previous runs in their order, then new ones in the order first written.
    std::vector<RunId> order;
    absl::flat_hash_set<RunId> changed(touched.begin(), touched.end());
    absl::flat_hash_set<RunId> listed;
    for (const auto& run : previous->runs) {
      order.push_back(run->run.run_id);
      listed.insert(run->run.run_id);
    }
    for (const RunId& id : touched) {
      if (listed.insert(id).second) order.push_back(id);
    }
    size_t next_previous = 0;
    for (const RunId& id : order) {
      const bool was_listed = next_previous < previous->runs.size();
      if (was_listed && !changed.contains(id)) {
        store.runs.push_back(previous->runs[next_previous++]);
        continue;
      }
      if (was_listed) ++next_previous;
      SLUICE_ASSIGN_OR_RETURN(
          std::vector<std::optional<RunRecord>> found,
          tx->GetRuns(std::span(&id, 1), LockMode::kNone, Fields::kAll));
      if (!found[0]) continue;  // deleted, or never committed
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const RunSnapshot> run,
                              ReadRun(*tx, std::move(*found[0])));
      store.runs.push_back(std::move(run));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(
      store.pending_reports,
      tx->TakeStaleReports(absl::InfiniteFuture(),
                           std::numeric_limits<int>::max()));
  // `tx` is dropped without a commit: nothing was taken.
  return store;
}

}  // namespace sluice::simulation
