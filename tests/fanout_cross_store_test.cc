// Children in another store: settling, fail-fast, cancel, and reports
// duplicated or lost (docs/decisions/0039-cross-store-children.md).
#include <string>
#include <vector>

#include "fanout_cross_store_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

TEST_P(CrossStore, ChildrenLiveInTheOtherStoreAndSettleInChildOrder) {
  RunId run = StartParent(
      boost::json::object{{"items", J(R"([{"n":1},{"fail":"no"},{"n":3}])")}});
  ASSERT_EQ(DriveParents(), 1);
  const TaskKey parent = ParentTaskOf(run);
  std::vector<ChildLinkRecord> links = LinksOf(parent);
  ASSERT_EQ(links.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(links[i].child_store, "edge");
    RunView child = ChildView(ChildRunId(parent, i));  // in the edge store
    EXPECT_EQ(child.run.status, RunStatus::kStarted);
    const Json& envelope = child.run.options.as_object().at("parent");
    EXPECT_EQ(envelope.at("store"), "central");
    EXPECT_EQ(envelope.at("run"), Json(run.ToString()));
    EXPECT_EQ(envelope.at("child"), i);
  }
  absl::StatusOr<RunView> not_here = central_->GetRun(ChildRunId(parent, 0));
  EXPECT_TRUE(absl::IsNotFound(not_here.status())) << not_here.status();

  EXPECT_EQ(DriveChildren(), 3);
  // The edge's own relay leaves reports owed to another store alone.
  EXPECT_EQ(ChildReportsAtEdge(), 3);
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kStarted);
  absl::StatusOr<int> relayed = central_->RelayChildReports();
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(*relayed, 3);
  RunView view = ParentView(run);
  ASSERT_EQ(view.run.status, RunStatus::kCompleted) << view.run.error;
  EXPECT_EQ(view.run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":2}},
                  {"status":"failed","error":"no"},
                  {"status":"completed","output":{"doubled":6}}])"));
  EXPECT_EQ(ChildReportsAtEdge(), 0);
  // Another pass finds nothing to do.
  relayed = central_->RelayChildReports();
  ASSERT_TRUE(relayed.ok());
  EXPECT_EQ(*relayed, 0);
  ExpectSettledOnce(run);
}

TEST_P(CrossStore, FailFastCancelsTheSiblingsInTheOtherStore) {
  RunId run = StartParent(
      boost::json::object{{"items", J(R"([{"n":1},{"fail":"bad"},{"n":3}])")},
                          {"fail_fast", true}});
  DriveParents();
  const TaskKey parent = ParentTaskOf(run);
  // Only the failing child runs; the others are still queued at the edge.
  ClaimRequest request;
  request.queue = "kids";
  request.worker_id = "edge";
  request.served.AddFlow(child_.flow().shape());
  absl::StatusOr<std::vector<ClaimedTask>> claimed = edge_->Claim(request);
  ASSERT_TRUE(claimed.ok());
  for (const ClaimedTask& t : *claimed) {
    std::vector<Lease> lease = {{t.key, t.attempt}};
    if (t.key.run_id != ChildRunId(parent, 1)) {
      ASSERT_TRUE(edge_->ReleaseTasks(lease).ok());
      continue;
    }
    std::vector<TaskResult> r = {{t.key, t.attempt, NonRetryable("bad")}};
    absl::StatusOr<FinishOutcome> done = edge_->FinishTasks(r);
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_TRUE(edge_->ApplyReports(done->report_ids).ok());
  }
  ASSERT_TRUE(central_->RelayChildReports().ok());
  RunView view = ParentView(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("child 1 failed: bad"));
  EXPECT_EQ(ChildView(ChildRunId(parent, 0)).run.status, RunStatus::kCancelled);
  EXPECT_EQ(ChildView(ChildRunId(parent, 2)).run.status, RunStatus::kCancelled);
  // The cancelled children's reports are relayed and dropped.
  ExpectSettledOnce(run);
}

