// Tasks of one run on several queues: each task keeps the (queue_name,
// message_id) it was created with, and claim, completion, stall recovery,
// cancel and retry all act on that queue. Map steps on private step queues.
#include <atomic>

#include "queues_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

class QueueTasks : public QueuesConformance {
 protected:
  // Where a task's message is; fails the test if it is nowhere.
  MessageLocation Where(const TaskRecord& task) {
    std::optional<MessageLocation> where = MessageOf(task);
    EXPECT_TRUE(where.has_value())
        << "no message " << task.message_id << " on " << task.queue_name;
    return where.value_or(MessageLocation());
  }

  int64_t Waiting(std::string_view queue) {
    absl::StatusOr<QueueState> state = engine().Counts(queue);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? state->counts.waiting : -1;
  }
};

TEST_P(QueueTasks, TasksOfOneRun_KeepTheirQueueAndMessageThroughCompletion) {
  Flow flow("snap", {.queue_per_step = true});
  flow.Step("one", Echo())
      .Step("two", {.depends_on = {"one"}}, Echo())
      .Step("side", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("5"));
  TaskRecord one = TaskOf(run, "one");
  TaskRecord side = TaskOf(run, "side");
  EXPECT_EQ(one.queue_name, "snap__one");
  EXPECT_EQ(side.queue_name, "snap__side");
  EXPECT_FALSE(Where(one).archived);
  EXPECT_FALSE(Where(side).archived);
  EXPECT_EQ(Waiting("snap__one"), 1);
  EXPECT_EQ(Waiting("snap__two"), 0);
  EXPECT_EQ(Waiting("snap__side"), 1);

  // Claiming one queue takes only its step's task.
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      ClaimOn("snap__one", StepsOn(flow, "snap__one"));
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ((*claimed)[0].step_slug, "one");
  RunHandlers({&flow}, std::move(*claimed));
  TaskRecord two = TaskOf(run, "two");
  EXPECT_EQ(two.queue_name, "snap__two");
  EXPECT_EQ(Waiting("snap__two"), 1);
  EXPECT_FALSE(MessageOf(TaskOf(run, "one")).has_value());  // deleted

  DriveEveryQueue(flow);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  for (const TaskRecord& task : view.tasks) {
    std::string step = flow.shape().steps[task.key.step_index].slug;
    // Unchanged since creation, and deleted from that queue on completion.
    EXPECT_EQ(task.queue_name, StrCat("snap__", step));
    EXPECT_FALSE(MessageOf(task).has_value()) << step;
  }
  EXPECT_EQ(TaskOf(run, "one").message_id, one.message_id);
  EXPECT_EQ(TaskOf(run, "two").message_id, two.message_id);
}

TEST_P(QueueTasks, StallRecoveryAndCancel_ActOnEachTasksOwnQueue) {
  Flow flow("stall_snap",
            {.timeout = absl::Seconds(10), .queue_per_step = true});
  flow.Step("slow", Echo()).Step("other", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      ClaimOn("stall_snap__slow", StepsOn(flow, "stall_snap__slow"));
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1u);
  // The lease lapses; recovery puts the message back on its own queue.
  clock().Advance(absl::Minutes(5));
  absl::StatusOr<int> recovered = engine().RecoverStalledTasks(100);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(*recovered, 1);
  TaskRecord slow = TaskOf(run, "slow");
  EXPECT_EQ(slow.status, TaskStatus::kQueued);
  EXPECT_EQ(slow.queue_name, "stall_snap__slow");
  EXPECT_LE(Where(slow).message.visible_at, clock().Now());
  EXPECT_EQ(Waiting("stall_snap__slow"), 1);
  EXPECT_EQ(Waiting("stall_snap__other"), 1);

  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kImmediate).ok());
  for (const char* step : {"slow", "other"}) {
    TaskRecord task = TaskOf(run, step);
    EXPECT_EQ(task.status, TaskStatus::kCancelled) << step;
    EXPECT_EQ(task.queue_name, StrCat("stall_snap__", step));
    EXPECT_TRUE(Where(task).archived) << step;
  }
  EXPECT_EQ(Waiting("stall_snap__slow"), 0);
  EXPECT_EQ(Waiting("stall_snap__other"), 0);
}

TEST_P(QueueTasks, RetryRun_SendsTheNewMessageToTheTasksQueue) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  Flow flow("retry_snap", {.max_attempts = 1, .queue_per_step = true});
  flow.Step("first", Echo())
      .Step("second", {.depends_on = {"first"}},
            [calls](const Json& input, TaskContext&) -> absl::StatusOr<Json> {
              if (calls->fetch_add(1) == 0) {
                return absl::UnavailableError("first try fails");
              }
              return input;
            });
  Deploy(flow);
  RunId run = Start(flow, J("3"));
  DriveEveryQueue(flow);
  ASSERT_EQ(View(run).run.status, RunStatus::kFailed);
  TaskRecord failed = TaskOf(run, "second");
  EXPECT_TRUE(Where(failed).archived);

  ASSERT_TRUE(engine().RetryRun(run).ok());
  TaskRecord retried = TaskOf(run, "second");
  EXPECT_EQ(retried.status, TaskStatus::kQueued);
  EXPECT_EQ(retried.queue_name, "retry_snap__second");
  EXPECT_NE(retried.message_id, failed.message_id);
  EXPECT_FALSE(Where(retried).archived);
  EXPECT_EQ(Waiting("retry_snap__second"), 1);
  EXPECT_EQ(Waiting("retry_snap__first"), 0);
  EXPECT_THAT(DriveEveryQueue(flow), ElementsAre("retry_snap__second"));
  EXPECT_EQ(View(run).run.status, RunStatus::kCompleted);
}

TEST_P(QueueTasks, MapSteps_FanOutOnTheirOwnPrivateQueues) {
  Flow flow("fan", {.queue_per_step = true});
  flow.Map("double",
           [](const Json& n, TaskContext&) -> absl::StatusOr<Json> {
             return Json(n.as_int64() * 2);
           })
      .Map("inc", {.depends_on = {"double"}},
           [](const Json& n, TaskContext&) -> absl::StatusOr<Json> {
             return Json(n.as_int64() + 1);
           });
  Deploy(flow);
  RunId run = Start(flow, J("[1,2,3,4]"));
  EXPECT_EQ(Waiting("fan__double"), 4);
  EXPECT_EQ(Waiting("fan__inc"), 0);
  // Only the first queue's worker can make progress at first.
  absl::StatusOr<std::vector<ClaimedTask>> none =
      ClaimOn("fan__inc", StepsOn(flow, "fan__inc"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  absl::StatusOr<std::vector<ClaimedTask>> doubles =
      ClaimOn("fan__double", StepsOn(flow, "fan__double"));
  ASSERT_TRUE(doubles.ok());
  EXPECT_EQ(doubles->size(), 4u);
  RunHandlers({&flow}, std::move(*doubles));
  EXPECT_EQ(Waiting("fan__inc"), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(TaskOf(run, "inc", i).queue_name, "fan__inc");
  }
  DriveEveryQueue(flow);
  RunView view = View(run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(view.run.output, J(R"({"inc":[3,5,7,9]})"));
  // An empty array completes both map steps without a message.
  RunId empty = Start(flow, J("[]"));
  EXPECT_EQ(View(empty).run.status, RunStatus::kCompleted);
  EXPECT_EQ(View(empty).run.output, J(R"({"inc":[]})"));
  EXPECT_EQ(Waiting("fan__double"), 0);
}

SLUICE_CONFORMANCE_SUITE(QueueTasks);

}  // namespace
}  // namespace sluice::testing
