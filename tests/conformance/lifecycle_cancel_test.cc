// Cancelling runs: a request (the default) cancels queued tasks at once and
// asks started ones to stop; an immediate cancel ends everything now.
#include "lifecycle_fixture.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class LifecycleCancel : public Lifecycle {
 protected:
  absl::Status Cancel(const RunId& run,
                      CancelMode mode = CancelMode::kRequest) {
    return engine().CancelRun(run, mode);
  }
};

TEST_P(LifecycleCancel, Request_NothingStarted_EndsTheRunAtOnce) {
  Flow flow = OneStep("cancel_queued");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_TRUE(Cancel(run).ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  TaskRecord task = TaskOf(run, "work");
  EXPECT_EQ(task.status, TaskStatus::kCancelled);
  EXPECT_TRUE(MessageOf(task)->archived);
  EXPECT_THAT(view.attempts, IsEmpty());
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(LifecycleCancel, Request_StartedTaskStaysStarted_QueuedOnesEnd) {
  Flow flow("cancel_started");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> started = Claim(flow, 1);
  ASSERT_TRUE(Cancel(run).ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kStarted);
  EXPECT_TRUE(view.run.cancel_requested);
  TaskRecord running = TaskOf(run, "each", 0);
  EXPECT_EQ(running.status, TaskStatus::kStarted);
  EXPECT_TRUE(running.cancel_requested);
  EXPECT_EQ(TaskOf(run, "each", 1).status, TaskStatus::kCancelled);
  EXPECT_THAT(Extend(started), ElementsAre(LeaseState::kCancelRequested));
  // Not extended: the stall deadline is the claim's.
  EXPECT_EQ(TaskOf(run, "each", 0).stall_at, running.stall_at);
}

TEST_P(LifecycleCancel, Request_HandlerHonoursIt_RecordedCancelled) {
  Flow flow = OneStep("cancel_honoured");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  FinishOutcome done = Fail(task, absl::CancelledError("stopped as asked"));
  EXPECT_THAT(done.dispositions, ElementsAre(ResultDisposition::kCancelled));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
  EXPECT_EQ(view.attempts[0].error, "stopped as asked");
}

TEST_P(LifecycleCancel, Request_CompletionWins) {
  Flow flow = OneStep("cancel_completion_wins");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  EXPECT_THAT(Complete(task, J("\"done\"")).dispositions,
              ElementsAre(ResultDisposition::kCompleted));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);  // all its work is done
  EXPECT_EQ(view.run.output, J("{\"work\":\"done\"}"));
  EXPECT_THAT(Ledger(run), ElementsAre("completed@1"));
}

TEST_P(LifecycleCancel, Request_RetryableFailureBecomesCancelled) {
  Flow flow = OneStep("cancel_no_revival", /*max_attempts=*/5);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  EXPECT_THAT(Fail(task, absl::UnavailableError("flaky")).dispositions,
              ElementsAre(ResultDisposition::kCancelled));
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(LifecycleCancel, Request_FinalFailureIsAlsoCancelled) {
  Flow flow = OneStep("cancel_final_failure", /*max_attempts=*/1);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  Fail(task, NonRetryable("broken"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(view.attempts[0].outcome, AttemptOutcome::kCancelled);
  EXPECT_EQ(view.attempts[0].error, "broken");
}

TEST_P(LifecycleCancel, Request_FlowRunStartsNoNewSteps) {
  Flow flow("cancel_chain");
  flow.Step("a", Echo())
      .Step("b", {.depends_on = {"a"}}, Echo())
      .Step("c", {.depends_on = {"b"}}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask a = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  Complete(a, J("\"a out\""));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(StepOf(view, "a").status, StepStatus::kCompleted);
  EXPECT_EQ(StepOf(view, "a").output, J("\"a out\""));
  EXPECT_EQ(StepOf(view, "b").status, StepStatus::kCancelled);
  EXPECT_EQ(view.tasks.size(), 1u);  // b never got a task
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(LifecycleCancel, Request_RunEndsWhenTheLastStartedTaskEnds) {
  Flow flow("cancel_map");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3]"));
  std::vector<ClaimedTask> started = Claim(flow, 2);
  ASSERT_TRUE(Cancel(run).ok());
  Complete(started[0], J("1"));
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);  // one still runs
  Fail(started[1], absl::CancelledError("stopped"));
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(StepOf(view, "each").status, StepStatus::kCancelled);
  EXPECT_EQ(TaskOf(run, "each", 0).status, TaskStatus::kCompleted);
}

TEST_P(LifecycleCancel, Request_IgnoredByTheHandler_StallRecoveryCancels) {
  Flow flow = OneStep("cancel_ignored", /*max_attempts=*/5);
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  ASSERT_TRUE(Cancel(run).ok());
  EXPECT_EQ(RecoverAfterLeases(), 1);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
}

TEST_P(LifecycleCancel, Request_Twice_IsHarmless_ThenImmediateEndsIt) {
  Flow flow = OneStep("cancel_twice");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run).ok());
  ASSERT_TRUE(Cancel(run).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);
  ASSERT_TRUE(Cancel(run, CancelMode::kImmediate).ok());
  EXPECT_EQ(View(run).run.status, RunStatus::kCancelled);
  EXPECT_THAT(Extend({task}), ElementsAre(LeaseState::kLost));
  EXPECT_THAT(Complete(task, J("1")).dispositions,
              ElementsAre(ResultDisposition::kStale));
}

TEST_P(LifecycleCancel, Immediate_EndsStartedTasksNow) {
  Flow flow = OneStep("cancel_immediate");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(Cancel(run, CancelMode::kImmediate).ok());
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCancelled);
  EXPECT_FALSE(view.run.cancel_requested);
  EXPECT_EQ(TaskOf(run, "work").status, TaskStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
  EXPECT_THAT(Extend({task}), ElementsAre(LeaseState::kLost));
}

TEST_P(LifecycleCancel, ExtendLeases_SaysPerLeaseOwnedLostOrCancelRequested) {
  Flow flow = OneStep("cancel_leases");
  Deploy(flow);
  RunId keep = Start(flow, J("1"));
  RunId stop = Start(flow, J("2"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 2u);
  ASSERT_EQ(claimed[0].key.run_id, keep);
  ASSERT_TRUE(Cancel(stop).ok());
  ClaimedTask unknown = claimed[0];
  unknown.key.run_id = RunId::Random();
  ClaimedTask stale = claimed[0];
  stale.key.task_index = 0;
  stale.attempt = 7;
  std::vector<ClaimedTask> leases = {claimed[0], claimed[1], unknown};
  EXPECT_THAT(Extend(leases),
              ElementsAre(LeaseState::kOwned, LeaseState::kCancelRequested,
                          LeaseState::kLost));
  EXPECT_THAT(Extend({stale}), ElementsAre(LeaseState::kLost));
}

// Sets a task's cancel request inside the next transaction that updates
// tasks, just before its update: what a CancelRun committed between a
// heartbeat's read and its write does to the stored task. (Memory and SQLite
// transactions run one at a time, so only this way can they see it.)
class CancelBeforeUpdateBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::optional<TaskKey> armed;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class CancelFirst : public ForwardingTransaction {
     public:
      CancelFirst(std::unique_ptr<Transaction> t, std::optional<TaskKey>* armed)
          : ForwardingTransaction(std::move(t)), armed_(armed) {}
      absl::StatusOr<std::vector<bool>> UpdateTasks(
          std::span<TaskUpdate> updates) override {
        if (std::optional<TaskKey> key = std::exchange(*armed_, std::nullopt)) {
          SLUICE_RETURN_IF_ERROR(Request(*key));
        }
        return ForwardingTransaction::UpdateTasks(updates);
      }

     private:
      absl::Status Request(const TaskKey& key) {
        SLUICE_ASSIGN_OR_RETURN(
            std::vector<std::optional<TaskRecord>> stored,
            ForwardingTransaction::GetTasks({&key, 1}, Fields::kAll));
        TaskUpdate asked{.task = *stored[0],
                         .expected_status = stored[0]->status,
                         .expected_attempts = stored[0]->attempts};
        asked.task.cancel_requested = true;
        return ForwardingTransaction::UpdateTasks({&asked, 1}).status();
      }
      std::optional<TaskKey>* armed_;
    };
    return std::make_unique<CancelFirst>(std::move(tx), &armed);
  }
};

TEST_P(LifecycleCancel, ExtendLeases_KeepsACancelRequestThatLandsAfterItsRead) {
  CancelBeforeUpdateBackend racing(backend());
  UseEngine(racing, DefaultOptions());
  Flow flow = OneStep("cancel_race");
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  const absl::Time stall_at = *TaskOf(run, "work").stall_at;
  clock().Advance(absl::Seconds(1));
  racing.armed = task.key;
  EXPECT_THAT(Extend({task}), ElementsAre(LeaseState::kCancelRequested));
  TaskRecord stored = TaskOf(run, "work");
  EXPECT_TRUE(stored.cancel_requested);
  EXPECT_EQ(stored.status, TaskStatus::kStarted);
  EXPECT_EQ(stored.stall_at, stall_at);  // not extended
}

TEST_P(LifecycleCancel, Release_CancelsATaskWhoseRequestLandsAfterItsRead) {
  CancelBeforeUpdateBackend racing(backend());
  UseEngine(racing, DefaultOptions());
  Flow flow = OneStep("release_race");
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  racing.armed = task.key;
  Release({task});
  TaskRecord stored = TaskOf(run, "work");
  EXPECT_EQ(stored.status, TaskStatus::kCancelled);
  EXPECT_THAT(Ledger(run), ElementsAre("cancelled@1"));
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(LifecycleCancel, Finish_CancelsARetryWhoseRequestLandsAfterItsRead) {
  CancelBeforeUpdateBackend racing(backend());
  UseEngine(racing, DefaultOptions());
  Flow flow = OneStep("finish_race");
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  racing.armed = task.key;
  ExpectCancelledByRequest(Fail(task, absl::UnavailableError("flaky")), run);
  EXPECT_TRUE(Claim(flow).empty());
}

// A final failure compares the cancel request as a retry does (decision
// 0078): one that lands after the read cancels it, and stays recorded.
TEST_P(LifecycleCancel,
       Finish_CancelsAFinalFailureWhoseRequestLandsAfterItsRead) {
  CancelBeforeUpdateBackend racing(backend());
  UseEngine(racing, DefaultOptions());
  Flow flow = OneStep("final_race", /*max_attempts=*/1);
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  racing.armed = task.key;
  ExpectCancelledByRequest(Fail(task, absl::InternalError("broken")), run);
}

TEST_P(LifecycleCancel, EndedOrUnknownRun_IsRefused) {
  Flow flow = OneStep("cancel_refused");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  Complete(One(flow), J("1"));
  EXPECT_EQ(Cancel(run).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Cancel(run, CancelMode::kImmediate).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Cancel(RunId::Random()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Cancel(run, static_cast<CancelMode>(9)).code(),
            absl::StatusCode::kInvalidArgument);
}

SLUICE_CONFORMANCE_SUITE(LifecycleCancel);

}  // namespace
}  // namespace sluice::testing
