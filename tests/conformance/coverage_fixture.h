// The coverage scenarios' fixture: writes versions, aliases and worker rows
// straight through the backend, so that each scenario states exactly what
// the registry holds, and reads Coverage() back as a map.
#ifndef SLUICE_TESTS_CONFORMANCE_COVERAGE_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_COVERAGE_FIXTURE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker_fixture.h"

namespace sluice::testing {

class CoverageConformance : public WorkerConformance {
 protected:
  // Stores `flow` as a version of `alias` (a member, not activated).
  void StoreVersion(const Flow& flow, const std::string& alias) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    FlowRecord record{flow.slug(), flow.shape().ToJson(), clock().Now()};
    record.alias = alias;
    ASSERT_TRUE((*tx)->InsertFlow(record).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  void PutAlias(const std::string& alias, const std::string& active_slug) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    ASSERT_TRUE(
        (*tx)->PutAlias(AliasRecord{alias, active_slug, clock().Now()}).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  // Writes a worker's row; `served` as WorkerRecord::served.
  void PutWorker(const std::string& id, const std::string& queue,
                 std::vector<ServedSteps> served,
                 absl::Duration since_heartbeat = absl::ZeroDuration(),
                 bool stopped = false) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    absl::Time heartbeat = clock().Now() - since_heartbeat;
    WorkerRecord w{
        id,
        queue,
        served.empty() ? std::string("none") : served[0].flow_slug,
        heartbeat,
        heartbeat,
        stopped ? std::optional<absl::Time>(heartbeat) : std::nullopt};
    w.served = std::move(served);
    ASSERT_TRUE((*tx)->UpsertWorker(w).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  std::vector<QueueCoverage> CoverageNow(
      absl::Duration liveness = absl::Seconds(30)) {
    absl::StatusOr<std::vector<QueueCoverage>> coverage =
        engine().Coverage(liveness);
    EXPECT_TRUE(coverage.ok()) << coverage.status();
    return coverage.ok() ? std::move(*coverage) : std::vector<QueueCoverage>();
  }

  // "flow.step" -> live workers, over every queue.
  std::map<std::string, int> LivePerStep(
      absl::Duration liveness = absl::Seconds(30)) {
    std::map<std::string, int> live;
    for (const QueueCoverage& q : CoverageNow(liveness)) {
      for (const StepCoverage& s : q.steps) {
        live[s.flow_slug + "." + s.step_slug] = s.live_workers;
      }
    }
    return live;
  }

  std::vector<std::string> QueueNames() {
    std::vector<std::string> names;
    for (const QueueCoverage& q : CoverageNow()) names.push_back(q.queue);
    return names;
  }

  std::vector<std::string> WorkerIds() {
    std::vector<std::string> ids;
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return ids;
    auto workers = (*tx)->ListWorkers();
    EXPECT_TRUE(workers.ok()) << workers.status();
    if (!workers.ok()) return ids;
    for (const WorkerRecord& w : *workers) ids.push_back(w.worker_id);
    return ids;
  }

  // A flow of three single steps a -> b -> c (handlers echo).
  static Flow ThreeSteps(const std::string& slug,
                         const std::string& queue = "") {
    Flow flow(slug, {.queue = queue});
    flow.Step("a", Echo())
        .Step("b", {.depends_on = {"a"}}, Echo())
        .Step("c", {.depends_on = {"b"}}, Echo());
    return flow;
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_COVERAGE_FIXTURE_H_
