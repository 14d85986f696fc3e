// Pruning the worker registry: a worker's start and every sweep delete the
// rows of workers gone for worker_retention, one bounded batch per call
// (docs/decisions/0027).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "coverage_fixture.h"

namespace sluice::testing {
namespace {

// The batch a worker prunes per start or sweep (worker.cc kSweepBatch).
constexpr int kPruneBatch = 1000;

class CoveragePrune : public CoverageConformance {
 protected:
  // Writes `count` rows of workers that crashed before worker_retention.
  void PutGoneWorkers(int count) {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    absl::Time gone =
        clock().Now() - engine().options().worker_retention - absl::Minutes(1);
    for (int i = 0; i < count; ++i) {
      WorkerRecord w{"gone_" + std::to_string(i),
                     "pruned",
                     "pruned",
                     gone,
                     gone,
                     std::nullopt};
      w.served = {{"pruned", {"a"}}};
      ASSERT_TRUE((*tx)->UpsertWorker(w).ok());
    }
    ASSERT_TRUE((*tx)->Commit().ok());
  }
};

TEST_P(CoveragePrune, WorkerStart_PrunesOneBoundedBatch) {
  Flow flow("pruned");
  flow.Step("a", Echo());
  PutGoneWorkers(kPruneBatch + 200);
  std::unique_ptr<Worker> worker = StartWorker(flow, Fast());
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(WorkerIds().size(), 201u)
      << "one batch of " << kPruneBatch << " gone, the rest and the new one "
      << "kept";
  ASSERT_TRUE(worker->Stop().ok());
}

TEST_P(CoveragePrune, Sweeps_PruneBatchAfterBatch_KeepTheLiveWorkers) {
  Flow flow("pruned");
  flow.Step("a", Echo());
  PutGoneWorkers(kPruneBatch + 200);
  PutWorker("recent", "pruned", {{"pruned", {"a"}}}, absl::Minutes(5));
  WorkerOptions sweeping = Fast();
  sweeping.sweep_interval = absl::Milliseconds(10);
  std::unique_ptr<Worker> live = StartWorker(flow, sweeping);
  ASSERT_NE(live, nullptr);
  absl::Time give_up = absl::Now() + kWorkerTestDeadline;
  while (WorkerIds().size() > 2 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));  // the state is in the backend
  }
  std::vector<std::string> ids = WorkerIds();
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> expected = {live->id(), "recent"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(LivePerStep(absl::Hours(1))["pruned.a"], 2)
      << "the pruned rows are gone from coverage too";
  ASSERT_TRUE(live->Stop().ok());
}

SLUICE_CONFORMANCE_SUITE(CoveragePrune);

}  // namespace
}  // namespace sluice::testing
