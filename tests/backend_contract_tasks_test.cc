// The Transaction contract: tasks (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Tasks ------------------------------------------------------------------

TEST_P(BackendContractTest, InsertTasks_ThenGetTasks_ReturnsEveryField) {
  SeedRun();
  TaskRecord task = MakeTask(1, 0, 0, 1);
  task.input = J("0");
  task.status = TaskStatus::kFailed;
  task.attempts = 3;
  task.output = J(R"({"partial":[false,""]})");
  task.error = "handler failed";
  task.started_at = At(1);
  task.finished_at = At(2);
  task.stall_at = At(3);
  task.requeued_count = 1;
  task.worker_id = "f47ac10b-58cc-4372-a567-0e02b2c3d479";
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({task}))); });
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<TaskRecord> got = GetTask(*tx, task.key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(Describe(*got), Describe(task));
}

TEST_P(BackendContractTest, GetTasks_ReturnsOneEntryPerKeyInOrder) {
  SeedRun();
  Committed([](Transaction& tx) {
    ASSERT_OK(
        tx.InsertTasks(Movable({MakeTask(1, 0, 0, 1), MakeTask(1, 1, 0, 2)})));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::optional<TaskRecord>> tasks,
      Begin()->GetTasks({{TaskKey{RunNo(1), 1, 0}, TaskKey{RunNo(1), 0, 9},
                          TaskKey{RunNo(1), 0, 0}}},
                        Fields::kAll));
  ASSERT_EQ(tasks.size(), 3u);
  ASSERT_TRUE(tasks[0].has_value());
  EXPECT_EQ(tasks[0]->key.step_index, 1);
  EXPECT_EQ(tasks[1], std::nullopt);
  ASSERT_TRUE(tasks[2].has_value());
  EXPECT_EQ(tasks[2]->key.step_index, 0);
}

TEST_P(BackendContractTest, GetTasks_NoPayloads_LeavesInputAndOutputEmpty) {
  SeedRun();
  TaskRecord task = MakeTask(1, 0, 0, 1);
  task.status = TaskStatus::kCompleted;
  task.output = J(R"({"big":"payload"})");
  task.error = "kept";
  task.worker_id = "w1";
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({task}))); });
  ASSERT_OK_AND_ASSIGN(std::vector<std::optional<TaskRecord>> tasks,
                       Begin()->GetTasks({{task.key}}, Fields::kNoPayloads));
  ASSERT_TRUE(tasks[0].has_value());
  TaskRecord expected = task;
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(*tasks[0]), Describe(expected));
}

TEST_P(BackendContractTest, InsertTasks_ExistingKey_FailsWithAlreadyExists) {
  SeedRun();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, 1)})));
  });
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.InsertTasks(Movable({MakeTask(1, 0, 0, 2)}));
                      }),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertTasks_UnknownRun_FailsWithNotFound) {
  SeedRun();
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.InsertTasks(Movable({MakeTask(2, 0, 0, 1)}));
                      }),
            absl::StatusCode::kNotFound);
}

TEST_P(BackendContractTest, InsertTasks_MessageOfAnotherTask_FailsAndAddsNone) {
  SeedRun();
  CreateQueue("other");
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, 1)})));
    // The same message id on another queue is another message.
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 1, 1, "other")})));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(WriteCode(*tx, tx->InsertTasks(Movable({MakeTask(1, 1, 0, 2),
                                                      MakeTask(1, 1, 1, 1)}))),
              absl::StatusCode::kAlreadyExists);
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(GetTask(*tx, {RunNo(1), 1, 0}), std::nullopt);
  EXPECT_EQ(GetTask(*tx, {RunNo(1), 1, 1}), std::nullopt);
}

