// Claim classification: the whole batch is judged before anything changes.
#include "harness.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Claims : public Conformance {
 protected:
  // Sends a message with no task straight to `queue`.
  int64_t SendOrphanMessage(const std::string& queue) {
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok());
    std::vector<OutgoingMessage> m = {
        {J(R"({"secret":"do-not-log-me"})"), clock().Now()}};
    auto ids = (*tx)->SendMessages(queue, m, clock().Now());
    EXPECT_TRUE(ids.ok()) << ids.status();
    EXPECT_TRUE((*tx)->Commit().ok());
    return ids.ok() ? (*ids)[0] : 0;
  }

  absl::StatusOr<std::vector<ClaimedTask>> ClaimWith(const Flow& flow,
                                                     StepSet served,
                                                     int limit = 100) {
    ClaimRequest request;
    request.queue = flow.shape().steps.front().queue_name;
    request.worker_id = "w1";
    request.served = std::move(served);
    request.limit = limit;
    return engine().Claim(request);
  }
};

Flow Simple(std::string slug = "simple",
            FlowOptions options = {.timeout = absl::Seconds(60)}) {
  Flow flow(std::move(slug), options);
  flow.Map("each", Echo());
  return flow;
}

TEST_P(Claims, QueuedTask_IsStartedAndConsumesOneAttempt) {
  Flow flow = Simple();
  Deploy(flow);
  RunId run = Start(flow, J("[5]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].attempt, 1);
  EXPECT_EQ(claimed[0].max_attempts, 3);
  EXPECT_EQ(claimed[0].step_slug, "each");
  EXPECT_EQ(claimed[0].deadline, clock().Now() + absl::Seconds(60));
  TaskRecord task = TaskOf(run, "each");
  EXPECT_EQ(task.status, TaskStatus::kStarted);
  EXPECT_EQ(task.attempts, 1);
  EXPECT_EQ(task.worker_id, "test-worker");
  EXPECT_EQ(task.started_at, clock().Now());
}

TEST_P(Claims,
       Claim_HidesTheMessageForTheEffectiveTimeoutBeforeTheHandlerRuns) {
  Flow flow = Simple("visibility", {.timeout = absl::Seconds(60)});
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  absl::Time claimed_at = clock().Now();
  ASSERT_EQ(Claim(flow).size(), 1u);
  std::optional<MessageLocation> where = MessageOf(TaskOf(run, "each"));
  ASSERT_TRUE(where.has_value());
  // timeout + the default 2 s claim grace
  EXPECT_EQ(where->message.visible_at, claimed_at + absl::Seconds(62));
  EXPECT_EQ(where->message.read_count, 1);
  clock().Advance(absl::Seconds(61));
  EXPECT_TRUE(Claim(flow).empty());
}

TEST_P(Claims, StepTimeout_OverridesTheFlowTimeout) {
  Flow flow("step_timeout", {.timeout = absl::Seconds(60)});
  flow.Step("quick", {.timeout = absl::Seconds(5)}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  absl::Time claimed_at = clock().Now();
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].deadline, claimed_at + absl::Seconds(5));
  TaskRecord task = TaskOf(run, "quick");
  EXPECT_EQ(MessageOf(task)->message.visible_at, claimed_at + absl::Seconds(7));
  EXPECT_EQ(task.stall_at, claimed_at + absl::Seconds(35));
}

TEST_P(Claims, StartedTask_IsABenignDuplicate_ThatUsesNoAttempt) {
  Flow flow = Simple("duplicate", {.timeout = absl::Seconds(10)});
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  ASSERT_EQ(Claim(flow).size(), 1u);
  // The message becomes visible again while the task is still started.
  clock().Advance(absl::Seconds(13));
  EXPECT_TRUE(Claim(flow).empty());
  TaskRecord task = TaskOf(run, "each");
  EXPECT_EQ(task.status, TaskStatus::kStarted);
  EXPECT_EQ(task.attempts, 1);
  // Hidden until stall recovery could take the task back.
  EXPECT_EQ(MessageOf(task)->message.visible_at, *task.stall_at);
}

TEST_P(Claims, TerminalTaskWithALiveMessage_HasItsMessageArchived) {
  Flow flow = Simple("terminal");
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  // End a task without archiving its message, as a crashed client might.
  TaskRecord ended = TaskOf(run, "each", 0);
  {
    auto tx = backend().Begin();
    ASSERT_TRUE(tx.ok());
    TaskUpdate update{ended, ended.status, ended.attempts};
    update.task.status = TaskStatus::kCancelled;
    update.task.finished_at = clock().Now();
    std::vector<TaskUpdate> updates = {update};
    auto applied = (*tx)->UpdateTasks(updates);
    ASSERT_TRUE(applied.ok() && (*applied)[0]);
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].key.task_index, 1);
  EXPECT_TRUE(MessageOf(ended)->archived);
  EXPECT_EQ(TaskOf(run, "each", 0).status, TaskStatus::kCancelled);
}

