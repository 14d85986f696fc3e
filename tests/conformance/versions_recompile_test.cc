// Fenced local recompilation (EngineOptions::development_recompile).
#include "versions_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class VersionsRecompile : public Versions {
 protected:
  void UseDevelopmentEngine() {
    EngineOptions options = DefaultOptions();
    options.development_recompile = true;
    UseEngine(backend(), std::move(options));
  }

  absl::StatusOr<std::vector<ClaimedTask>> ClaimAt(const Flow& flow,
                                                   int64_t generation) {
    ClaimRequest request;
    request.queue = flow.shape().steps.front().queue_name;
    request.worker_id = "worker-gen-" + std::to_string(generation);
    request.served.AddFlow(flow.shape());
    request.generations.push_back(FlowGeneration{flow.slug(), generation});
    return engine().Claim(request);
  }
};

Flow Shape1() { return Version("dev", "dev", "first"); }
Flow Shape2() {
  Flow flow("dev");
  flow.Step("first", Echo()).Step("second", {.depends_on = {"first"}}, Echo());
  return flow;
}

TEST_P(VersionsRecompile, Off_ChangedShapeStillFailsAndChangesNothing) {
  Deploy(Shape1());
  RunId run = Start(Shape1(), J("{}"));
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(Shape2());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("differs from the deployed flow of that slug"));
  EXPECT_EQ(StoredFlow("dev").generation, 1);
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);
}

TEST_P(VersionsRecompile, On_ChangedShape_RecompilesAndDeletesTheRuns) {
  UseDevelopmentEngine();
  Deploy(Shape1());
  RunId first = Start(Shape1(), J("{}"));
  RunId second = Start(Shape1(), J("{}"));
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(Shape2());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, DeployOutcome::kRecompiled);
  EXPECT_EQ(StoredFlow("dev").generation, 2);
  EXPECT_EQ(engine().GetRun(first).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().GetRun(second).status().code(),
            absl::StatusCode::kNotFound);
  int warnings = 0;
  for (const std::string& line : LogLines()) {
    if (line.find("flow \"dev\" recompiled") == std::string::npos) continue;
    ++warnings;
    EXPECT_THAT(line, HasSubstr("deleted 2 runs"));
  }
  EXPECT_EQ(warnings, 1);
  // New runs have the new shape.
  RunId fresh = Start(Shape2(), J("{}"));
  EXPECT_EQ(View(fresh).steps.size(), 2u);
  EXPECT_EQ(Drive(Shape2()), 2);
  EXPECT_EQ(View(fresh).run.status, RunStatus::kCompleted);
  // The same shape again only verifies.
  absl::StatusOr<DeployOutcome> again = engine().Deploy(Shape2());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
  EXPECT_EQ(StoredFlow("dev").generation, 2);
}

TEST_P(VersionsRecompile, On_OldWorkersClaim_IsRefusedAndTheBatchStaysVisible) {
  UseDevelopmentEngine();
  Deploy(Shape1());
  ASSERT_EQ(engine().Deploy(Shape2()).value_or(DeployOutcome::kCompiled),
            DeployOutcome::kRecompiled);
  RunId run = Start(Shape2(), J("{}"));
  absl::StatusOr<std::vector<ClaimedTask>> old = ClaimAt(Shape1(), 1);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(old.status().message()),
              HasSubstr("flow \"dev\" was recompiled (generation 2)"));
  absl::StatusOr<std::vector<ClaimedTask>> current = ClaimAt(Shape2(), 2);
  ASSERT_TRUE(current.ok()) << current.status();
  ASSERT_EQ(current->size(), 1u);
  EXPECT_EQ(current->front().key.run_id, run);
  EXPECT_EQ(current->front().attempt, 1);
}

TEST_P(VersionsRecompile, On_AWorkerOfTheOldGeneration_StopsAtItsNextClaim) {
  UseDevelopmentEngine();
  WorkerOptions options;
  options.concurrency = 1;
  options.poll_interval = absl::Hours(1);  // only the enqueue wakes it
  options.heartbeat_interval = absl::Milliseconds(20);
  options.sweep_interval = absl::ZeroDuration();
  Flow shape1 = Shape1();
  absl::StatusOr<std::unique_ptr<Worker>> old =
      engine().StartWorker(shape1, options);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_EQ(engine().Deploy(Shape2()).value_or(DeployOutcome::kCompiled),
            DeployOutcome::kRecompiled);
  RunId run = Start(Shape2(), J("{}"));
  ASSERT_TRUE((*old)->WaitFor(absl::Seconds(30)));
  absl::Status stopped = (*old)->Wait();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stopped.message()), HasSubstr("was recompiled"));
  RunView view = View(run);
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kQueued);
  EXPECT_EQ(view.tasks[0].attempts, 0);
}

TEST_P(VersionsRecompile, On_OldAttemptsResult_IsNotFound) {
  UseDevelopmentEngine();
  Deploy(Shape1());
  Start(Shape1(), J("{}"));
  absl::StatusOr<std::vector<ClaimedTask>> claimed = ClaimAt(Shape1(), 1);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->size(), 1u);
  ASSERT_EQ(engine().Deploy(Shape2()).value_or(DeployOutcome::kCompiled),
            DeployOutcome::kRecompiled);
  std::vector<TaskResult> results{
      TaskResult{claimed->front().key, claimed->front().attempt, J("1")}};
  absl::StatusOr<FinishOutcome> finished = engine().FinishTasks(results);
  ASSERT_TRUE(finished.ok()) << finished.status();
  ASSERT_EQ(finished->dispositions.size(), 1u);
  EXPECT_EQ(finished->dispositions[0], ResultDisposition::kNotFound);
  EXPECT_TRUE(finished->report_ids.empty());
}

TEST_P(VersionsRecompile, On_AliasChangeIsStillRefused) {
  UseDevelopmentEngine();
  Deploy(Shape1());
  Flow moved = Shape2();
  moved.Alias("elsewhere");
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(moved);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StoredFlow("dev").generation, 1);
}

TEST_P(VersionsRecompile, On_AnotherEnginesCache_SeesTheNewShape) {
  // Two engines on one store, as two processes: the one that did not
  // recompile must not keep starting runs of the old shape.
  UseDevelopmentEngine();
  EngineOptions options = DefaultOptions();
  options.development_recompile = true;
  absl::StatusOr<std::unique_ptr<Engine>> other =
      Engine::Create(backend(), std::move(options));
  ASSERT_TRUE(other.ok()) << other.status();
  Deploy(Shape1());
  ASSERT_TRUE((*other)->StartRun("dev", J("{}")).ok());  // caches shape 1
  ASSERT_EQ(engine().Deploy(Shape2()).value_or(DeployOutcome::kCompiled),
            DeployOutcome::kRecompiled);
  absl::StatusOr<RunId> run = (*other)->StartRun("dev", J("{}"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(View(*run).steps.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, VersionsRecompile,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