TEST_P(BackendContractTest, GetTasksByMessage_FindsTasksByQueueAndMessageId) {
  SeedRun();
  CreateQueue("other");
  Committed([](Transaction& tx) {
    ASSERT_OK(
        tx.InsertTasks(Movable({MakeTask(1, 0, 0, 1), MakeTask(1, 0, 1, 2),
                                MakeTask(1, 0, 2, 1, "other")})));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::optional<TaskRecord>> tasks,
      Begin()->GetTasksByMessage("greet", {{2, 3, 1}}, Fields::kNoPayloads));
  ASSERT_EQ(tasks.size(), 3u);
  ASSERT_TRUE(tasks[0].has_value());
  EXPECT_EQ(tasks[0]->key.task_index, 1);
  EXPECT_EQ(tasks[1], std::nullopt);
  ASSERT_TRUE(tasks[2].has_value());
  EXPECT_EQ(tasks[2]->key.task_index, 0);
  EXPECT_EQ(tasks[2]->input, nullptr);
}

TEST_P(BackendContractTest, UpdateTasks_AppliesOnlyWhenStatusAndAttemptsMatch) {
  SeedRun();
  const TaskRecord a = MakeTask(1, 0, 0, 1);
  const TaskRecord b = MakeTask(1, 0, 1, 2);
  const TaskRecord c = MakeTask(1, 0, 2, 3);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({a, b, c})));
  });

  TaskUpdate wrong_status = UpdateOf(b, Started(b, At(1), At(60)));
  wrong_status.expected_status = TaskStatus::kStarted;
  TaskUpdate wrong_attempts = UpdateOf(c, Started(c, At(1), At(60)));
  wrong_attempts.expected_attempts = 1;
  TaskUpdate missing =
      UpdateOf(a, Started(MakeTask(1, 0, 9, 9), At(1), At(60)));
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<bool> applied,
        tx.UpdateTasks(Movable({UpdateOf(a, Started(a, At(1), At(60))),
                                wrong_status, wrong_attempts, missing})));
    EXPECT_THAT(applied, ElementsAre(true, false, false, false));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*GetTask(*tx, a.key)),
            Describe(Started(a, At(1), At(60))));
  EXPECT_EQ(Describe(*GetTask(*tx, b.key)), Describe(b));
  EXPECT_EQ(Describe(*GetTask(*tx, c.key)), Describe(c));
  EXPECT_EQ(GetTask(*tx, {RunNo(1), 0, 9}), std::nullopt);
}

TEST_P(BackendContractTest,
       UpdateTasks_WithAnExpectedCancelRequest_AppliesOnlyWhenItMatches) {
  SeedRun();
  TaskRecord asked = Started(MakeTask(1, 0, 0, 1), At(1), At(60));
  asked.cancel_requested = true;
  const TaskRecord running = Started(MakeTask(1, 0, 1, 2), At(1), At(60));
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({asked, running})));
  });

  // A heartbeat's write of a copy read before the request came in.
  auto extended = [](const TaskRecord& stored) {
    TaskRecord read = stored;
    read.cancel_requested = false;
    read.stall_at = At(120);
    TaskUpdate u = UpdateOf(stored, read);
    u.expected_cancel_requested = false;
    return u;
  };
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<bool> applied,
        tx.UpdateTasks(Movable({extended(asked), extended(running)})));
    EXPECT_THAT(applied, ElementsAre(false, true));
  });
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<TaskRecord> kept = GetTask(*tx, asked.key);
  ASSERT_TRUE(kept.has_value());
  EXPECT_TRUE(kept->cancel_requested);
  EXPECT_EQ(kept->stall_at, asked.stall_at);
  std::optional<TaskRecord> moved = GetTask(*tx, running.key);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->stall_at, At(120));
  EXPECT_FALSE(moved->cancel_requested);
}

