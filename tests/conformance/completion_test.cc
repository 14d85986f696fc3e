// Completion through the outbox, retries and backoff, when_exhausted, and
// late results.
#include "harness.h"
#include "sluice/errors.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Completion : public Conformance {};

Flow MapThenReduce(std::string slug, StepSpec map_spec = {}) {
  Flow flow(std::move(slug),
            {.max_attempts = 3, .base_delay = absl::Seconds(2)});
  flow.Map("each", std::move(map_spec), Echo())
      .Step("reduce", {.depends_on = {"each"}}, Echo());
  return flow;
}

TEST_P(Completion, Finish_AppendsAReport_AndOnlyApplyingItReleasesDependents) {
  Flow flow("outbox");
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(
      std::vector<TaskResult>{{claimed[0].key, claimed[0].attempt, J("7")}});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->report_ids.size(), 1u);
  EXPECT_EQ(outcome->dispositions[0], ResultDisposition::kCompleted);
  // The task is complete and its message deleted (no archive copy), in the
  // same transaction as the report; the step waits for the report.
  EXPECT_EQ(TaskOf(run, "a").status, TaskStatus::kCompleted);
  EXPECT_FALSE(MessageOf(TaskOf(run, "a")).has_value());
  EXPECT_EQ(PendingReports(), 1);
  EXPECT_EQ(StepOf(View(run), "a").status, StepStatus::kStarted);
  ASSERT_TRUE(engine().ApplyReports(outcome->report_ids).ok());
  EXPECT_EQ(PendingReports(), 0);
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "a").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "b").status, StepStatus::kStarted);
}

// A completed run's output holds its leaf steps' outputs, and each step
// keeps its own, whichever leaf ends last: the one that ends with the run is
// written in the run's transaction, the other was written before.
TEST_P(Completion, LeafOutputs_AreInTheRunOutputAndStayOnTheirSteps) {
  Flow flow("two_leaves");
  flow.Step("single", Echo()).Map("each", Echo());
  Deploy(flow);
  for (bool map_last : {true, false}) {
    SCOPED_TRACE(map_last ? "the map ends last" : "the single step ends last");
    RunId run = Start(flow, J("[1,2,3]"));
    std::vector<ClaimedTask> claimed = Claim(flow);
    ASSERT_EQ(claimed.size(), 4u);
    std::vector<TaskResult> first, last;
    for (const ClaimedTask& t : claimed) {
      const bool in_map = t.step_slug == "each";
      Json output = in_map ? Json(10 * t.key.task_index) : J(R"({"s":1})");
      (in_map == map_last ? last : first)
          .push_back({t.key, t.attempt, std::move(output)});
    }
    for (const std::vector<TaskResult>* results : {&first, &last}) {
      absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(*results);
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      ASSERT_TRUE(engine().ApplyReports(outcome->report_ids).ok());
    }
    RunView view = View(run);
    ASSERT_EQ(view.run.status, RunStatus::kCompleted);
    ASSERT_TRUE(view.run.output.has_value());
    EXPECT_EQ(*view.run.output, J(R"({"single":{"s":1},"each":[0,10,20]})"));
    EXPECT_EQ(StepOf(view, "single").output, J(R"({"s":1})"));
    EXPECT_EQ(StepOf(view, "each").output, J("[0,10,20]"));
  }
}

