// Fan-out children: results, parking, options, nesting
// (docs/decisions/0028-fan-out-children.md).
#include "fanout_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class FanOutBasic : public FanOutConformance {};

TEST_P(FanOutBasic, ResultsComeInChildOrder) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2, 3})}});
  DriveAll();
  EXPECT_EQ(JobOutput(run), J(R"([{"status":"completed","output":{"doubled":2}},
                  {"status":"completed","output":{"doubled":4}},
                  {"status":"completed","output":{"doubled":6}}])"));
  EXPECT_EQ(ChildReports(), 0);
}

TEST_P(FanOutBasic, ParentParksWithoutLeaseWhileChildrenRun) {
  RunId run = StartParent(boost::json::object{{"items", Items({1, 2})}});
  Drive(parent_.flow());
  TaskRecord task = ParentTask(run);
  EXPECT_EQ(task.status, TaskStatus::kWaiting);
  EXPECT_FALSE(task.stall_at.has_value());
  EXPECT_EQ(CountsOf("work").parked, 1);
  // Stall recovery leaves a parked task alone however long it waits.
  clock().Advance(absl::Hours(2));
  ASSERT_TRUE(engine().RecoverStalledTasks(100).ok());
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kWaiting);
  RunView view = View(run);
  ASSERT_FALSE(view.attempts.empty());
  EXPECT_EQ(view.attempts.back().outcome, AttemptOutcome::kFannedOut);
  DriveAll();
  EXPECT_EQ(ParentTask(run).status, TaskStatus::kCompleted);
}

TEST_P(FanOutBasic, ChildIdsAreDerivedFromParentAndIndex) {
  RunId run = StartParent(boost::json::object{{"items", Items({5, 6})}});
  Drive(parent_.flow());
  TaskKey parent = ParentTask(run).key;
  std::vector<ChildLinkRecord> links = LinksOf(parent);
  ASSERT_EQ(links.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(links[i].child_index, i);
    EXPECT_EQ(links[i].child_run_id, ChildRunId(parent, i));
    EXPECT_EQ(View(links[i].child_run_id).run.status, RunStatus::kStarted);
  }
  EXPECT_NE(ChildRunId(parent, 0), ChildRunId(parent, 1));
}

TEST_P(FanOutBasic, CollectModeHandsOverMixedOutcomes) {
  Json items = J(R"([{"n":1},{"fail":"boom"},{"n":3}])");
  RunId run = StartParent(boost::json::object{{"items", items}});
  DriveAll();
  EXPECT_EQ(JobOutput(run), J(R"([{"status":"completed","output":{"doubled":2}},
                  {"status":"failed","error":"boom"},
                  {"status":"completed","output":{"doubled":6}}])"));
}

TEST_P(FanOutBasic, EmptyFanOutCompletesAtOnce) {
  RunId run = StartParent(boost::json::object{{"items", J("[]")}});
  DriveAll();
  EXPECT_EQ(JobOutput(run), J("[]"));
  EXPECT_TRUE(LinksOf(ParentTask(run).key).empty());
}

TEST_P(FanOutBasic, ChildOptionsReachTheChildren) {
  Job parent(
      "popts", {.queue = "work"},
      [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
        FanOut out;
        Json meta = boost::json::object{{"tag", "x"}};
        out.children.push_back(
            {.name = "child",
             .payload = boost::json::object{{"n", 1}},
             .options = {.priority = 7, .max_attempts = 5, .metadata = meta}});
        return out;
      });
  DeployJob(parent);
  RunId run = Enqueue(parent, Json()).run_id;
  Drive(parent.flow());
  std::vector<ChildLinkRecord> links = LinksOf(TaskOf(run, "job").key);
  ASSERT_EQ(links.size(), 1u);
  RunView child = View(links[0].child_run_id);
  EXPECT_EQ(child.run.priority, 7);
  EXPECT_EQ(child.run.metadata, J(R"({"tag":"x"})"));
  EXPECT_EQ(child.run.flow_slug, child_.flow().slug());
}

TEST_P(FanOutBasic, ChildIdAndDedupeOptionsAreIgnored) {
  Job parent("pdup", {.queue = "work"},
             [](const Json&, TaskContext&) -> absl::StatusOr<StepResult> {
               FanOut out;
               for (int i = 0; i < 2; ++i) {
                 out.children.push_back(
                     {.name = "child",
                      .payload = boost::json::object{{"n", i}},
                      .options = {.id = "same", .dedupe = Dedupe{.key = "k"}}});
               }
               return out;
             });
  DeployJob(parent);
  RunId run = Enqueue(parent, Json()).run_id;
  DriveAll({&parent, &child_});
  Json out = JobOutput(run);
  EXPECT_EQ(out.as_array().size(), 2u);
}

TEST_P(FanOutBasic, FlowsCanBeChildren) {
  Flow pipeline("pipeline", {.queue = "work"});
  pipeline.Step("a", Echo());
  pipeline.Step("b", {.depends_on = {"a"}}, Returns(J("\"done\"")));
  Deploy(pipeline);
  RunId run = StartParent(
      boost::json::object{{"items", J("[{\"x\":1}]")}, {"child", "pipeline"}});
  DriveAll({&parent_, &child_});
  Drive(pipeline);
  Drive(pipeline);
  Drive(parent_.flow());
  EXPECT_EQ(JobOutput(run),
            J(R"([{"status":"completed","output":{"b":"done"}}])"));
}

TEST_P(FanOutBasic, NestsToTheDepthCap) {
  Job nest = NestJob();
  DeployJob(nest);
  RunId run = Enqueue(nest, J(R"({"depth":8})")).run_id;
  DriveAll({&nest});
  Json out = JobOutput(run);
  for (int level = 0; level < 7; ++level) {
    ASSERT_TRUE(out.is_array()) << SerializeJson(out);
    EXPECT_EQ(out.as_array()[0].at("status"), "completed");
    out = out.as_array()[0].at("output");
  }
  EXPECT_EQ(out, J(R"([{"status":"completed","output":"leaf"}])"));
}

TEST_P(FanOutBasic, FanOutPastTheDepthCapFailsClearly) {
  Job nest = NestJob();
  DeployJob(nest);
  RunId run = Enqueue(nest, J(R"({"depth":9})")).run_id;
  DriveAll({&nest});
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
  bool found = false;
  for (const RunRecord& r : AllRuns()) {
    if (r.status != RunStatus::kFailed) continue;
    found = true;
    EXPECT_THAT(r.error, HasSubstr("too deep"));
    EXPECT_THAT(r.error, HasSubstr("max_fan_out_depth"));
    RunView failed = View(r.run_id);
    EXPECT_EQ(failed.attempts.size(), 1u);  // not retried
  }
  EXPECT_TRUE(found);
}

SLUICE_CONFORMANCE_SUITE(FanOutBasic);

}  // namespace
}  // namespace sluice::testing