TEST_P(Claims, MessageWithoutTask_StopsTheClaimAndLeavesTheBatchVisible) {
  Flow flow = Simple("orphans");
  Deploy(flow);
  RunId run = Start(flow, J("[1]"));
  int64_t orphan = SendOrphanMessage("orphans");
  StepSet served;
  served.AddFlow(flow.shape());
  absl::StatusOr<std::vector<ClaimedTask>> claimed = ClaimWith(flow, served);
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(claimed.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string message(claimed.status().message());
  EXPECT_THAT(message,
              HasSubstr("message " + std::to_string(orphan) + " has no task"));
  EXPECT_THAT(message, HasSubstr("1 of 2 messages"));
  EXPECT_THAT(message, Not(HasSubstr("do-not-log-me")));
  // Nothing was claimed and the batch is visible to the next reader.
  TaskRecord task = TaskOf(run, "each");
  EXPECT_EQ(task.status, TaskStatus::kQueued);
  EXPECT_EQ(task.attempts, 0);
  std::optional<MessageLocation> where = MessageOf(task);
  EXPECT_LE(where->message.visible_at, clock().Now());
  EXPECT_EQ(where->message.read_count, 0);
}

TEST_P(Claims, StepTheWorkerDoesNotServe_IsFatalAndClaimsNothing) {
  Flow flow("partial");
  flow.Step("a", Echo()).Step("b", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  StepSet served;
  served.Add("partial", 0);  // not step "b"
  absl::StatusOr<std::vector<ClaimedTask>> claimed = ClaimWith(flow, served);
  ASSERT_FALSE(claimed.ok());
  EXPECT_THAT(
      std::string(claimed.status().message()),
      HasSubstr(
          "flow \"partial\" step \"b\", which this worker does not serve"));
  RunView view = View(run);
  for (const TaskRecord& t : view.tasks) {
    EXPECT_EQ(t.status, TaskStatus::kQueued);
    EXPECT_LE(MessageOf(t)->message.visible_at, clock().Now());
  }
}

TEST_P(Claims, MessageOfAnotherFlow_IsFatal) {
  Flow mine = Simple("mine");
  Deploy(mine);
  Start(mine, J("[1]"));
  StepSet served;
  served.Add("someone_else", 0);
  absl::StatusOr<std::vector<ClaimedTask>> claimed = ClaimWith(mine, served);
  ASSERT_FALSE(claimed.ok());
  EXPECT_THAT(std::string(claimed.status().message()),
              HasSubstr("which this worker does not serve"));
}

TEST_P(Claims, DelayedTask_IsNotClaimableBeforeItsStartDelay) {
  Flow flow("delayed");
  flow.Step("later", {.start_delay = absl::Seconds(30)}, Echo());
  Deploy(flow);
  Start(flow, J("{}"));
  EXPECT_TRUE(Claim(flow).empty());
  clock().Advance(absl::Seconds(29));
  EXPECT_TRUE(Claim(flow).empty());
  clock().Advance(absl::Seconds(1));
  EXPECT_EQ(Claim(flow).size(), 1u);
}

TEST_P(Claims, Claim_TakesAtMostTheLimitInMessageOrder) {
  Flow flow = Simple("limit");
  Deploy(flow);
  Start(flow, J("[0,1,2,3,4,5,6]"));
  std::vector<ClaimedTask> first = Claim(flow, 3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].key.task_index, 0);
  EXPECT_EQ(first[2].key.task_index, 2);
  std::vector<ClaimedTask> second = Claim(flow, 10);
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second[0].key.task_index, 3);
}

TEST_P(Claims, InvalidClaimRequests_AreRejected) {
  Flow flow = Simple("requests");
  Deploy(flow);
  StepSet served;
  served.AddFlow(flow.shape());
  EXPECT_EQ(ClaimWith(flow, served, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClaimRequest bad_queue{"No-Such Queue!", "w", served, 1};
  EXPECT_EQ(engine().Claim(bad_queue).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClaimRequest no_worker{"requests", "", served, 1};
  EXPECT_EQ(engine().Claim(no_worker).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(Claims, ClaimedTaskInput_ForASingleStep_IsTheStoredInputObject) {
  Flow flow("claim_input");
  flow.Step("a", Echo());
  Deploy(flow);
  Start(flow, J(R"({"k":[1,2]})"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].input, J(R"({"run":{"k":[1,2]}})"));
}

SLUICE_CONFORMANCE_SUITE(Claims);

}  // namespace
}  // namespace sluice::testing