TEST_P(CrossStore, CancellingTheParentCancelsChildrenInTheOtherStore) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  DriveParents();
  const TaskKey parent = ParentTaskOf(run);
  ASSERT_TRUE(central_->CancelRun(run).ok());
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kCancelled);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ChildView(ChildRunId(parent, i)).run.status,
              RunStatus::kCancelled)
        << i;
  }
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_EQ(link.status, ChildStatus::kCancelled);
  }
  ExpectSettledOnce(run);
}

TEST_P(CrossStore, DuplicatedReportsNeverApplyTwice) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  DriveParents();
  const TaskKey parent = ParentTaskOf(run);
  DriveChildren();
  // Each report twice, the copy saying something else: the first settles
  // its link, the copy finds it settled.
  std::vector<ChildReport> copies = PeekEdgeReports();
  ASSERT_EQ(copies.size(), 2u);
  for (ChildReport& r : copies) {
    r.outcome = ChildStatus::kFailed;
    r.output.reset();
    r.error = "a copy";
  }
  AppendEdgeReports(copies);
  ASSERT_TRUE(central_->RelayChildReports().ok());
  Json expected = J(R"([{"status":"completed","output":{"doubled":2}},
                        {"status":"completed","output":{"doubled":4}}])");
  ASSERT_EQ(ParentView(run).run.output->at("job"), expected);
  // A relay that applied them but died before deleting them: applied again
  // after the parent settled, they change nothing and are deleted.
  AppendEdgeReports(copies);
  absl::StatusOr<int> relayed = central_->RelayChildReports();
  ASSERT_TRUE(relayed.ok());
  EXPECT_EQ(*relayed, 2);
  EXPECT_EQ(ParentView(run).run.output->at("job"), expected);
  for (const ChildLinkRecord& link : LinksOf(parent)) {
    EXPECT_EQ(link.status, ChildStatus::kCompleted);
  }
  ExpectSettledOnce(run);
}

TEST_P(CrossStore, ALostReportIsRepairedFromTheChildStore) {
  RunId run = StartParent(boost::json::object{{"items", Items({5})}});
  DriveParents();
  DriveChildren();
  // The report is lost (deleted by hand); the child's run says it ended.
  {
    std::vector<int64_t> ids;
    for (const ChildReport& r : PeekEdgeReports()) ids.push_back(r.report_id);
    ASSERT_EQ(ids.size(), 1u);
    absl::StatusOr<std::unique_ptr<Transaction>> tx = edge_store_->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE((*tx)->DeleteChildReports(ids).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  ASSERT_TRUE(central_->RelayChildReports().ok());
  EXPECT_EQ(ParentView(run).run.status, RunStatus::kStarted);
  clock_.Advance(absl::Minutes(5));
  absl::StatusOr<int> repaired = central_->RepairChildLinks();
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, 1);
  EXPECT_EQ(ParentView(run).run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":10}}])"));
  EXPECT_EQ(TimesEnded(run), 1);
}

TEST_P(CrossStore, BadStoreOptionsAreRefused) {
  EngineOptions options;
  options.stores = {{"edge", link_.get()}};
  absl::StatusOr<std::unique_ptr<Engine>> e =
      Engine::Create(*central_store_, options);
  EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << e.status();
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("store_name"));
  options.store_name = "central";
  options.stores = {{"bad name", link_.get()}};
  e = Engine::Create(*central_store_, options);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("\"bad name\""));
  options.stores = {{"edge", nullptr}};
  e = Engine::Create(*central_store_, options);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("null"));
  options.stores = {{"central", link_.get()}};
  e = Engine::Create(*central_store_, options);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("own store_name"));
}

