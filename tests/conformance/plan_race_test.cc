// Another engine's transaction lands between a plan made before a
// transaction (decision 0089) and that transaction's Begin: the checks in
// the transaction catch what changed, and a call that plans again keeps the
// run ids it drew.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness.h"
#include "sluice/forwarding_backend.h"
#include "versions_fixture.h"

namespace sluice::testing {
namespace {

// Runs a one-shot hook just before the next Begin.
class HookBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void Arm(std::function<void()> hook) { hook_ = std::move(hook); }

 protected:
  absl::Status BeforeBegin() override {
    if (hook_) {
      auto hook = std::move(hook_);
      hook_ = nullptr;
      hook();
    }
    return absl::OkStatus();
  }

 private:
  std::function<void()> hook_;
};

class PlanRace : public Versions {
 protected:
  void SetUp() override {
    Versions::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend to hook
    hooked_ = std::make_unique<HookBackend>(backend());
    EngineOptions options = DefaultOptions();
    options.run_id_source = [this] {
      ++ids_made_;
      return RunId::Random();
    };
    UseEngine(*hooked_, std::move(options));
    absl::StatusOr<std::unique_ptr<Engine>> other =
        Engine::Create(backend(), DefaultOptions());
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = *std::move(other);
  }
  void TearDown() override {
    other_.reset();
    if (!IsSkipped()) UseEngine(backend(), DefaultOptions());
    hooked_.reset();
    Versions::TearDown();
  }
  HookBackend& hooked() { return *hooked_; }
  Engine& other() { return *other_; }

  std::unique_ptr<HookBackend> hooked_;
  std::unique_ptr<Engine> other_;
  std::atomic<int> ids_made_{0};
};

Flow OneStep(std::string slug) {
  Flow flow(std::move(slug));
  flow.Step("work", Echo());
  return flow;
}

// A failure planned before Begin, with a cancel request landing meanwhile:
// the write's compare-and-set must send it to a fresh read, and the task
// ends cancelled (not retried).
TEST_P(PlanRace, FailureAfterCancelRequest_EndsCancelled) {
  Flow flow = OneStep("raced");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  hooked().Arm(
      [&] { ASSERT_TRUE(other().CancelRun(run, CancelMode::kRequest).ok()); });
  std::vector<TaskResult> results{
      WithRecord(claimed[0], absl::InternalError("boom"))};
  absl::StatusOr<FinishOutcome> outcome =
      engine().FinishTasks(results, {.apply_completions = true});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_THAT(outcome->dispositions,
              ::testing::ElementsAre(ResultDisposition::kCancelled));
  ASSERT_TRUE(engine().ApplyReports(outcome->report_ids).ok());
  RunView view = View(run);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kCancelled);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
}

// A completion planned before Begin, with stall recovery and a new claim
// landing meanwhile: the result is stale and the new attempt stays started.
TEST_P(PlanRace, CompletionAfterStallRecoveryAndReclaim_IsStale) {
  Flow flow("stalls");
  flow.Step("work", {.timeout = absl::Seconds(10)}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  hooked().Arm([&] {
    clock().Advance(absl::Minutes(5));
    absl::StatusOr<int> recovered = other().RecoverStalledTasks(100);
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    ASSERT_EQ(*recovered, 1);
    ClaimRequest request;
    request.queue = flow.shape().steps.front().queue_name;
    request.worker_id = "w2";
    request.served.AddFlow(flow.shape());
    absl::StatusOr<std::vector<ClaimedTask>> again = other().Claim(request);
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_EQ(again->size(), 1u);
  });
  std::vector<TaskResult> results{WithRecord(claimed[0], StepResult(J("1")))};
  absl::StatusOr<FinishOutcome> outcome =
      engine().FinishTasks(results, {.apply_completions = true});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_THAT(outcome->dispositions,
              ::testing::ElementsAre(ResultDisposition::kStale));
  RunView view = View(run);
  EXPECT_EQ(view.tasks[0].status, TaskStatus::kStarted);
  EXPECT_EQ(view.tasks[0].attempts, 2);
  EXPECT_EQ(view.run.status, RunStatus::kStarted);
}

// A start planned before Begin, the alias moved meanwhile by another
// engine: the run pins the new version, with the id the discarded plan
// drew.
TEST_P(PlanRace, StartAfterActivation_PinsTheNewVersion) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(engine().StartRun("greet", J("{}")).ok());  // learns the alias
  ids_made_ = 0;
  hooked().Arm([&] {
    ASSERT_TRUE(other().Activate("greet", "greet_v2", "greet_v1").ok());
  });
  absl::StatusOr<RunId> run = engine().StartRun("greet", J("{}"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(View(*run).run.flow_slug, "greet_v2");
  EXPECT_EQ(View(*run).tasks.size(), 1u);
  EXPECT_EQ(ids_made_.load(), 1) << "run_id_source calls";
}

// The same for an enqueue (StartRun with options).
TEST_P(PlanRace, EnqueueAfterActivation_PinsTheNewVersion) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(engine().StartRun("greet", J("{}"), EnqueueOptions{}).ok());
  ids_made_ = 0;
  hooked().Arm([&] {
    ASSERT_TRUE(other().Activate("greet", "greet_v2", "greet_v1").ok());
  });
  absl::StatusOr<EnqueueResult> run =
      engine().StartRun("greet", J("{}"), EnqueueOptions{});
  ASSERT_TRUE(run.ok()) << run.status();
  RunView view = View(run->run_id);
  EXPECT_EQ(view.run.flow_slug, "greet_v2");
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].flow_slug, "greet_v2");
  EXPECT_EQ(ids_made_.load(), 1) << "run_id_source calls";
}

SLUICE_CONFORMANCE_SUITE(PlanRace);

}  // namespace
}  // namespace sluice::testing
