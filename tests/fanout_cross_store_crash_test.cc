// The cross-store rows of the fan-out crash matrix
// (docs/decisions/0039-cross-store-children.md), each with the
// fail-Nth-call wrapper on the parent engine's way to the child store, and
// the child store being unreachable for a while.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fanout_cross_store_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::Contains;

class CrossStoreCrash : public CrossStore {
 protected:
  // Runs a fan-out once fault-free, then once per call the parent engine
  // makes to the child store with that call failing: each run must settle
  // once, with the fault-free output. Returns the calls that were failed.
  std::set<std::string> ForEveryFailurePoint(const Json& payload) {
    std::set<std::string> failed_calls;
    Json expected;
    RunStatus expected_status = RunStatus::kStarted;
    for (int n = 0;; ++n) {
      SCOPED_TRACE(absl::StrCat("failing call ", n));
      if (n > 0) Open();
      RunId run = StartParent(payload);
      if (n > 0) link_->FailIn(n);
      EXPECT_TRUE(RunToEnd(run)) << "failed " << link_->failed_call();
      const bool failed = link_->failed();
      if (failed) failed_calls.insert(link_->failed_call());
      link_->Disarm();
      RunView view = ParentView(run);
      if (n == 0) {
        expected = view.run.output.value_or(Json());
        expected_status = view.run.status;
      } else {
        EXPECT_EQ(view.run.status, expected_status) << link_->failed_call();
        EXPECT_EQ(view.run.output.value_or(Json()), expected)
            << link_->failed_call();
      }
      EXPECT_EQ(TimesEnded(run), 1) << link_->failed_call();
      // The parent's handler fanned out once: no second manifest.
      EXPECT_EQ(LinksOf(ParentTaskOf(run)).size(),
                payload.at("items").as_array().size());
      if (n > 0 && !failed) break;  // past the last call
      if (n > 200) {
        ADD_FAILURE() << "too many calls";
        break;
      }
    }
    return failed_calls;
  }
};

// Every call of the ack's planning, the children's creation, the relay's
// peek, its delete after the parent's commit, and the repair reads.
TEST_P(CrossStoreCrash, EveryFailurePointOfCollectRecovers) {
  std::set<std::string> failed = ForEveryFailurePoint(
      boost::json::object{{"items", J(R"([{"n":1},{"fail":"no"}])")}});
  // The rows of the matrix were all hit: the child's commit before the
  // relay (peek), the parent's apply before the delete, creation.
  EXPECT_THAT(failed, Contains("PeekChildReports"));
  EXPECT_THAT(failed, Contains("DeleteChildReports"));
  EXPECT_THAT(failed, Contains("Commit"));
  EXPECT_THAT(failed, Contains("Begin"));
}

TEST_P(CrossStoreCrash, EveryFailurePointOfFailFastRecovers) {
  ForEveryFailurePoint(boost::json::object{
      {"items", J(R"([{"fail":"no"},{"n":2}])")}, {"fail_fast", true}});
}

// Row: the child commits its end (and its report) at the edge; the relay
// has not run. Nothing is lost: the next relay pass applies it.
TEST_P(CrossStoreCrash, ChildCommittedBeforeTheRelayIsCaughtUp) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  DriveParents();
  DriveChildren();
  EXPECT_EQ(ChildReportsAtEdge(), 1);
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kStarted);
  Sweep();  // the parent's worker sweep relays
  EXPECT_EQ(ParentView(run).run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":2}}])"));
  EXPECT_EQ(ChildReportsAtEdge(), 0);
}

// Row: the parent's store committed the application; deleting the reports
// at the edge fails. The next pass applies them again (no-op) and deletes.
TEST_P(CrossStoreCrash, AppliedButNotDeletedAppliesOnce) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  DriveParents();
  DriveChildren();
  // Every delete at the edge fails (each relay round applies the reports
  // again first): the parent settles once, the reports stay.
  link_->FailEvery("DeleteChildReports");
  (void)central_->RelayChildReports();
  (void)central_->RelayChildReports();
  link_->FailEvery("");
  RunView view = ParentView(run);
  ASSERT_EQ(view.run.status, RunStatus::kCompleted);
  Json settled = view.run.output.value_or(Json());
  EXPECT_EQ(ChildReportsAtEdge(), 2);  // still there
  absl::StatusOr<int> relayed = central_->RelayChildReports();
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(*relayed, 2);
  EXPECT_EQ(ParentView(run).run.output.value_or(Json()), settled);
  ExpectSettledOnce(run);
}

// Row: the child store is unreachable. The ack cannot plan children there,
// so the attempt fails and is retried; once parked, reports and cancels
// wait for the store to come back.
TEST_P(CrossStoreCrash, AnUnreachableChildStoreDelaysButLosesNothing) {
  link_->SetDown(true);
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  DriveParents();  // the ack fails: nothing parks, nothing is created
  EXPECT_TRUE(LinksOf(ParentTaskOf(run)).empty());
  link_->SetDown(false);
  Sweep();  // stall recovery re-queues the parent
  ASSERT_EQ(DriveParents(), 1);
  ASSERT_EQ(LinksOf(ParentTaskOf(run)).size(), 2u);
  DriveChildren();
  link_->SetDown(true);
  Sweep();
  Sweep();
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kStarted);
  EXPECT_EQ(ChildReportsAtEdge(), 2);
  link_->SetDown(false);
  Sweep();
  EXPECT_EQ(ParentView(run).run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":2}},
                  {"status":"completed","output":{"doubled":4}}])"));
  ExpectSettledOnce(run);
}

