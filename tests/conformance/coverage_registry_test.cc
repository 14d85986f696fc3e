// Coverage: every queue of every active version with its live workers per
// (flow, step), from the worker registry (docs/decisions/0027).
#include <map>
#include <string>
#include <vector>

#include "coverage_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

class CoverageRegistry : public CoverageConformance {};

TEST_P(CoverageRegistry, Coverage_ListsOnlyTheActiveVersionOfEachAlias) {
  StoreVersion(ThreeSteps("app_v1"), "app");
  StoreVersion(ThreeSteps("app_v2"), "app");
  PutAlias("app", "app_v2");
  StoreVersion(ThreeSteps("solo"), "solo");  // no alias row: its own version
  PutWorker("old", "app_v1", {{"app_v1", {"a", "b", "c"}}});

  EXPECT_THAT(QueueNames(), ElementsAre("app_v2", "solo"));
  std::map<std::string, int> live = LivePerStep();
  EXPECT_FALSE(live.contains("app_v1.a")) << "an inactive version is hidden";
  EXPECT_EQ(live["app_v2.a"], 0);

  PutAlias("app", "app_v1");  // a rollback
  EXPECT_THAT(QueueNames(), ElementsAre("app_v1", "solo"));
  EXPECT_EQ(LivePerStep()["app_v1.c"], 1);
  for (const QueueCoverage& q : CoverageNow()) {
    for (const StepCoverage& s : q.steps) {
      EXPECT_EQ(s.alias, s.flow_slug == "solo" ? "solo" : "app");
    }
  }
}

TEST_P(CoverageRegistry, Coverage_CountsLiveWorkersPerStep) {
  StoreVersion(ThreeSteps("pipeline"), "pipeline");
  PutWorker("w1", "pipeline", {{"pipeline", {"a", "b"}}});
  PutWorker("w2", "pipeline", {{"pipeline", {"b"}}});

  std::vector<QueueCoverage> coverage = CoverageNow();
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].queue, "pipeline");
  EXPECT_THAT(coverage[0].flows, ElementsAre("pipeline"));
  EXPECT_EQ(coverage[0].live_workers, 2);
  EXPECT_THAT(LivePerStep(),
              ElementsAre(Pair("pipeline.a", 1), Pair("pipeline.b", 2),
                          Pair("pipeline.c", 0)));
  std::vector<const StepCoverage*> unserved = coverage[0].Unserved();
  ASSERT_EQ(unserved.size(), 1u);
  EXPECT_EQ(unserved[0]->step_slug, "c");
}

TEST_P(CoverageRegistry, Coverage_StepNobodyServes_ShowsZeroLiveWorkers) {
  Flow flow = ThreeSteps("lonely");
  Deploy(flow);
  std::vector<QueueCoverage> coverage = CoverageNow();
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].live_workers, 0);
  ASSERT_EQ(coverage[0].steps.size(), 3u) << "every step is listed";
  for (const StepCoverage& s : coverage[0].steps) {
    EXPECT_EQ(s.live_workers, 0) << s.step_slug;
  }
  EXPECT_EQ(coverage[0].Unserved().size(), 3u);
}

TEST_P(CoverageRegistry, StartedWorker_RegistersEveryStepItServes) {
  Flow flow = ThreeSteps("served");
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  ASSERT_NE(worker, nullptr);
  EXPECT_THAT(LivePerStep(),
              ElementsAre(Pair("served.a", 1), Pair("served.b", 1),
                          Pair("served.c", 1)));
  {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    auto workers = (*tx)->ListWorkers();
    ASSERT_TRUE(workers.ok()) << workers.status();
    ASSERT_EQ(workers->size(), 1u);
    EXPECT_THAT((*workers)[0].served,
                ElementsAre(ServedSteps{"served", {"a", "b", "c"}}));
  }
  ASSERT_TRUE(worker->Stop().ok());
  EXPECT_THAT(LivePerStep(),
              ElementsAre(Pair("served.a", 0), Pair("served.b", 0),
                          Pair("served.c", 0)));
}