TEST_P(CrossStore, AnUnknownStoreFailsTheParentWithoutRetry) {
  Job parent(
      "pstray", {.queue = "stray", .max_attempts = 3},
      [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        FanOut out;
        out.children.push_back(
            {.name = "child", .payload = J(R"({"n":1})"), .store = "nowhere"});
        return out;
      });
  ASSERT_TRUE(central_->Deploy(parent).ok());
  absl::StatusOr<EnqueueResult> run = central_->Enqueue(parent, Json());
  ASSERT_TRUE(run.ok());
  DriveJob(*central_, parent);
  RunView view = ParentView(run->run_id);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error,
              HasSubstr("store \"nowhere\" is not one of EngineOptions"));
  EXPECT_EQ(view.attempts.size(), 1u);
}

TEST_P(CrossStore, AChildNameUnknownInTheOtherStoreIsRefused) {
  Job parent("pname", {.queue = "pname", .max_attempts = 3},
             [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
               FanOut out;
               // Deployed here, not at the edge.
               out.children.push_back(
                   {.name = "pname", .payload = Json(), .store = "edge"});
               return out;
             });
  ASSERT_TRUE(central_->Deploy(parent).ok());
  absl::StatusOr<EnqueueResult> run = central_->Enqueue(parent, Json());
  ASSERT_TRUE(run.ok());
  DriveJob(*central_, parent);
  RunView view = ParentView(run->run_id);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_THAT(view.run.error, HasSubstr("in store \"edge\""));
  EXPECT_EQ(ChildReportsAtEdge(), 0);
}

// Real workers on both sides, on the real clock: the edge's worker runs the
// children, the parent's worker's sweep relays their reports.
TEST_P(CrossStore, WorkersOnBothSidesSettleTheParent) {
  EngineOptions options;
  options.log = [](LogLevel, std::string_view) {};
  options.store_name = "central";
  options.stores = {{"edge", edge_store_.get()}};
  absl::StatusOr<std::unique_ptr<Engine>> central =
      Engine::Create(*central_store_, options);
  ASSERT_TRUE(central.ok()) << central.status();
  absl::StatusOr<std::unique_ptr<Engine>> edge =
      Engine::Create(*edge_store_, {.log = options.log});
  ASSERT_TRUE(edge.ok()) << edge.status();
  WorkerOptions fast{.poll_interval = absl::Milliseconds(10),
                     .sweep_interval = absl::Milliseconds(20)};
  absl::StatusOr<std::unique_ptr<Worker>> parents =
      (*central)->StartWorker(parent_.flow(), fast);
  ASSERT_TRUE(parents.ok()) << parents.status();
  absl::StatusOr<std::unique_ptr<Worker>> children =
      (*edge)->StartWorker(child_.flow(), fast);
  ASSERT_TRUE(children.ok()) << children.status();
  absl::StatusOr<EnqueueResult> run = (*central)->Enqueue(
      parent_, boost::json::object{{"items", Items({1, 2, 3, 4})}});
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<RunView> view;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  do {
    absl::SleepFor(absl::Milliseconds(10));  // polling, bounded by deadline
    view = (*central)->GetRun(run->run_id);
  } while (view.ok() && !IsTerminal(view->run.status) &&
           absl::Now() < deadline);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->run.status, RunStatus::kCompleted) << view->run.error;
  EXPECT_EQ(view->run.output->at("job"),
            J(R"([{"status":"completed","output":{"doubled":2}},
                  {"status":"completed","output":{"doubled":4}},
                  {"status":"completed","output":{"doubled":6}},
                  {"status":"completed","output":{"doubled":8}}])"));
  EXPECT_TRUE((*parents)->Stop().ok());
  EXPECT_TRUE((*children)->Stop().ok());
}

INSTANTIATE_TEST_SUITE_P(Stores, CrossStore,
                         ::testing::Values(StorePair{"memory", "sqlite"},
                                           StorePair{"sqlite", "postgres"}),
                         [](const auto& info) {
                           return info.param.first + "_to_" + info.param.second;
                         });

}  // namespace
}  // namespace sluice::testing