TEST_P(CrossStoreCrash, ACancelOwedToAnUnreachableStoreIsDeliveredLater) {
  RunId run = StartParent(boost::json::object{{"items", Items({1})}});
  DriveParents();
  const TaskKey parent = ParentTaskOf(run);
  link_->SetDown(true);
  ASSERT_TRUE(central_->CancelRun(run).ok());
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kCancelled);
  EXPECT_FALSE(LinksOf(parent)[0].cascaded);
  EXPECT_EQ(ChildView(ChildRunId(parent, 0)).run.status, RunStatus::kStarted);
  link_->SetDown(false);
  Sweep();
  EXPECT_EQ(ChildView(ChildRunId(parent, 0)).run.status, RunStatus::kCancelled);
  EXPECT_TRUE(LinksOf(parent)[0].cascaded);
  ExpectSettledOnce(run);
}

// Row: the ack committed but the children were never created at the edge
// (the process died in between): the sweeper creates them from the links.
TEST_P(CrossStoreCrash, ChildrenLostBetweenAckAndCreationAreRecreated) {
  // Fail each edge call in turn until one leaves the parent parked without
  // its child: the failed call was the creation after the ack.
  RunId run;
  for (int n = 1; n < 50; ++n) {
    Open();
    run = StartParent(boost::json::object{{"items", Items({3})}});
    link_->FailIn(n);
    DriveParents();
    if (!LinksOf(ParentTaskOf(run)).empty() &&
        !edge_->GetRun(ChildRunId(ParentTaskOf(run), 0)).ok()) {
      break;  // parked, no child: the window under test
    }
  }
  link_->Disarm();
  const TaskKey parent = ParentTaskOf(run);
  ASSERT_EQ(LinksOf(parent).size(), 1u);
  ASSERT_FALSE(edge_->GetRun(ChildRunId(parent, 0)).ok());
  Sweep();  // RepairChildLinks creates it at the edge
  ASSERT_TRUE(edge_->GetRun(ChildRunId(parent, 0)).ok());
  ASSERT_TRUE(RunToEnd(run));
  EXPECT_EQ(ParentView(run).run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":6}}])"));
}

// Row: the parent run is cancelled after the ack committed and the
// creation read the links (still pending), before the children commit at
// the edge. The cancel commits first and its cascade finds no child; the
// creation, reading the links again after its own commit, finds the cancel
// and cancels the children it made (the double check of 0039).
TEST_P(CrossStoreCrash, ACancelWhileTheChildrenAreCreatedCancelsThem) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  const TaskKey parent = ParentTaskOf(run);
  bool in_window = false;
  // The fan-out's Begins at the edge: the ack's planning, then the
  // children's creation.
  link_->AtBegin(2, [&] {
    in_window = LinksOf(parent).size() == 2 &&
                LinksOf(parent)[0].status == ChildStatus::kPending &&
                absl::IsNotFound(edge_->GetRun(ChildRunId(parent, 0)).status());
    EXPECT_TRUE(central_->CancelRun(run).ok());
    // The cascade found nothing to cancel and owes nothing more.
    for (const ChildLinkRecord& link : LinksOf(parent)) {
      EXPECT_EQ(link.status, ChildStatus::kCancelled);
      EXPECT_TRUE(link.cascaded);
    }
  });
  ASSERT_EQ(DriveParents(), 1);
  ASSERT_TRUE(in_window) << "the cancel did not land between the commits";
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kCancelled);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ChildView(ChildRunId(parent, i)).run.status,
              RunStatus::kCancelled)
        << i;
  }
  ExpectSettledOnce(run);
}

// The same cancel, and the edge goes down right after the children's
// commit, so the creation's second look cannot cancel them: they run to
// their end when it is back, and their reports, owed to a parent that
// is cancelled, are applied as no-ops and deleted, not kept.
TEST_P(CrossStoreCrash, ReportsOfChildrenOfACancelledParentAreConsumed) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  const TaskKey parent = ParentTaskOf(run);
  link_->AtBegin(2, [&] {
    EXPECT_TRUE(central_->CancelRun(run).ok());
    link_->AtBegin(1, [&] { link_->SetDown(true); });  // after the creation
  });
  ASSERT_EQ(DriveParents(), 1);
  link_->SetDown(false);
  ASSERT_EQ(DriveChildren(), 2);
  EXPECT_EQ(ChildReportsAtEdge(), 2);
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kCancelled);
  ExpectSettledOnce(run);
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_EQ(link.status, ChildStatus::kCancelled);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, CrossStoreCrash,
                         ::testing::Values(StorePair{"memory", "sqlite"},
                                           StorePair{"sqlite", "postgres"}),
                         [](const auto& info) {
                           return info.param.first + "_to_" + info.param.second;
                         });

}  // namespace
}  // namespace sluice::testing
