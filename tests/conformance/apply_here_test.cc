// FinishOptions::apply_completions: completions applied in the transaction
// that records them, and every case that still goes through the outbox
// (decision 0048).
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fail_nth_backend.h"
#include "harness.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

class ApplyHere : public Conformance {
 protected:
  FinishOutcome FinishHere(std::vector<TaskResult> results) {
    absl::StatusOr<FinishOutcome> outcome =
        engine().FinishTasks(results, {.apply_completions = true});
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? *std::move(outcome) : FinishOutcome{};
  }

  static std::vector<TaskResult> Echoed(const std::vector<ClaimedTask>& tasks) {
    std::vector<TaskResult> results;
    for (const ClaimedTask& t : tasks)
      results.push_back({t.key, t.attempt, t.input});
    return results;
  }

  // A run of a one-step map over `input`, and its claimed tasks.
  std::pair<RunId, std::vector<ClaimedTask>> StartMap(std::string slug,
                                                      std::string_view input) {
    Flow flow(std::move(slug));
    flow.Map("each", Echo());
    Deploy(flow);
    RunId run = Start(flow, J(input));
    return {run, Claim(flow)};
  }
};

Flow Chain(std::string slug) {
  Flow flow(std::move(slug));
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  return flow;
}

TEST_P(ApplyHere, Completion_ReleasesDependentsWithoutAnOutboxReport) {
  Flow flow = Chain("here");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  FinishOutcome outcome = FinishHere(Echoed(Claim(flow)));
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kCompleted);
  EXPECT_TRUE(outcome.report_ids.empty());
  EXPECT_EQ(PendingReports(), 0);
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "a").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "b").status, StepStatus::kStarted);
  std::vector<ClaimedTask> next = Claim(flow);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].key.step_index, 1);
  FinishHere(Echoed(next));
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(ApplyHere, AMapsLastCompletions_CompleteItsStepAndRun) {
  auto [run, claimed] = StartMap("map_here", "[1,2,3]");
  ASSERT_EQ(claimed.size(), 3u);
  FinishHere(Echoed({claimed[0]}));
  EXPECT_EQ(StepOf(View(run), "each").remaining_tasks, 2);
  FinishHere(Echoed({claimed[1], claimed[2]}));
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "each").remaining_tasks, 0);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(SerializeJson(*view.run.output), R"({"each":[1,2,3]})");
  EXPECT_EQ(PendingReports(), 0);
}

TEST_P(ApplyHere, AFinalFailure_StillGoesThroughTheOutbox) {
  Flow flow("fail_here", {.max_attempts = 1});
  flow.Step("a", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  FinishOutcome outcome = FinishHere(
      {{claimed[0].key, claimed[0].attempt, absl::InternalError("boom")}});
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kFailed);
  ASSERT_EQ(outcome.report_ids.size(), 1u);
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);
  ASSERT_TRUE(engine().ApplyReports(outcome.report_ids).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
}

TEST_P(ApplyHere, ARunWithACancelPending_GoesThroughTheOutbox) {
  auto [run, claimed] = StartMap("cancel_here", "[1,2]");
  ASSERT_EQ(claimed.size(), 2u);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  FinishOutcome outcome = FinishHere(Echoed({claimed[0]}));
  EXPECT_EQ(outcome.report_ids.size(), 1u);
  EXPECT_EQ(PendingReports(), 1);
}

// Fails every call of one transaction method (FailEveryCallOf).
class FailsMethod : public ForwardingBackend {
 public:
  FailsMethod(Backend& target, std::string method)
      : ForwardingBackend(target), method_(std::move(method)) {}

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<FailEveryCallOf>(std::move(tx), &method_);
  }

 private:
  const std::string method_;
};

TEST_P(ApplyHere, AnApplyThatFails_LeavesTheReportInTheOutbox) {
  Flow flow = Chain("apply_fails");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  // Only the apply reads step states here.
  FailsMethod failing(backend(), "GetStepStates");
  UseEngine(failing, DefaultOptions());
  FinishOutcome outcome = FinishHere(Echoed(claimed));
  UseEngine(backend(), DefaultOptions());
  // The result is stored as it was; only its report waits.
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kCompleted);
  EXPECT_EQ(outcome.report_ids.size(), 1u);
  EXPECT_EQ(TaskOf(run, "a").status, TaskStatus::kCompleted);
  EXPECT_THAT(LogLines(),
              Contains(HasSubstr("injected failure of every GetStepStates")));
  ASSERT_TRUE(engine().ApplyReports(outcome.report_ids).ok());
  EXPECT_EQ(StepOf(View(run), "b").status, StepStatus::kStarted);
}

