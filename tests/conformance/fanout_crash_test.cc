// The fan-out crash matrix (docs/decisions/0029-fan-out-crash-matrix.md):
// each failure point, and that the sweeper paths recover from it.
#include <string>

#include "absl/strings/str_cat.h"
#include "fail_nth_backend.h"
#include "fanout_fixture.h"
#include "support/drive_job.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class FanOutCrash : public FanOutConformance {
 protected:
  // One pass of a worker that may see errors: one claim of each job's
  // tasks, run and recorded. Errors are tolerated: recovery is what is
  // under test.
  void WorkerPass(const std::vector<const Job*>& jobs) {
    for (const Job* job : jobs) {
      ::sluice::testing::DriveJob(engine(), *job,
                                  {.worker_id = "crashy", .max_rounds = 1});
    }
  }
  void Sweep() {
    clock().Advance(absl::Minutes(2));
    (void)engine().ApplyStaleReports(1000);
    (void)engine().RecoverStalledTasks(1000);
    (void)engine().RelayChildReports(1000);
    (void)engine().RepairChildLinks(1000);
  }
  // Runs until the parent ended and nothing is owed; false if it never does.
  bool RunToEnd(const RunId& run, const std::vector<const Job*>& jobs) {
    for (int pass = 0; pass < 30; ++pass) {
      WorkerPass(jobs);
      Sweep();
      absl::StatusOr<RunView> view = engine().GetRun(run);
      if (view.ok() && IsTerminal(view->run.status) && ChildReports() == 0 &&
          PendingReports() == 0) {
        return true;
      }
    }
    return false;
  }

  // Runs `script` once fault-free, then once per backend call with that call
  // failing; each run must reach the fault-free final output.
  void ForEveryFailurePoint(const Json& payload, bool expect_completed) {
    Json expected;
    for (int n = 0;; ++n) {
      SCOPED_TRACE(absl::StrCat("failing call ", n));
      ResetBackend();
      FailNthCall faulty(backend());
      UseEngine(faulty);
      DeployJob(child_);
      DeployJob(parent_);
      RunId run = Enqueue(parent_, payload).run_id;
      if (n > 0) faulty.FailIn(n);
      ASSERT_TRUE(RunToEnd(run, {&parent_, &child_}))
          << "did not settle; failed " << faulty.failed_call();
      faulty.Disarm();
      RunView view = View(run);
      EXPECT_EQ(view.run.status == RunStatus::kCompleted, expect_completed)
          << view.run.error;
      Json got = view.run.output.value_or(Json());
      if (n == 0) {
        expected = got;
      } else {
        EXPECT_EQ(got, expected) << "failed " << faulty.failed_call();
      }
      // Every child ran to its end exactly once as a run.
      TaskKey parent = TaskOf(run, "job").key;
      for (const ChildLinkRecord& link : LinksOf(parent)) {
        EXPECT_NE(link.status, ChildStatus::kPending);
      }
      if (n > 0 && !faulty.failed()) break;  // past the last call
      if (n > 400) FAIL() << "too many calls";
    }
  }
};

TEST_P(FanOutCrash, EveryFailurePointOfCollectRecovers) {
  ForEveryFailurePoint(
      boost::json::object{{"items", J(R"([{"n":1},{"fail":"no"}])")}},
      /*expect_completed=*/true);
}

TEST_P(FanOutCrash, EveryFailurePointOfFailFastRecovers) {
  ForEveryFailurePoint(boost::json::object{{"items", J(R"([{"fail":"no"}])")},
                                           {"fail_fast", true}},
                       /*expect_completed=*/false);
}

TEST_P(FanOutCrash, AStallExhaustedChildReportsItsFailure) {
  Job slow("slowchild",
           {.queue = "work", .max_attempts = 1, .timeout = absl::Seconds(1)},
           [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
             return Json(1);
           });
  DeployJob(slow);
  RunId run = StartParent(
      boost::json::object{{"items", Items({1})}, {"child", "slowchild"}});
  Drive(parent_.flow());
  ASSERT_EQ(Claim(slow.flow()).size(), 1u);  // and never finished
  for (int i = 0; i < 5; ++i) {
    clock().Advance(absl::Minutes(2));
    ASSERT_TRUE(engine().RecoverStalledTasks(100).ok());
  }
  Json out = JobOutput(run);
  ASSERT_TRUE(out.is_array());
  EXPECT_EQ(out.as_array()[0].at("status"), "failed");
  EXPECT_THAT(std::string(out.as_array()[0].at("error").as_string()),
              HasSubstr("stalled"));
}

TEST_P(FanOutCrash, RetryRunOfAFailedParentNeverFansOutTwice) {
  RunId run = StartParent(boost::json::object{
      {"items", J(R"([{"fail":"no"}])")}, {"fail_fast", true}});
  DriveAll();
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  const size_t runs = AllRuns().size();
  ASSERT_TRUE(engine().RetryRun(run).ok());
  DriveAll();
  EXPECT_EQ(AllRuns().size(), runs);
  EXPECT_EQ(LinksOf(ParentTask(run).key).size(), 1u);
}

TEST_P(FanOutCrash, AChildCancelledWhileItsParentWaitsIsReported) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  ASSERT_TRUE(
      engine().CancelRun(ChildRunId(parent, 0), CancelMode::kImmediate).ok());
  DriveAll();
  Json out = JobOutput(run);
  ASSERT_TRUE(out.is_array());
  EXPECT_EQ(out.as_array()[0].at("status"), "cancelled");
  EXPECT_EQ(out.as_array()[1].at("status"), "completed");
}

TEST_P(FanOutCrash, ARelayThatNeverRanIsCaughtUpByTheSweep) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  Drive(parent_.flow());
  std::vector<ClaimedTask> children = Claim(child_.flow());
  ASSERT_EQ(children.size(), 1u);
  // The child's end commits with its report; the process dies before the
  // push path relays it.
  std::vector<TaskResult> results = {
      {children[0].key, children[0].attempt, Json(3)}};
  ASSERT_TRUE(engine().FinishTasks(results).ok());
  clock().Advance(absl::Minutes(1));
  ASSERT_TRUE(engine().ApplyStaleReports(100).ok());
  EXPECT_EQ(ChildReports(), 1);
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kWaiting);
  absl::StatusOr<int> relayed = engine().RelayChildReports();
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(*relayed, 1);
  EXPECT_EQ(JobOutput(run), J(R"([{"status":"completed","output":3}])"));
}

SLUICE_CONFORMANCE_SUITE(FanOutCrash);

}  // namespace
}  // namespace sluice::testing
