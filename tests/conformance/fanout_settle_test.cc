// Fan-out settling: fail-fast, cancel cascades, retried parents, refused
// fan-outs, and the relay's idempotence (docs/decisions/0028).
#include "fanout_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class FanOutSettle : public FanOutConformance {
 protected:
  int64_t RunCount() { return static_cast<int64_t>(AllRuns().size()); }
};

TEST_P(FanOutSettle, FailFastFailsTheParentAndCancelsTheRest) {
  Json items = J(R"([{"n":1},{"fail":"bad input"},{"n":3}])");
  RunId run =
      StartParent(boost::json::object{{"items", items}, {"fail_fast", true}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  // Only the failing child runs before the parent settles.
  for (const ClaimedTask& task : Claim(child_.flow())) {
    if (task.key.run_id == ChildRunId(parent, 1)) {
      Fail(task, NonRetryable("bad input"));
    } else {
      ASSERT_TRUE(
          engine()
              .ReleaseTasks(std::vector<Lease>{{task.key, task.attempt}})
              .ok());
    }
  }
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("child 1 failed: bad input"));
  EXPECT_EQ(View(ChildRunId(parent, 0)).run.status, RunStatus::kCancelled);
  EXPECT_EQ(View(ChildRunId(parent, 2)).run.status, RunStatus::kCancelled);
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_TRUE(link.cascaded) << link.child_index;
  }
  EXPECT_EQ(ChildReports(), 0);
}

TEST_P(FanOutSettle, CancellingTheParentCancelsLiveChildren) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kCancelled);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(View(ChildRunId(parent, i)).run.status, RunStatus::kCancelled);
  }
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_EQ(link.status, ChildStatus::kCancelled);
    EXPECT_TRUE(link.cascaded);
  }
  EXPECT_EQ(DriveAll(), 0);
}

TEST_P(FanOutSettle, CancelRequestAlsoReachesChildren) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_EQ(View(ChildRunId(parent, 0)).run.status, RunStatus::kCancelled);
}

TEST_P(FanOutSettle, ARepeatedResultNeverSpawnsTwice) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  std::vector<ClaimedTask> claimed = Claim(parent_.flow());
  ASSERT_EQ(claimed.size(), 1u);
  FanOut out;
  out.children.push_back({.name = "child", .payload = J(R"({"n":1})")});
  TaskResult result{claimed[0].key, claimed[0].attempt, out};
  EXPECT_EQ(Finish({result}).dispositions[0], ResultDisposition::kCompleted);
  const int64_t runs = RunCount();
  EXPECT_EQ(Finish({result}).dispositions[0], ResultDisposition::kStale);
  EXPECT_EQ(RunCount(), runs);
  EXPECT_EQ(LinksOf(claimed[0].key).size(), 1u);
}

TEST_P(FanOutSettle, AStaleAttemptCannotFanOut) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  std::vector<ClaimedTask> claimed = Claim(parent_.flow());
  ASSERT_EQ(claimed.size(), 1u);
  FanOut out;
  out.children.push_back({.name = "child", .payload = J(R"({"n":1})")});
  TaskResult late{claimed[0].key, claimed[0].attempt + 1, out};
  EXPECT_EQ(Finish({late}).dispositions[0], ResultDisposition::kStale);
  EXPECT_TRUE(LinksOf(claimed[0].key).empty());
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kStarted);
}

TEST_P(FanOutSettle, UnknownChildNameFailsWithoutRetry) {
  RunId run = StartParent(
      boost::json::object{{"items", Items({1})}, {"child", "nope"}});
  Drive(parent_.flow());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("\"nope\""));
  EXPECT_EQ(view.attempts.size(), 1u);
  EXPECT_EQ(RunCount(), 1);
  EXPECT_TRUE(LinksOf(ParentTask(run).key).empty());
}

TEST_P(FanOutSettle, BadChildOptionsFailWithoutRetry) {
  Job parent("pbad", {.queue = "work", .max_attempts = 3},
             [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
               FanOut out;
               out.children.push_back({.name = "child",
                                       .payload = J(R"({"n":1})"),
                                       .options = {.priority = 5000}});
               return out;
             });
  DeployJob(parent);
  RunId run = Enqueue(parent, Json()).run_id;
  Drive(parent.flow());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("fan-out child 0"));
  EXPECT_THAT(view.run.error, HasSubstr("priority"));
  EXPECT_EQ(view.attempts.size(), 1u);
}