TEST_P(BackendContractTest, UpdateTasks_WritesOnlyTheMutableFields) {
  SeedRun();
  const TaskRecord task = MakeTask(1, 0, 0, 1);
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({task}))); });
  TaskRecord update = MakeTask(1, 0, 0, 99, "elsewhere");
  update.flow_slug = "other_flow";
  update.input = J(R"("changed")");
  update.queued_at = At(77);
  update.status = TaskStatus::kCompleted;
  update.attempts = 1;
  update.output = J("false");
  update.error = "e";
  update.started_at = At(1);
  update.finished_at = At(2);
  update.stall_at = At(3);
  update.requeued_count = 2;
  update.worker_id = "w9";
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(std::vector<bool> applied,
                         tx.UpdateTasks(Movable({UpdateOf(task, update)})));
    EXPECT_THAT(applied, ElementsAre(true));
  });
  TaskRecord expected = update;
  expected.flow_slug = task.flow_slug;
  expected.input = task.input;
  expected.queue_name = task.queue_name;
  expected.queued_at = task.queued_at;
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*GetTask(*tx, task.key)), Describe(expected));
  // The message moves (RetryRun's new message); the queue does not.
  EXPECT_THAT(ValueOf(tx->GetTasksByMessage("greet", {{99}}, Fields::kAll)),
              ElementsAre(::testing::Optional(::testing::_)));
  EXPECT_THAT(ValueOf(tx->GetTasksByMessage("greet", {{1}}, Fields::kAll)),
              ElementsAre(::testing::Not(::testing::Optional(::testing::_))));
}

TEST_P(BackendContractTest, UpdateTasks_AppliesUpdatesOfOneCallInOrder) {
  SeedRun();
  const TaskRecord queued = MakeTask(1, 0, 0, 1);
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({queued}))); });
  const TaskRecord started = Started(queued, At(1), At(60));
  TaskRecord completed = started;
  completed.status = TaskStatus::kCompleted;
  completed.output = J("1");
  completed.finished_at = At(2);
  completed.stall_at = std::nullopt;
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<bool> applied,
      tx->UpdateTasks(
          Movable({UpdateOf(queued, started), UpdateOf(started, completed)})));
  EXPECT_THAT(applied, ElementsAre(true, true));
  EXPECT_EQ(Describe(*GetTask(*tx, queued.key)), Describe(completed));
}

TEST_P(BackendContractTest, GetUnfinishedTasks_ReturnsQueuedAndStartedInOrder) {
  SeedRun();
  TaskRecord done = MakeTask(1, 0, 1, 2);
  done.status = TaskStatus::kCompleted;
  TaskRecord cancelled = MakeTask(1, 1, 0, 4);
  cancelled.status = TaskStatus::kCancelled;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable(
        {MakeTask(1, 1, 1, 5), Started(MakeTask(1, 0, 2, 3), At(1), At(60)),
         cancelled, done, MakeTask(1, 0, 0, 1)})));
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(2, 0, 0, 6)})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> all,
      tx->GetUnfinishedTasks(RunNo(1), std::nullopt, Fields::kAll));
  EXPECT_THAT(StepsAndTasksOf(all),
              ElementsAre(std::pair(0, 0), std::pair(0, 2), std::pair(1, 1)));
  EXPECT_EQ(SerializeJson(all[0].input), R"({"n":1})");
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> step0,
      tx->GetUnfinishedTasks(RunNo(1), 0, Fields::kNoPayloads));
  EXPECT_THAT(StepsAndTasksOf(step0),
              ElementsAre(std::pair(0, 0), std::pair(0, 2)));
  EXPECT_EQ(step0[0].input, nullptr);
}