// A step of one task takes the output its finish holds: nothing reads it
// back, so an apply that could not read outputs still completes the step,
// hands the output on and ends the run with it.
TEST_P(ApplyHere, ASingleTaskStepsOutput_IsNotReadBack) {
  Flow flow = Chain("in_hand");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  FailsMethod failing(backend(), "GetTaskOutputs");
  UseEngine(failing, DefaultOptions());
  FinishOutcome first =
      FinishHere({{claimed[0].key, claimed[0].attempt, J(R"({"n":7})")}});
  EXPECT_TRUE(first.report_ids.empty());
  std::vector<ClaimedTask> next = Claim(flow);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].input, J(R"({"run":{},"a":{"n":7}})"));
  FinishOutcome second = FinishHere({{next[0].key, next[0].attempt, J("8")}});
  UseEngine(backend(), DefaultOptions());
  EXPECT_TRUE(second.report_ids.empty());
  EXPECT_EQ(PendingReports(), 0);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(SerializeJson(*view.run.output), R"({"b":8})");
  EXPECT_EQ(SerializeJson(*StepOf(view, "a").output), R"({"n":7})");
}

// A map's last completion starts its dependent, which reads the run's input:
// one finish reads that for all its runs together, not run by run.
TEST_P(ApplyHere, RunsWhoseNextStepReadsInput_AreReadTogether) {
  auto runs_read = [&](const std::string& slug, int runs) {
    Flow flow(slug);
    flow.Map("each", Echo()).Step("after", {.depends_on = {"each"}}, Echo());
    Deploy(flow);
    for (int i = 0; i < runs; ++i) Start(flow, J(absl::StrCat("[", i, "]")));
    std::vector<ClaimedTask> claimed = Claim(flow);
    EXPECT_EQ(claimed.size(), static_cast<size_t>(runs));
    CountsMethod counting(backend(), "GetRuns");
    UseEngine(counting, DefaultOptions());
    FinishOutcome outcome = FinishHere(Echoed(claimed));
    UseEngine(backend(), DefaultOptions());
    EXPECT_TRUE(outcome.report_ids.empty());
    std::vector<std::string> inputs;
    for (const ClaimedTask& next : Claim(flow)) {
      inputs.push_back(SerializeJson(next.input));
    }
    std::vector<std::string> expected;
    for (int i = 0; i < runs; ++i) {
      expected.push_back(
          absl::StrCat(R"({"run":[)", i, R"(],"each":[)", i, "]}"));
    }
    EXPECT_THAT(inputs, ::testing::UnorderedElementsAreArray(expected));
    return counting.calls();
  };
  EXPECT_EQ(runs_read("gather_one", 1), runs_read("gather_five", 5));
}

// Only Postgres runs transactions side by side: a run another transaction
// holds is never waited for.
TEST_P(ApplyHere, ARunAnotherTransactionHolds_GoesThroughTheOutbox) {
  if (GetParam() != "postgres") GTEST_SKIP() << "one transaction at a time";
  Flow flow = Chain("held");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  absl::Notification locked, done;
  std::thread holder([&] {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend().Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    ASSERT_TRUE((*tx)
                    ->GetRuns(std::span(&run, 1), LockMode::kForUpdate,
                              Fields::kNoPayloads)
                    .ok());
    locked.Notify();
    done.WaitForNotification();
  });
  locked.WaitForNotification();
  FinishOutcome outcome = FinishHere(Echoed(claimed));
  done.Notify();
  holder.join();
  EXPECT_EQ(outcome.report_ids.size(), 1u);
  ASSERT_TRUE(engine().ApplyReports(outcome.report_ids).ok());
  EXPECT_EQ(StepOf(View(run), "b").status, StepStatus::kStarted);
}

SLUICE_CONFORMANCE_SUITE(ApplyHere);

}  // namespace
}  // namespace sluice::testing