TEST_P(FanOutSettle, CrossStoreChildrenAreRefusedClearly) {
  Job parent(
      "pstore", {.queue = "work"},
      [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        FanOut out;
        out.children.push_back(
            {.name = "child", .payload = J(R"({"n":1})"), .store = "edge"});
        return out;
      });
  DeployJob(parent);
  RunId run = Enqueue(parent, Json()).run_id;
  Drive(parent.flow());
  EXPECT_THAT(View(run).run.error, HasSubstr("store \"edge\""));
}

TEST_P(FanOutSettle, LastTwoReportsInOneRelaySettleOnce) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  Drive(parent_.flow());
  std::vector<ClaimedTask> children = Claim(child_.flow());
  ASSERT_EQ(children.size(), 2u);
  // Both children end in one batch: their reports meet in one relay pass.
  std::vector<TaskResult> results;
  for (const ClaimedTask& t : children) {
    results.push_back({t.key, t.attempt, Json(boost::json::object{{"ok", 1}})});
  }
  Finish(results);
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kCompleted);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
  ASSERT_TRUE(engine().RelayChildReports().ok());
  EXPECT_EQ(ChildReports(), 0);
  EXPECT_EQ(PendingReports(), 0);
}

TEST_P(FanOutSettle, DuplicateAndLateReportsAreDropped) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  DriveAll();
  TaskKey parent = ParentTask(run).key;
  Json before = JobOutput(run);
  {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    std::vector<ChildReport> reports = {
        {.parent = parent,
         .child_index = 0,
         .child_run_id = ChildRunId(parent, 0),
         .outcome = ChildStatus::kFailed,
         .error = "late",
         .created_at = clock().Now()},
        {.parent = TaskKey{RunId::Random(), 0, 0},
         .child_index = 3,
         .outcome = ChildStatus::kCompleted,
         .created_at = clock().Now()}};
    ASSERT_TRUE((*tx)->AppendChildReports(reports).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  absl::StatusOr<int> relayed = engine().RelayChildReports();
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(*relayed, 2);
  EXPECT_EQ(ChildReports(), 0);
  EXPECT_EQ(JobOutput(run), before);
  EXPECT_EQ(LinksOf(parent)[0].status, ChildStatus::kCompleted);
}

TEST_P(FanOutSettle, SweeperRecreatesAMissingChild) {
  RunId run = StartParent(boost::json::object{{"items", Items({4})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  {
    // Lost as if never created (a crash between a link and its child cannot
    // happen in one store; an operator's hand can).
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    const RunId child = ChildRunId(parent, 0);
    ASSERT_TRUE((*tx)->DeleteRuns(std::span(&child, 1)).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  clock().Advance(absl::Minutes(5));
  absl::StatusOr<int> repaired = engine().RepairChildLinks();
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, 1);
  DriveAll();
  EXPECT_EQ(JobOutput(run),
            J(R"([{"status":"completed","output":{"doubled":8}}])"));
}

TEST_P(FanOutSettle, SweeperSettlesAnEndedChildWhoseReportWasLost) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  std::vector<ClaimedTask> children = Claim(child_.flow());
  ASSERT_EQ(children.size(), 1u);
  // Record the child's result, then lose its report (as a crash between
  // commit and relay would, with the report deleted by hand).
  std::vector<TaskResult> results = {
      TaskResult{children[0].key, children[0].attempt, Json(7)}};
  absl::StatusOr<FinishOutcome> done = engine().FinishTasks(results);
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(engine().ApplyStaleReports(100).ok());
  clock().Advance(absl::Minutes(5));
  ASSERT_TRUE(engine().ApplyStaleReports(100).ok());
  {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    absl::StatusOr<std::vector<ChildReport>> all =
        (*tx)->PeekChildReports(0, 100);
    ASSERT_TRUE(all.ok());
    std::vector<int64_t> ids;
    for (const ChildReport& r : *all) ids.push_back(r.report_id);
    ASSERT_TRUE((*tx)->DeleteChildReports(ids).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  EXPECT_EQ(View(ChildRunId(parent, 0)).run.status, RunStatus::kCompleted);
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kWaiting);
  clock().Advance(absl::Minutes(5));
  ASSERT_TRUE(engine().RepairChildLinks().ok());
  EXPECT_EQ(JobOutput(run), J(R"([{"status":"completed","output":7}])"));
}

SLUICE_CONFORMANCE_SUITE(FanOutSettle);

}  // namespace
}  // namespace sluice::testing