TEST_P(Completion, ApplyingReportsTwice_ChangesNothingTheSecondTime) {
  Flow flow("idempotent");
  flow.Map("each", Echo()).Step("after", {.depends_on = {"each"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  std::vector<TaskResult> results;
  for (const ClaimedTask& t : claimed)
    results.push_back({t.key, t.attempt, t.input});
  absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(results);
  ASSERT_TRUE(outcome.ok());
  ASSERT_TRUE(engine().ApplyReports(outcome->report_ids).ok());
  RunView once = View(run);
  ASSERT_TRUE(engine().ApplyReports(outcome->report_ids).ok());
  RunView twice = View(run);
  EXPECT_EQ(StepOf(twice, "each").remaining_tasks, 0);
  EXPECT_EQ(StepOf(twice, "after").remaining_deps, 0);
  EXPECT_EQ(twice.run.remaining_steps, once.run.remaining_steps);
  EXPECT_EQ(twice.tasks.size(), once.tasks.size());
}

TEST_P(Completion, ReportsLeftBehindByACrash_AreAppliedByTheSweeper) {
  Flow flow("reconcile");
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  // The worker dies between recording the result and applying its report.
  ASSERT_TRUE(engine()
                  .FinishTasks(std::vector<TaskResult>{
                      {claimed[0].key, claimed[0].attempt, J("1")}})
                  .ok());
  absl::StatusOr<int> early = engine().ApplyStaleReports(100);
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(*early, 0);  // not stale yet: the push path may still apply it
  clock().Advance(engine().options().report_stale_after + absl::Seconds(1));
  absl::StatusOr<int> swept = engine().ApplyStaleReports(100);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(StepOf(View(run), "b").status, StepStatus::kStarted);
  Drive(flow);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

// Counts the step counter moves sent to the backend, with or without the
// step's record.
class CountingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  int step_counter_moves = 0;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Counting : public ForwardingTransaction {
     public:
      Counting(std::unique_ptr<Transaction> t, int* count)
          : ForwardingTransaction(std::move(t)), count_(count) {}
      absl::StatusOr<std::vector<StepCounters>> AddStepCounters(
          std::span<const StepCounterDelta> deltas) override {
        *count_ += static_cast<int>(deltas.size());
        return ForwardingTransaction::AddStepCounters(deltas);
      }
      absl::StatusOr<std::vector<StepCounters>> UpdateStepStatesAndCounters(
          std::span<StepStateRecord> states,
          std::span<const StepCounterDelta> deltas) override {
        *count_ += static_cast<int>(deltas.size());
        return ForwardingTransaction::UpdateStepStatesAndCounters(states,
                                                                  deltas);
      }

     private:
      int* count_;
    };
    return std::make_unique<Counting>(std::move(tx), &step_counter_moves);
  }
};

TEST_P(Completion, ManyReportsForOneStep_MoveItsCounterOnce) {
  CountingBackend counting(backend());
  UseEngine(counting, DefaultOptions());
  Flow flow("fan_in");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, boost::json::array(200, 1));
  std::vector<ClaimedTask> claimed = Claim(flow, 200);
  ASSERT_EQ(claimed.size(), 200u);
  std::vector<TaskResult> results;
  for (const ClaimedTask& t : claimed)
    results.push_back({t.key, t.attempt, J("1")});
  counting.step_counter_moves = 0;
  Finish(results);
  // One move for the map step's 200 completions, none per task.
  EXPECT_EQ(counting.step_counter_moves, 1);
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(Completion, FailedAttempt_IsRetriedAfterExponentialBackoff) {
  Flow flow = MapThenReduce("backoff");
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  FinishOutcome outcome = Fail(claimed[0], absl::UnavailableError("flaky"));
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kRetrying);
  EXPECT_TRUE(outcome.report_ids.empty());
  TaskRecord task = TaskOf(run, "each");
  EXPECT_EQ(task.status, TaskStatus::kQueued);
  EXPECT_EQ(task.error, "flaky");
  // floor(base * 2^attempts): 2 s * 2^1
  EXPECT_EQ(MessageOf(task)->message.visible_at,
            clock().Now() + absl::Seconds(4));
  clock().Advance(absl::Seconds(3));
  EXPECT_TRUE(Claim(flow).empty());
  clock().Advance(absl::Seconds(1));
  claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].attempt, 2);
  Fail(claimed[0], absl::UnavailableError("flaky"));
  EXPECT_EQ(MessageOf(TaskOf(run, "each"))->message.visible_at,
            clock().Now() + absl::Seconds(8));  // 2 s * 2^2
}

TEST_P(Completion, HandlerChosenDelay_ReplacesTheBackoff) {
  Flow flow = MapThenReduce("retry_after");
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  Fail(claimed[0], RetryAfter(absl::Seconds(90), "rate limited"));
  EXPECT_EQ(MessageOf(TaskOf(run, "each"))->message.visible_at,
            clock().Now() + absl::Seconds(90));
}

TEST_P(Completion, InvalidHandlerDelay_FallsBackToTheBackoffAndSaysWhy) {
  Flow flow = MapThenReduce("bad_retry_after");
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  Fail(claimed[0], RetryAfter(absl::Seconds(-5), "oops"));
  TaskRecord task = TaskOf(run, "each");
  EXPECT_EQ(MessageOf(task)->message.visible_at,
            clock().Now() + absl::Seconds(4));
  EXPECT_THAT(task.error, HasSubstr("retry delay ignored"));
  EXPECT_THAT(task.error, HasSubstr("negative"));
}

