// Fan-out races (docs/decisions/0029, 0039): a cancel of the parent run
// while its fan-out is being acknowledged, and fail-fast where a child's
// failure meets its last sibling's completion. Each ordering a store can
// serialize the two into is driven by hand.
#include <string>
#include <vector>

#include "fanout_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class FanOutRaces : public FanOutConformance {
 protected:
  void SetUp() override {
    FanOutConformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no engine to watch
    engine().Subscribe([this](const Event& e) {
      if (e.kind == EventKind::kRunFailed ||
          e.kind == EventKind::kRunCompleted ||
          e.kind == EventKind::kRunCancelled) {
        ended_.push_back(e);
      }
    });
  }

  // The parent's handler result: a FanOut of one child per item.
  FanOut FanOutOf(std::initializer_list<int> ns, bool fail_fast = false) {
    FanOut out;
    out.fail_fast = fail_fast;
    for (int n : ns) {
      out.children.push_back(
          {.name = "child", .payload = boost::json::object{{"n", n}}});
    }
    return out;
  }

  // How many times `run` ended (run events), and how it ended last.
  int TimesEnded(const RunId& run) {
    int n = 0;
    for (const Event& e : ended_) n += e.run_id == run ? 1 : 0;
    return n;
  }

  // No child of `parent` is queued or started, and nothing is owed.
  void ExpectNothingLive(const TaskKey& parent) {
    for (const ChildLinkRecord& link : LinksOf(parent)) {
      EXPECT_NE(link.status, ChildStatus::kPending) << link.child_index;
      EXPECT_TRUE(link.cascaded) << link.child_index;
      EXPECT_TRUE(IsTerminal(View(link.child_run_id).run.status))
          << link.child_index;
    }
    EXPECT_EQ(DriveAll(), 0);
    EXPECT_EQ(ChildReports(), 0);
    EXPECT_EQ(PendingReports(), 0);
  }

  int FannedOutAttempts(const RunId& run) {
    int n = 0;
    for (const AttemptRecord& a : View(run).attempts) {
      n += a.outcome == AttemptOutcome::kFannedOut ? 1 : 0;
    }
    return n;
  }

  std::vector<Event> ended_;
};

// (a) The cancel commits while the handler's FanOut is on its way to the
// store: the cancel wins, no child is ever created.
TEST_P(FanOutRaces, CancelRequestBeforeTheAckWins) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  std::vector<ClaimedTask> claimed = Claim(parent_.flow());
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);  // waits for the task
  FinishOutcome done = Finish(
      {TaskResult{claimed[0].key, claimed[0].attempt, FanOutOf({1, 2})}});
  EXPECT_EQ(done.dispositions[0], ResultDisposition::kCancelled);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kCancelled);
  EXPECT_EQ(AllRuns().size(), 1u);  // no child exists
  EXPECT_TRUE(LinksOf(claimed[0].key).empty());
  EXPECT_EQ(FannedOutAttempts(run), 0);
  EXPECT_EQ(TimesEnded(run), 1);
  ExpectNothingLive(claimed[0].key);
}

TEST_P(FanOutRaces, ImmediateCancelBeforeTheAckMakesItStale) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  std::vector<ClaimedTask> claimed = Claim(parent_.flow());
  ASSERT_EQ(claimed.size(), 1u);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  FinishOutcome done =
      Finish({TaskResult{claimed[0].key, claimed[0].attempt, FanOutOf({1})}});
  EXPECT_EQ(done.dispositions[0], ResultDisposition::kStale);
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_EQ(AllRuns().size(), 1u);
  EXPECT_EQ(TimesEnded(run), 1);
  ExpectNothingLive(claimed[0].key);
}

// The cancel lands just after the ack committed, while a child's handler
// runs: the parked task is cancelled, every child with it, and the child's
// late result is stale.
TEST_P(FanOutRaces, CancelRightAfterTheAckCancelsChildrenInFlight) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  std::vector<ClaimedTask> claimed = Claim(parent_.flow());
  ASSERT_EQ(claimed.size(), 1u);
  FinishOutcome acked = Finish(
      {TaskResult{claimed[0].key, claimed[0].attempt, FanOutOf({1, 2})}});
  ASSERT_EQ(acked.dispositions[0], ResultDisposition::kCompleted);
  const TaskKey parent = claimed[0].key;
  std::vector<ClaimedTask> children = Claim(child_.flow(), 1);
  ASSERT_EQ(children.size(), 1u);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(View(ChildRunId(parent, i)).run.status, RunStatus::kCancelled)
        << i;
  }
  FinishOutcome late = Complete(children[0], Json(1));
  EXPECT_EQ(late.dispositions[0], ResultDisposition::kStale);
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_EQ(link.status, ChildStatus::kCancelled);
  }
  EXPECT_EQ(TimesEnded(run), 1);
  EXPECT_EQ(FannedOutAttempts(run), 1);
  ExpectNothingLive(parent);
}