TEST_P(BackendContractTest, ListTasks_ReturnsEveryTaskByStepThenTaskIndex) {
  SeedRun();
  TaskRecord done = MakeTask(1, 0, 1, 2);
  done.status = TaskStatus::kCompleted;
  Committed([&](Transaction& tx) {
    ASSERT_OK(
        tx.InsertTasks(Movable({MakeTask(1, 1, 10, 3), done,
                                MakeTask(1, 1, 2, 4), MakeTask(1, 0, 0, 1)})));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> tasks,
                       Begin()->ListTasks(RunNo(1)));
  EXPECT_THAT(StepsAndTasksOf(tasks),
              ElementsAre(std::pair(0, 0), std::pair(0, 1), std::pair(1, 2),
                          std::pair(1, 10)));
  EXPECT_THAT(ValueOf(Begin()->ListTasks(RunNo(2))), IsEmpty());
}

std::vector<std::string> TextsOf(
    const std::vector<std::optional<Json>>& values) {
  std::vector<std::string> texts;
  for (const std::optional<Json>& value : values) texts.push_back(Text(value));
  return texts;
}

TEST_P(BackendContractTest, GetTaskOutputs_ReturnsOutputsPerStepByTaskIndex) {
  SeedRun();
  std::vector<TaskRecord> tasks;
  const std::vector<std::optional<std::string>> outputs = {
      "false", "0", std::nullopt, R"("")", "null"};
  for (int i = static_cast<int>(outputs.size()) - 1; i >= 0; --i) {
    TaskRecord task = MakeTask(1, 1, i, 10 + i);
    if (outputs[i].has_value()) task.output = J(*outputs[i]);
    tasks.push_back(task);
  }
  TaskRecord other_step = MakeTask(1, 0, 3, 1);
  other_step.output = J("[3]");
  tasks.push_back(other_step);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(tasks));
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<StepOutputs> got,
      Begin()->GetTaskOutputs(
          {{StepRef{RunNo(1), 1}, StepRef{RunNo(1), 0}, StepRef{RunNo(2), 0},
            StepRef{RunNo(9), 1}, StepRef{RunNo(1), 5}}}));
  ASSERT_EQ(got.size(), 5u);
  EXPECT_THAT(TextsOf(got[0].outputs),
              ElementsAre("false", "0", "<none>", R"("")", "null"));
  EXPECT_THAT(TextsOf(got[1].outputs), ElementsAre("[3]"));
  EXPECT_THAT(got[2].outputs, IsEmpty());  // a run without tasks
  EXPECT_THAT(got[3].outputs, IsEmpty());  // no such run
  EXPECT_THAT(got[4].outputs, IsEmpty());  // no such step
  for (const StepOutputs& step : got) EXPECT_EQ(step.unreadable, "");
  EXPECT_THAT(ValueOf(Begin()->GetTaskOutputs({})), IsEmpty());
}

TEST_P(BackendContractTest,
       FindStalledTasks_ReturnsStartedTasksStalledBeforeNow) {
  SeedRun();
  TaskRecord queued_with_stall = MakeTask(1, 0, 4, 5);
  queued_with_stall.stall_at = At(1);
  TaskRecord completed = Started(MakeTask(1, 0, 5, 6), At(0), At(1));
  completed.status = TaskStatus::kCompleted;
  std::vector<TaskRecord> started = {
      Started(MakeTask(1, 0, 0, 1), At(0), At(30)),
      Started(MakeTask(1, 0, 1, 2), At(0), At(10)),
      Started(MakeTask(1, 0, 2, 3), At(0), At(50)),  // stalls at now
      Started(MakeTask(1, 0, 3, 4), At(0), At(20))};
  Committed([&](Transaction& tx) {
    GiveReadMessages(tx, started);
    ASSERT_OK(tx.InsertTasks(Copied(started)));
    ASSERT_OK(tx.InsertTasks(Movable({queued_with_stall, completed})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> stalled,
      tx->FindStalledTasks(StalledBefore(At(50), 10), Fields::kAll));
  EXPECT_THAT(TaskIndexesOf(stalled), ElementsAre(1, 3, 0));
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> first_two,
      tx->FindStalledTasks(StalledBefore(At(50), 2), Fields::kAll));
  EXPECT_THAT(TaskIndexesOf(first_two), ElementsAre(1, 3));
  EXPECT_THAT(
      ValueOf(tx->FindStalledTasks(StalledBefore(At(10), 10), Fields::kAll)),
      IsEmpty());
}

// A claim that read the message of a task already stalled hid it again
// until shortly after now: the promise's horizon covers it, its end
// included.
TEST_P(BackendContractTest, FindStalledTasks_MessageHiddenUntilTheHorizon) {
  SeedRun();
  std::vector<TaskRecord> started = {
      Started(MakeTask(1, 0, 0, 1), At(0), At(10))};
  Committed([&](Transaction& tx) {
    GiveReadMessages(tx, started);
    ASSERT_OK(tx.InsertTasks(Copied(started)));
    ASSERT_OK(tx.SetVisibility("greet", {{{.message_id = started[0].message_id,
                                           .visible_at = At(52)}}}));
  });
  EXPECT_THAT(TaskIndexesOf(ValueOf(Begin()->FindStalledTasks(
                  {.now = At(50), .messages_visible_by = At(52), .limit = 10},
                  Fields::kAll))),
              ElementsAre(0));
}

TEST_P(BackendContractTest,
       FindStalledTasks_SameStallTime_OrdersByRunInsertThenKey) {
  CreateQueue("greet");
  std::vector<TaskRecord> started = {
      Started(MakeTask(2, 0, 0, 1), kT0, At(10)),
      Started(MakeTask(9, 1, 0, 2), kT0, At(10)),
      Started(MakeTask(9, 0, 3, 3), kT0, At(10)),
      Started(MakeTask(9, 0, 1, 4), kT0, At(10))};
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(9)})));
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
    GiveReadMessages(tx, started);
    ASSERT_OK(tx.InsertTasks(Copied(started)));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> stalled,
      Begin()->FindStalledTasks(StalledBefore(At(11), 10), Fields::kAll));
  std::vector<std::string> keys;
  for (const TaskRecord& t : stalled) {
    keys.push_back(StrCat(t.key.run_id == RunNo(9) ? "r9/" : "r2/",
                          t.key.step_index, "/", t.key.task_index));
  }
  EXPECT_THAT(keys, ElementsAre("r9/0/1", "r9/0/3", "r9/1/0", "r2/0/0"));
}