TEST_P(Completion, NonRetryableError_FailsTheTaskAtOnce) {
  Flow flow = MapThenReduce("non_retryable");
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  FinishOutcome outcome = Fail(claimed[0], NonRetryable("no such order"));
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kFailed);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(view.run.error, "no such order");
  EXPECT_EQ(TaskOf(run, "each").attempts, 1);
}

TEST_P(Completion, ExhaustedWithFail_FailsTheRunAndCancelsEverythingElse) {
  Flow flow = MapThenReduce("exhaust_fail", {.max_attempts = 1});
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3,4]"));
  std::vector<ClaimedTask> claimed = Claim(flow, 2);  // 0, 1 started
  Complete(claimed[0], J("1"));
  Fail(claimed[1], absl::InternalError("boom"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kFailed);
  EXPECT_EQ(view.run.error, "boom");
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kFailed);
  EXPECT_EQ(StepOf(view, "reduce").status, StepStatus::kCancelled);
  std::vector<TaskStatus> statuses;
  for (const TaskRecord& t : view.tasks) {
    statuses.push_back(t.status);
    std::optional<MessageLocation> where = MessageOf(t);
    // Deleted on completion; archived however else the task ended.
    EXPECT_EQ(where.has_value() && where->archived,
              t.status != TaskStatus::kCompleted)
        << t.key.task_index;
    EXPECT_EQ(where.has_value(), t.status != TaskStatus::kCompleted)
        << t.key.task_index;
  }
  EXPECT_THAT(statuses,
              ElementsAre(TaskStatus::kCompleted, TaskStatus::kFailed,
                          TaskStatus::kCancelled, TaskStatus::kCancelled));
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(Completion, ExhaustedWithSkip_SkipsTheStepAndItsTasks_AndDependentsRun) {
  Flow flow("exhaust_skip");
  flow.Map("each", {.max_attempts = 1, .when_exhausted = Policy::kSkip}, Echo())
      .Step("after", {.depends_on = {"each"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  std::vector<ClaimedTask> claimed = Claim(flow, 2);
  Fail(claimed[0], absl::InternalError("bad element"));
  RunView view = View(run);
  const StepStateRecord& each = StepOf(view, "each");
  EXPECT_EQ(each.status, StepStatus::kSkipped);
  EXPECT_EQ(each.skip_reason, SkipReason::kHandlerFailed);
  EXPECT_EQ(each.error, "bad element");
  EXPECT_THAT(std::vector<TaskStatus>({TaskOf(run, "each", 0).status,
                                       TaskOf(run, "each", 1).status,
                                       TaskOf(run, "each", 2).status}),
              ElementsAre(TaskStatus::kFailed, TaskStatus::kSkipped,
                          TaskStatus::kSkipped));
  // The still-running sibling's late result changes nothing.
  EXPECT_EQ(Complete(claimed[1], J("2")).dispositions[0],
            ResultDisposition::kStale);
  Drive(flow);
  view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*TaskOf(run, "after").output,
            J(R"({"run":[1,2,3]})"));  // no "each"
  EXPECT_EQ(*view.run.output, J(R"({"after":{"run":[1,2,3]}})"));
}

TEST_P(Completion, ExhaustedWithSkipCascade_SkipsEverythingDownstream) {
  Flow flow("exhaust_cascade");
  flow.Step("a", {.max_attempts = 1, .when_exhausted = Policy::kSkipCascade},
            Echo())
      .Step("b", {.depends_on = {"a"}}, Echo())
      .Map("c", {.depends_on = {"b"}}, Echo())
      .Step("side", Returns(J("\"ok\"")));
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  for (const ClaimedTask& t : Claim(flow)) {
    if (t.step_slug == "a")
      Fail(t, absl::InternalError("nope"));
    else
      Complete(t, J("\"ok\""));
  }
  RunView view = View(run);
  EXPECT_EQ(StepOf(view, "a").skip_reason, SkipReason::kHandlerFailed);
  EXPECT_EQ(StepOf(view, "b").skip_reason, SkipReason::kDependencySkipped);
  EXPECT_EQ(StepOf(view, "c").status, StepStatus::kSkipped);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(*view.run.output, J(R"({"side":"ok"})"));
}

TEST_P(Completion, MaxAttemptsOne_NeverRetries) {
  Flow flow("one_shot");
  flow.Step("a", {.max_attempts = 1}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(Claim(flow)[0], absl::InternalError("once"));
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
}

TEST_P(Completion, AttemptsAreCountedAcrossRetriesUpToMax) {
  Flow flow("three_tries");
  flow.Step("a", {.max_attempts = 3, .base_delay = absl::ZeroDuration()},
            Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::vector<ClaimedTask> claimed = Claim(flow);
    ASSERT_EQ(claimed.size(), 1u);
    EXPECT_EQ(claimed[0].attempt, attempt);
    Fail(claimed[0], absl::InternalError("again"));
  }
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
  EXPECT_EQ(TaskOf(run, "a").attempts, 3);
}

TEST_P(Completion, RetryThenSuccess_CompletesTheRun) {
  Flow flow("eventually");
  flow.Step("a", {.base_delay = absl::ZeroDuration()}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Fail(Claim(flow)[0], absl::InternalError("first"));
  Complete(Claim(flow)[0], J("\"done\""));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(TaskOf(run, "a").attempts, 2);
}

TEST_P(Completion, LateResultForAnEarlierAttempt_IsStale) {
  Flow flow("stale_attempt");
  flow.Step("a", {.base_delay = absl::ZeroDuration()}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask first = Claim(flow)[0];
  Fail(first, absl::InternalError("x"));
  ClaimedTask second = Claim(flow)[0];
  EXPECT_EQ(Complete(first, J("1")).dispositions[0], ResultDisposition::kStale);
  EXPECT_EQ(TaskOf(run, "a").status, TaskStatus::kStarted);
  EXPECT_EQ(Complete(second, J("2")).dispositions[0],
            ResultDisposition::kCompleted);
  EXPECT_EQ(*View(run).run.output, J(R"({"a":2})"));
}

TEST_P(Completion, LateResultOnAFailedRun_OnlyArchives) {
  Flow flow("late_on_failed");
  flow.Map("each", {.max_attempts = 1}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  Fail(claimed[0], absl::InternalError("x"));
  FinishOutcome late = Fail(claimed[1], absl::InternalError("y"));
  EXPECT_EQ(late.dispositions[0], ResultDisposition::kStale);
  EXPECT_TRUE(late.report_ids.empty());
  TaskRecord sibling = TaskOf(run, "each", 1);
  EXPECT_EQ(sibling.status, TaskStatus::kCancelled);
  EXPECT_TRUE(MessageOf(sibling)->archived);
  EXPECT_EQ(View(run).run.error, "x");
}

TEST_P(Completion, FinishTasks_RejectsBadInputWithoutChangingAnything) {
  Flow flow("finish_input");
  flow.Step("a", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = Claim(flow)[0];
  std::vector<TaskResult> dupes = {{task.key, task.attempt, J("1")},
                                   {task.key, task.attempt, J("2")}};
  absl::StatusOr<FinishOutcome> outcome = engine().FinishTasks(dupes);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<TaskResult> zero = {{task.key, 0, J("1")}};
  EXPECT_EQ(engine().FinishTasks(zero).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskOf(run, "a").status, TaskStatus::kStarted);
  EXPECT_EQ(engine().ApplyReports(std::vector<int64_t>{-1}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(Completion, OutputOverTheSizeLimit_FailsTheTaskWithoutRetry) {
  Flow flow("big_output");
  flow.Step("a", Echo());
  Deploy(flow);
  EngineOptions options = DefaultOptions();
  options.max_payload_bytes = 32;
  UseEngine(backend(), options);
  RunId run = Start(flow, J("{}"));
  FinishOutcome outcome = Complete(Claim(flow)[0], Json(std::string(100, 'x')));
  EXPECT_EQ(outcome.dispositions[0], ResultDisposition::kFailed);
  EXPECT_THAT(TaskOf(run, "a").error, HasSubstr("handler output is"));
  EXPECT_EQ(View(run).run.status, RunStatus::kFailed);
}

SLUICE_CONFORMANCE_SUITE(Completion);

}  // namespace
}  // namespace sluice::testing