TEST_P(CoverageRegistry, StoppedAndStaleWorkers_AreNotLive) {
  StoreVersion(ThreeSteps("fleet"), "fleet");
  std::vector<ServedSteps> all = {{"fleet", {"a", "b", "c"}}};
  PutWorker("stopped", "fleet", all, absl::ZeroDuration(), /*stopped=*/true);
  PutWorker("stale", "fleet", all, absl::Seconds(31));
  PutWorker("fresh", "fleet", all, absl::Seconds(29));

  EXPECT_EQ(LivePerStep()["fleet.a"], 1);
  EXPECT_EQ(CoverageNow()[0].live_workers, 1);
  EXPECT_EQ(LivePerStep(absl::Minutes(1))["fleet.a"], 2)
      << "a longer liveness counts the stale one; never the stopped one";
  clock().Advance(absl::Seconds(2));
  EXPECT_EQ(LivePerStep()["fleet.a"], 0) << "time passes: none is live";
}

TEST_P(CoverageRegistry, WorkerOnAnotherQueueOrFlow_DoesNotCount) {
  StoreVersion(ThreeSteps("target"), "target");
  StoreVersion(ThreeSteps("neighbour"), "neighbour");
  PutWorker("wrong_queue", "neighbour", {{"target", {"a", "b", "c"}}});
  PutWorker("wrong_flow", "target", {{"neighbour", {"a", "b", "c"}}});
  std::map<std::string, int> live = LivePerStep();
  EXPECT_EQ(live["target.a"], 0);
  EXPECT_EQ(live["neighbour.a"], 0);
}

TEST_P(CoverageRegistry, RowWithoutServedSteps_ServesEveryStepOfItsFlow) {
  StoreVersion(ThreeSteps("legacy"), "legacy");
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  absl::Time now = clock().Now();
  ASSERT_TRUE((*tx)
                  ->UpsertWorker(WorkerRecord{"old_worker", "legacy", "legacy",
                                              now, now, std::nullopt})
                  .ok());
  ASSERT_TRUE((*tx)->Commit().ok());
  EXPECT_THAT(LivePerStep(),
              ElementsAre(Pair("legacy.a", 1), Pair("legacy.b", 1),
                          Pair("legacy.c", 1)));
}

TEST_P(CoverageRegistry, SharedQueue_ListsEveryFlowsStepsOnIt) {
  StoreVersion(ThreeSteps("billing", "common"), "billing");
  StoreVersion(ThreeSteps("mailing", "common"), "mailing");
  PutWorker("both", "common",
            {{"billing", {"a", "b", "c"}}, {"mailing", {"a"}}});
  std::vector<QueueCoverage> coverage = CoverageNow();
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_EQ(coverage[0].queue, "common");
  EXPECT_THAT(coverage[0].flows, ElementsAre("billing", "mailing"));
  EXPECT_EQ(coverage[0].steps.size(), 6u);
  EXPECT_EQ(coverage[0].live_workers, 1);
  std::vector<const StepCoverage*> unserved = coverage[0].Unserved();
  ASSERT_EQ(unserved.size(), 2u);
  EXPECT_EQ(unserved[0]->flow_slug, "mailing");
  EXPECT_EQ(unserved[0]->step_slug, "b");
}

TEST_P(CoverageRegistry, ServedSteps_RoundTripAndAreReplacedByUpsert) {
  PutWorker("w", "q", {{"f", {"a", "b"}}, {"g", {"x"}}});
  auto read = [&]() -> std::vector<ServedSteps> {
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok());
    if (!tx.ok()) return {};
    auto workers = (*tx)->ListWorkers();
    EXPECT_TRUE(workers.ok()) << workers.status();
    if (!workers.ok() || workers->size() != 1) return {};
    return (*workers)[0].served;
  };
  EXPECT_THAT(read(), ElementsAre(ServedSteps{"f", {"a", "b"}},
                                  ServedSteps{"g", {"x"}}));
  PutWorker("w", "q", {{"g", {"y"}}});
  EXPECT_THAT(read(), ElementsAre(ServedSteps{"g", {"y"}}));
}

TEST_P(CoverageRegistry, NonPositiveLiveness_IsRefused) {
  absl::StatusOr<std::vector<QueueCoverage>> coverage =
      engine().Coverage(absl::ZeroDuration());
  ASSERT_FALSE(coverage.ok());
  EXPECT_EQ(coverage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(coverage.status().message()),
              ::testing::HasSubstr("liveness"));
}

SLUICE_CONFORMANCE_SUITE(CoverageRegistry);

}  // namespace
}  // namespace sluice::testing