TEST_P(BackendContractTest, FindStalledTasks_FollowsUpdatedStallTimes) {
  SeedRun();
  std::vector<TaskRecord> started = {
      Started(MakeTask(1, 0, 0, 1), At(0), At(10)),
      Started(MakeTask(1, 0, 1, 2), At(0), At(20))};
  Committed([&](Transaction& tx) {
    GiveReadMessages(tx, started);
    ASSERT_OK(tx.InsertTasks(Copied(started)));
  });
  const TaskRecord& a = started[0];
  const TaskRecord& b = started[1];
  TaskRecord a_extended = a;  // a heartbeat, which moves its message too
  a_extended.stall_at = At(100);
  TaskRecord b_done = b;
  b_done.status = TaskStatus::kCompleted;
  b_done.stall_at = std::nullopt;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpdateTasks(
        Movable({UpdateOf(a, a_extended), UpdateOf(b, b_done)})));
    ASSERT_OK(tx.SetVisibility(
        "greet", {{{.message_id = a.message_id, .visible_at = At(98)}}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(
      ValueOf(tx->FindStalledTasks(StalledBefore(At(50), 10), Fields::kAll)),
      IsEmpty());
  EXPECT_THAT(TaskIndexesOf(ValueOf(tx->FindStalledTasks(
                  StalledBefore(At(101), 10), Fields::kAll))),
              ElementsAre(0));
}

TEST_P(BackendContractTest,
       FindStalledTasks_NoPayloads_LeavesInputAndOutputEmpty) {
  SeedRun();
  std::vector<TaskRecord> started = {
      Started(MakeTask(1, 0, 0, 1), At(0), At(10))};
  started[0].output = J(R"({"partial":1})");
  Committed([&](Transaction& tx) {
    GiveReadMessages(tx, started);
    ASSERT_OK(tx.InsertTasks(Copied(started)));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> stalled,
                       Begin()->FindStalledTasks(StalledBefore(At(11), 10),
                                                 Fields::kNoPayloads));
  ASSERT_EQ(stalled.size(), 1u);
  TaskRecord expected = started[0];
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(stalled[0]), Describe(expected));
}

}  // namespace
}  // namespace sluice::contract