class FailFastRace : public FanOutRaces {
 protected:
  // A fail-fast parent of two children, acked, both children claimed.
  void Start() {
    run_ = StartParent(
        boost::json::object{{"items", Items({1, 2})}, {"fail_fast", true}});
    Drive(parent_.flow());
    parent_key_ = ParentTask(run_).key;
    children_ = Claim(child_.flow());
    ASSERT_EQ(children_.size(), 2u);
    if (children_[0].key.run_id != ChildRunId(parent_key_, 0)) {
      std::swap(children_[0], children_[1]);
    }
  }
  TaskResult Failing() {
    return {children_[0].key, children_[0].attempt, NonRetryable("bad input")};
  }
  TaskResult Completing() {
    return {children_[1].key, children_[1].attempt,
            Json(boost::json::object{{"doubled", 4}})};
  }
  // The parent failed exactly once, for child 0, and nothing is live.
  void ExpectFailedOnceForChild0() {
    RunView view = View(run_);
    EXPECT_EQ(view.run.status, RunStatus::kFailed);
    EXPECT_THAT(view.run.error, HasSubstr("child 0 failed: bad input"));
    EXPECT_EQ(ParentTask(run_).status, TaskStatus::kFailed);
    EXPECT_EQ(TimesEnded(run_), 1);
    EXPECT_EQ(FannedOutAttempts(run_), 1);
    EXPECT_EQ(View(ChildRunId(parent_key_, 0)).run.status, RunStatus::kFailed);
    std::vector<ChildLinkRecord> links = LinksOf(parent_key_);
    ASSERT_EQ(links.size(), 2u);
    EXPECT_EQ(links[0].status, ChildStatus::kFailed);
    // The sibling's link agrees with its run, whichever won.
    RunStatus sibling = View(ChildRunId(parent_key_, 1)).run.status;
    EXPECT_EQ(links[1].status, sibling == RunStatus::kCompleted
                                   ? ChildStatus::kCompleted
                                   : ChildStatus::kCancelled);
    ExpectNothingLive(parent_key_);
  }

  RunId run_;
  TaskKey parent_key_;
  std::vector<ClaimedTask> children_;
};

// (b) Both results in one batch: their reports meet in one relay pass.
TEST_P(FailFastRace, FailureAndLastCompletionInOneBatch) {
  Start();
  Finish({Completing(), Failing()});
  ExpectFailedOnceForChild0();
  EXPECT_EQ(View(ChildRunId(parent_key_, 1)).run.status, RunStatus::kCompleted);
}

// Both commit before any relay runs (the push path lost), then one relay
// pass and the sweep.
TEST_P(FailFastRace, BothReportsWaitForTheSameRelay) {
  Start();
  std::vector<TaskResult> results = {Failing()};
  ASSERT_TRUE(engine().FinishTasks(results).ok());
  results = {Completing()};
  ASSERT_TRUE(engine().FinishTasks(results).ok());
  clock().Advance(absl::Minutes(1));
  ASSERT_TRUE(engine().ApplyStaleReports(100).ok());
  ASSERT_TRUE(engine().RelayChildReports().ok());
  ASSERT_TRUE(engine().ApplyStaleReports(100).ok());
  ExpectFailedOnceForChild0();
}

// The failure settles the parent first; the sibling's completion arrives
// after its cancel and is stale.
TEST_P(FailFastRace, FailureFirstThenTheSiblingsLateCompletion) {
  Start();
  Finish({Failing()});
  EXPECT_EQ(View(run_).run.status, RunStatus::kFailed);
  EXPECT_EQ(Finish({Completing()}).dispositions[0], ResultDisposition::kStale);
  ExpectFailedOnceForChild0();
  EXPECT_EQ(View(ChildRunId(parent_key_, 1)).run.status, RunStatus::kCancelled);
}

// The sibling completes first (nothing pending but the failing child), then
// the failure: still failed, once.
TEST_P(FailFastRace, CompletionFirstThenTheLastChildFails) {
  Start();
  Finish({Completing()});
  EXPECT_EQ(ParentTask(run_).status, TaskStatus::kWaiting);
  Finish({Failing()});
  ExpectFailedOnceForChild0();
}

SLUICE_CONFORMANCE_SUITE(FanOutRaces);
SLUICE_CONFORMANCE_SUITE(FailFastRace);

}  // namespace
}  // namespace sluice::testing
