// The Postgres backend's job operations (interface v4): claim order by
// priority then FIFO, moving a message to the tail, pausing queues, the next
// visible time, external keys, run listing and paging, metadata
// containment, the attempts ledger, the dedupe registry and task counts.
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_jobs_fixture.h"
#include "sluice/internal/one_trip_claims.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// --- Messages: claim order, tail, pause, next visible time ------------------

TEST_F(PostgresJobsTest, ReadMessages_TakesHigherPriorityFirst_ThenFifo) {
  CreateQueue("jobs_q");
  std::vector<int64_t> ids = Send("jobs_q", {0, 5, 0, 5, 1});
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_THAT(Read("jobs_q", 2), ElementsAre(ids[1], ids[3]));
  EXPECT_THAT(Read("jobs_q", 10), ElementsAre(ids[4], ids[0], ids[2]));
}

TEST_F(PostgresJobsTest, ReadMessages_ReturnsPriorityAndSkipsInvisible) {
  CreateQueue("jobs_q");
  std::vector<int64_t> later = Send("jobs_q", {9}, At(60));
  std::vector<int64_t> now = Send("jobs_q", {3});
  std::unique_ptr<Transaction> tx = Begin();
  std::vector<MessageRecord> read = ValueOf(
      tx->ReadMessages("jobs_q", kJobsT0, 10, At(30), Fields::kNoPayloads));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].message_id, now[0]);
  EXPECT_EQ(read[0].priority, 3);
  EXPECT_EQ(read[0].read_count, 1);
  EXPECT_EQ(read[0].visible_at, At(30));
  std::optional<MessageLocation> where =
      ValueOf(tx->LookupMessage("jobs_q", later[0]));
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->message.priority, 9);
}

TEST_F(PostgresJobsTest, SetVisibility_ToTail_GoesBehindItsPriority) {
  CreateQueue("jobs_q");
  std::vector<int64_t> ids = Send("jobs_q", {1, 1, 1, 0});
  ASSERT_THAT(Read("jobs_q", 1), ElementsAre(ids[0]));
  ASSERT_THAT(Read("jobs_q", 1), ElementsAre(ids[1]));
  // A retry goes to the tail; a release keeps its place.
  ASSERT_TRUE(
      InTransaction([&](Transaction& tx) {
        std::vector<VisibilityUpdate> updates = {
            {.message_id = ids[0], .visible_at = kJobsT0, .to_tail = true},
            {.message_id = ids[1], .visible_at = kJobsT0}};
        return tx.SetVisibility("jobs_q", updates);
      }).ok());
  EXPECT_THAT(Read("jobs_q", 10), ElementsAre(ids[1], ids[2], ids[0], ids[3]));
}

TEST_F(PostgresJobsTest, PausedQueue_ReadsNothing_UntilResumed) {
  CreateQueue("jobs_q");
  CreateQueue("other_q");
  std::vector<int64_t> ids = Send("jobs_q", {0, 0});
  std::vector<int64_t> other = Send("other_q", {0});
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                return tx.SetQueuePaused("jobs_q", true);
              }).ok());
  EXPECT_THAT(Read("jobs_q", 10), IsEmpty());
  EXPECT_THAT(Read("other_q", 10), ElementsAre(other[0]));
  {
    std::unique_ptr<Transaction> tx = Begin();
    std::optional<QueueRecord> queue = ValueOf(tx->GetQueue("jobs_q"));
    ASSERT_TRUE(queue.has_value());
    EXPECT_TRUE(queue->paused);
    std::vector<QueueRecord> queues = ValueOf(tx->ListQueues());
    ASSERT_EQ(queues.size(), 2u);
    EXPECT_EQ(queues[0].name, "jobs_q");
    EXPECT_TRUE(queues[0].paused);
    EXPECT_EQ(queues[1].name, "other_q");
    EXPECT_FALSE(queues[1].paused);
  }
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                return tx.SetQueuePaused("jobs_q", false);
              }).ok());
  EXPECT_THAT(Read("jobs_q", 10), ElementsAre(ids[0], ids[1]));
}

TEST_F(PostgresJobsTest, SetQueuePaused_UnknownQueue_IsNotFound) {
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(tx->SetQueuePaused("nope", true).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(PostgresJobsTest, NextVisibleAt_IsTheEarliestFutureTime_PausedOrNot) {
  CreateQueue("jobs_q");
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(ValueOf(tx->NextVisibleAt("jobs_q", kJobsT0)), std::nullopt);
  }
  Send("jobs_q", {0});
  Send("jobs_q", {0}, At(90));
  Send("jobs_q", {0}, At(30));
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                return tx.SetQueuePaused("jobs_q", true);
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("jobs_q", kJobsT0)), At(30));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("jobs_q", At(30))), At(90));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("jobs_q", At(90))), std::nullopt);
  EXPECT_EQ(tx->NextVisibleAt("missing_q", kJobsT0).status().code(),
            absl::StatusCode::kNotFound);
}

// --- Runs: new fields, external keys ----------------------------------------

TEST_F(PostgresJobsTest, RunFields_RoundTrip_OptionsExactly) {
  RunRecord run = MakeRun(1);
  run.priority = -3;
  run.external_key = "order-17";
  run.metadata = J(R"({"tenant":"a","n":[1,2]})");
  run.options = J(R"({"z":1,"a":{"kind":"fixed","delay_ms":5}})");
  RunRecord plain = MakeRun(2);
  ASSERT_TRUE(Insert({run, plain}).ok());
  std::unique_ptr<Transaction> tx = Begin();
  std::vector<std::optional<RunRecord>> read = ValueOf(tx->GetRuns(
      std::vector{RunNo(1), RunNo(2)}, LockMode::kNone, Fields::kNoPayloads));
  ASSERT_TRUE(read[0].has_value() && read[1].has_value());
  EXPECT_EQ(read[0]->priority, -3);
  EXPECT_EQ(read[0]->external_key, "order-17");
  EXPECT_EQ(read[0]->metadata, run.metadata);
  EXPECT_EQ(SerializeJson(read[0]->options), SerializeJson(run.options));
  EXPECT_FALSE(read[0]->cancel_requested);
  EXPECT_TRUE(read[1]->metadata.is_null());
  EXPECT_TRUE(read[1]->options.is_null());
  EXPECT_EQ(read[1]->external_key, "");
  read[0]->cancel_requested = true;
  std::vector<RunRecord> update = {*read[0]};
  ASSERT_TRUE(tx->UpdateRuns(std::span(update)).ok());
  ASSERT_TRUE(tx->Commit().ok());
  tx = Begin();
  EXPECT_TRUE(ValueOf(tx->GetRuns(std::vector{RunNo(1)}, LockMode::kNone,
                                  Fields::kAll))[0]
                  ->cancel_requested);
}

TEST_F(PostgresJobsTest, InsertRuns_DuplicateExternalKeyInAFlow_AlreadyExists) {
  RunRecord first = MakeRun(1);
  first.external_key = "k";
  ASSERT_TRUE(Insert({first, MakeRun(2), MakeRun(3)}).ok());  // "" repeats
  RunRecord again = MakeRun(4);
  again.external_key = "k";
  EXPECT_EQ(Insert({again}).code(), absl::StatusCode::kAlreadyExists);
  RunRecord other_flow = MakeRun(5, "other");
  other_flow.external_key = "k";
  EXPECT_TRUE(Insert({other_flow}).ok());

  std::unique_ptr<Transaction> tx = Begin();
  std::vector<std::string> keys = {"missing", "k", ""};
  std::vector<std::optional<RunRecord>> found =
      ValueOf(tx->FindRunsByKey("jobs", keys, Fields::kAll));
  ASSERT_EQ(found.size(), 3u);
  EXPECT_FALSE(found[0].has_value());
  ASSERT_TRUE(found[1].has_value());
  EXPECT_EQ(found[1]->run_id, RunNo(1));
  EXPECT_FALSE(found[2].has_value());
  EXPECT_FALSE(ValueOf(tx->GetRuns(std::vector{RunNo(4)}, LockMode::kNone,
                                   Fields::kAll))[0]
                   .has_value());
}

// --- Listing ----------------------------------------------------------------

TEST_F(PostgresJobsTest, ListRuns_PagesThroughTiesWithoutGapsOrRepeats) {
  std::vector<RunRecord> runs;
  for (uint64_t n : {4, 1, 5, 2, 3}) runs.push_back(MakeRun(n, "jobs", At(0)));
  runs.push_back(MakeRun(6, "jobs", At(-5)));
  runs.push_back(MakeRun(7, "jobs", At(5)));
  ASSERT_TRUE(Insert(runs).ok());
  for (bool newest_first : {true, false}) {
    std::vector<RunId> seen;
    RunQuery query;
    query.newest_first = newest_first;
    query.limit = 2;
    for (int page = 0; page < 10; ++page) {
      std::vector<RunRecord> got =
          ValueOf(Begin()->ListRuns(query, Fields::kNoPayloads));
      if (got.empty()) break;
      for (const RunRecord& run : got) seen.push_back(run.run_id);
      query.after =
          RunQuery::Position{got.back().started_at, got.back().run_id};
    }
    if (newest_first) {
      EXPECT_THAT(seen, ElementsAre(RunNo(7), RunNo(5), RunNo(4), RunNo(3),
                                    RunNo(2), RunNo(1), RunNo(6)));
    } else {
      EXPECT_THAT(seen, ElementsAre(RunNo(6), RunNo(1), RunNo(2), RunNo(3),
                                    RunNo(4), RunNo(5), RunNo(7)));
    }
  }
}

TEST_F(PostgresJobsTest, ListRuns_FiltersByFlowsStatusesAndTimeRange) {
  std::vector<RunRecord> runs = {MakeRun(1, "a", At(1)), MakeRun(2, "b", At(2)),
                                 MakeRun(3, "c", At(3)),
                                 MakeRun(4, "a", At(4))};
  runs[1].status = RunStatus::kFailed;
  runs[1].finished_at = At(20);
  runs[3].status = RunStatus::kCompleted;
  runs[3].finished_at = At(10);
  ASSERT_TRUE(Insert(runs).ok());
  std::unique_ptr<Transaction> tx = Begin();
  RunQuery query;
  query.flow_slugs = {"a", "b"};
  EXPECT_THAT(IdsOf(ValueOf(tx->ListRuns(query, Fields::kAll))),
              ElementsAre(RunNo(4), RunNo(2), RunNo(1)));
  query.statuses = {RunStatus::kStarted, RunStatus::kCompleted};
  EXPECT_THAT(IdsOf(ValueOf(tx->ListRuns(query, Fields::kAll))),
              ElementsAre(RunNo(4), RunNo(1)));
  query = RunQuery();
  query.from = At(2);
  query.to = At(4);
  EXPECT_THAT(IdsOf(ValueOf(tx->ListRuns(query, Fields::kAll))),
              ElementsAre(RunNo(3), RunNo(2)));
  // By finish time: unfinished runs are left out; the range applies to it.
  query = RunQuery();
  query.order_by = RunQuery::OrderBy::kFinishedAt;
  query.newest_first = false;
  EXPECT_THAT(IdsOf(ValueOf(tx->ListRuns(query, Fields::kAll))),
              ElementsAre(RunNo(4), RunNo(2)));
  query.from = At(15);
  EXPECT_THAT(IdsOf(ValueOf(tx->ListRuns(query, Fields::kAll))),
              ElementsAre(RunNo(2)));
  query = RunQuery();
  query.limit = 0;
  EXPECT_THAT(ValueOf(tx->ListRuns(query, Fields::kAll)), IsEmpty());
}

TEST_F(PostgresJobsTest, ListRuns_MetadataFilter_IsJsonContainment) {
  std::vector<RunRecord> runs = {MakeRun(1), MakeRun(2), MakeRun(3)};
  runs[0].metadata = J(R"({"tenant":"a","tags":["x","y"],"n":1})");
  runs[1].metadata = J(R"({"tenant":"b","tags":["y"]})");
  ASSERT_TRUE(Insert(runs).ok());
  std::unique_ptr<Transaction> tx = Begin();
  auto matching = [&](std::string_view metadata) {
    RunQuery query;
    query.metadata = J(metadata);
    return IdsOf(ValueOf(tx->ListRuns(query, Fields::kNoPayloads)));
  };
  EXPECT_THAT(matching(R"({"tags":["y"]})"), ElementsAre(RunNo(2), RunNo(1)));
  EXPECT_THAT(matching(R"({"tags":["x"],"tenant":"a"})"),
              ElementsAre(RunNo(1)));
  EXPECT_THAT(matching(R"({"n":1.0})"), ElementsAre(RunNo(1)));
  EXPECT_THAT(matching(R"({"tenant":"c"})"), IsEmpty());
  EXPECT_THAT(matching("{}"), ElementsAre(RunNo(2), RunNo(1)));
  EXPECT_THAT(matching("null"), ElementsAre(RunNo(3), RunNo(2), RunNo(1)));
}

// --- Tasks: new fields, counts ----------------------------------------------

TEST_F(PostgresJobsTest, TaskFields_RoundTrip_AndUpdatesWriteThem) {
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  TaskRecord task = MakeTask(1, 0);
  task.options = J(R"({"max_attempts":3,"timeout_ms":100})");
  task.budget_start = 2;
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                std::vector<TaskRecord> tasks = {task};
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  std::vector<TaskKey> keys = {task.key};
  std::optional<TaskRecord> read =
      ValueOf(tx->GetTasks(keys, Fields::kNoPayloads))[0];
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->budget_start, 2);
  EXPECT_FALSE(read->cancel_requested);
  EXPECT_EQ(SerializeJson(read->options), SerializeJson(task.options));
  TaskUpdate update{.task = *read};
  update.task.budget_start = 5;
  update.task.cancel_requested = true;
  update.task.options = J("null");  // fixed at creation: not written
  std::vector<TaskUpdate> updates = {update};
  EXPECT_THAT(ValueOf(tx->UpdateTasks(std::span(updates))), ElementsAre(true));
  read = ValueOf(tx->GetTasks(keys, Fields::kAll))[0];
  EXPECT_EQ(read->budget_start, 5);
  EXPECT_TRUE(read->cancel_requested);
  EXPECT_EQ(SerializeJson(read->options), SerializeJson(task.options));
}

TEST_F(PostgresJobsTest, CountTasks_SplitsQueuedByVisibility) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<int64_t> now = Send("jobs_q", {0, 0});
  std::vector<int64_t> later = Send("jobs_q", {0}, At(60));
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < 7; ++i) tasks.push_back(MakeTask(1, i));
  tasks[0].message_id = now[0];
  tasks[1].message_id = now[1];
  tasks[2].message_id = later[0];
  tasks[3].status = TaskStatus::kStarted;
  tasks[4].status = TaskStatus::kCompleted;
  tasks[5].status = TaskStatus::kFailed;
  tasks[6].status = TaskStatus::kCancelled;
  tasks.push_back(MakeTask(1, 7, "other_q"));
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  QueueCounts counts =
      ValueOf(tx->CountTasks("jobs_q", kJobsT0, TaskCounts::kAll));
  EXPECT_EQ(counts.waiting, 2);
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.active, 1);
  EXPECT_EQ(counts.completed, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.cancelled, 1);
  EXPECT_EQ(counts.skipped, 0);
  counts = ValueOf(tx->CountTasks("jobs_q", At(60), TaskCounts::kAll));
  EXPECT_EQ(counts.waiting, 3);
  EXPECT_EQ(counts.delayed, 0);
  counts = ValueOf(tx->CountTasks("no_such_q", kJobsT0, TaskCounts::kAll));
  EXPECT_EQ(counts.waiting + counts.delayed + counts.active, 0);
}

// --- One-trip claims (internal::OneTripClaims) ------------------------------

TEST_F(PostgresJobsTest, ReadMessagesWithTasks_PairsMessagesInClaimOrder) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<int64_t> ids = Send("jobs_q", {0, 0, 5});
  std::vector<TaskRecord> tasks = {MakeTask(1, 0), MakeTask(1, 1)};
  tasks[0].message_id = ids[0];
  tasks[1].message_id = ids[2];
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  auto* one_trip = dynamic_cast<internal::OneTripClaims*>(tx.get());
  ASSERT_NE(one_trip, nullptr);
  internal::MessagesWithTasks read = ValueOf(one_trip->ReadMessagesWithTasks(
      "jobs_q", kJobsT0, 10, At(30), Fields::kAll));
  ASSERT_EQ(read.messages.size(), 3u);
  ASSERT_EQ(read.tasks.size(), 3u);
  EXPECT_EQ(read.messages[0].message_id, ids[2]);  // priority first
  EXPECT_EQ(read.messages[1].message_id, ids[0]);
  EXPECT_EQ(read.messages[2].message_id, ids[1]);
  ASSERT_TRUE(read.tasks[0].has_value());
  EXPECT_EQ(read.tasks[0]->key.task_index, 1);
  ASSERT_TRUE(read.tasks[1].has_value());
  EXPECT_EQ(read.tasks[1]->key.task_index, 0);
  EXPECT_EQ(SerializeJson(read.tasks[1]->input), "1");
  EXPECT_EQ(read.tasks[2], std::nullopt);  // a message without a task
  EXPECT_EQ(read.messages[0].read_count, 1);
  EXPECT_EQ(read.messages[0].visible_at, At(30));
  EXPECT_TRUE(read.messages[0].body.is_null());
  // Read means hidden, as with ReadMessages.
  read = ValueOf(one_trip->ReadMessagesWithTasks("jobs_q", At(29), 10, At(60),
                                                 Fields::kAll));
  EXPECT_THAT(read.messages, IsEmpty());
}

TEST_F(PostgresJobsTest, UpdateTasksAndCommit_CommitsWithTheEarlierWrites) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<int64_t> ids = Send("jobs_q", {0});
  std::vector<TaskRecord> tasks = {MakeTask(1, 0), MakeTask(1, 1)};
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  TaskRecord started = tasks[0];
  started.status = TaskStatus::kStarted;
  started.attempts = 1;
  TaskRecord again = started;
  again.attempts = 2;
  TaskRecord stale = tasks[1];
  stale.status = TaskStatus::kStarted;
  // tasks[0] twice (the second sees the first); tasks[1] with a wrong
  // expected attempt count.
  std::vector<TaskUpdate> updates = {
      {.task = started, .expected_status = TaskStatus::kQueued},
      {.task = stale,
       .expected_status = TaskStatus::kQueued,
       .expected_attempts = 7},
      {.task = again,
       .expected_status = TaskStatus::kStarted,
       .expected_attempts = 1}};
  {
    std::unique_ptr<Transaction> tx = Begin();
    std::vector<VisibilityUpdate> hide = {
        {.message_id = ids[0], .visible_at = At(90)}};
    ASSERT_TRUE(tx->SetVisibility("jobs_q", hide).ok());
    auto* one_trip = dynamic_cast<internal::OneTripClaims*>(tx.get());
    ASSERT_NE(one_trip, nullptr);
    EXPECT_THAT(ValueOf(one_trip->UpdateTasksAndCommit(std::span(updates))),
                ElementsAre(true, false, true));
    EXPECT_EQ(tx->Commit().code(), absl::StatusCode::kFailedPrecondition);
  }
  std::unique_ptr<Transaction> tx = Begin();
  std::vector<TaskKey> keys = {tasks[0].key, tasks[1].key};
  std::vector<std::optional<TaskRecord>> now =
      ValueOf(tx->GetTasks(keys, Fields::kNoPayloads));
  EXPECT_EQ(now[0]->attempts, 2);
  EXPECT_EQ(now[1]->status, TaskStatus::kQueued);
  EXPECT_EQ(ValueOf(tx->LookupMessage("jobs_q", ids[0]))->message.visible_at,
            At(90));
}

TEST_F(PostgresJobsTest, UpdateTasksAndCommit_FailedUpdate_CommitsNothing) {
  CreateQueue("jobs_q");
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<int64_t> ids = Send("jobs_q", {0});
  std::vector<TaskRecord> tasks = {MakeTask(1, 0), MakeTask(1, 1)};
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.InsertTasks(std::span(tasks));
              }).ok());
  // (queue, message id) is unique: taking the other task's fails.
  TaskRecord bad = tasks[0];
  bad.message_id = tasks[1].message_id;
  std::vector<TaskUpdate> updates = {
      {.task = bad, .expected_status = TaskStatus::kQueued}};
  {
    std::unique_ptr<Transaction> tx = Begin();
    std::vector<VisibilityUpdate> hide = {
        {.message_id = ids[0], .visible_at = At(90)}};
    ASSERT_TRUE(tx->SetVisibility("jobs_q", hide).ok());
    auto* one_trip = dynamic_cast<internal::OneTripClaims*>(tx.get());
    ASSERT_NE(one_trip, nullptr);
    EXPECT_FALSE(one_trip->UpdateTasksAndCommit(std::span(updates)).ok());
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->LookupMessage("jobs_q", ids[0]))->message.visible_at,
            kJobsT0);
}

// --- The attempts ledger ----------------------------------------------------

AttemptRecord Attempt(uint64_t run, int task_index, int attempt,
                      AttemptOutcome outcome) {
  return {.task = {RunNo(run), 0, task_index},
          .attempt = attempt,
          .worker_id = "w1",
          .started_at = At(attempt),
          .finished_at = At(attempt + 1),
          .outcome = outcome,
          .error = outcome == AttemptOutcome::kCompleted ? "" : "boom"};
}

TEST_F(PostgresJobsTest, Attempts_ListInOrder_RefuseRepeatsAndGoWithTheRun) {
  ASSERT_TRUE(Insert({MakeRun(1), MakeRun(2)}).ok());
  std::vector<AttemptRecord> attempts = {
      Attempt(1, 1, 1, AttemptOutcome::kCompleted),
      Attempt(1, 0, 2, AttemptOutcome::kCompleted),
      Attempt(1, 0, 1, AttemptOutcome::kRetried),
      Attempt(2, 0, 1, AttemptOutcome::kStalled)};
  attempts[1].started_at.reset();
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.AppendAttempts(attempts);
              }).ok());
  {
    std::unique_ptr<Transaction> tx = Begin();
    std::vector<AttemptRecord> ledger = ValueOf(tx->ListAttempts(RunNo(1)));
    ASSERT_EQ(ledger.size(), 3u);
    EXPECT_EQ(ledger[0].attempt, 1);
    EXPECT_EQ(ledger[0].outcome, AttemptOutcome::kRetried);
    EXPECT_EQ(ledger[0].error, "boom");
    EXPECT_EQ(ledger[0].started_at, At(1));
    EXPECT_EQ(ledger[1].attempt, 2);
    EXPECT_EQ(ledger[1].started_at, std::nullopt);
    EXPECT_EQ(ledger[1].finished_at, At(3));
    EXPECT_EQ(ledger[2].task.task_index, 1);
    EXPECT_EQ(ledger[2].worker_id, "w1");
    EXPECT_TRUE(ledger[2].unreadable.empty());
  }
  std::vector<AttemptRecord> repeat = {attempts[0]};
  EXPECT_EQ(InTransaction([&](Transaction& tx) {
              return tx.AppendAttempts(repeat);
            }).code(),
            absl::StatusCode::kAlreadyExists);
  std::vector<AttemptRecord> orphan = {
      Attempt(9, 0, 1, AttemptOutcome::kFailed)};
  EXPECT_EQ(InTransaction([&](Transaction& tx) {
              return tx.AppendAttempts(orphan);
            }).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                std::vector<RunId> ids = {RunNo(1)};
                return tx.DeleteRuns(ids).status();
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->ListAttempts(RunNo(1))), IsEmpty());
  EXPECT_EQ(ValueOf(tx->ListAttempts(RunNo(2))).size(), 1u);
}

TEST_F(PostgresJobsTest, Attempts_UnknownOutcome_IsUnreadableNotAFailure) {
  ASSERT_TRUE(Insert({MakeRun(1)}).ok());
  std::vector<AttemptRecord> attempts = {
      Attempt(1, 0, 1, AttemptOutcome::kFailed)};
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.AppendAttempts(attempts);
              }).ok());
  Execute("UPDATE sluice.attempts SET outcome = 'exploded'");
  std::vector<AttemptRecord> ledger = ValueOf(Begin()->ListAttempts(RunNo(1)));
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_THAT(ledger[0].unreadable, ::testing::HasSubstr("exploded"));
}

// --- The dedupe registry ----------------------------------------------------

TEST_F(PostgresJobsTest, Dedupe_PutGetOverwriteAndDeleteByHolder) {
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->GetDedupe("jobs", "k")), std::nullopt);
  ASSERT_TRUE(tx->PutDedupe({"jobs", "k", RunNo(1), std::nullopt}).ok());
  std::optional<DedupeRecord> entry = ValueOf(tx->GetDedupe("jobs", "k"));
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->run_id, RunNo(1));
  EXPECT_EQ(entry->expires_at, std::nullopt);
  ASSERT_TRUE(tx->PutDedupe({"jobs", "k", RunNo(2), At(10)}).ok());
  entry = ValueOf(tx->GetDedupe("jobs", "k"));
  EXPECT_EQ(entry->run_id, RunNo(2));
  EXPECT_EQ(entry->expires_at, At(10));
  EXPECT_EQ(ValueOf(tx->GetDedupe("other", "k")), std::nullopt);
  EXPECT_FALSE(ValueOf(tx->DeleteDedupe("jobs", "k", RunNo(1))));
  EXPECT_TRUE(ValueOf(tx->DeleteDedupe("jobs", "k", RunNo(2))));
  EXPECT_EQ(ValueOf(tx->GetDedupe("jobs", "k")), std::nullopt);
}

TEST_F(PostgresJobsTest, DeleteExpiredDedupe_TakesOnlyEndedWindowsUpToLimit) {
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                for (int i = 0; i < 3; ++i) {
                  absl::Status status = tx.PutDedupe(
                      {"jobs", StrCat("t", i), RunNo(i + 1), At(10 * i)});
                  if (!status.ok()) return status;
                }
                return tx.PutDedupe({"jobs", "pending", RunNo(9), {}});
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->DeleteExpiredDedupe(At(10), 1)), 1);
  EXPECT_EQ(ValueOf(tx->GetDedupe("jobs", "t0")), std::nullopt);
  EXPECT_EQ(ValueOf(tx->DeleteExpiredDedupe(At(10), 10)), 1);
  EXPECT_EQ(ValueOf(tx->DeleteExpiredDedupe(At(10), 10)), 0);
  EXPECT_TRUE(ValueOf(tx->GetDedupe("jobs", "t2")).has_value());
  EXPECT_TRUE(ValueOf(tx->GetDedupe("jobs", "pending")).has_value());
}

TEST_F(PostgresJobsTest, GetDedupe_AbsentKey_HoldsOffASecondTransaction) {
  std::unique_ptr<Transaction> first = Begin();
  ASSERT_EQ(ValueOf(first->GetDedupe("jobs", "k")), std::nullopt);
  absl::Notification second_saw;
  std::optional<DedupeRecord> second_entry;
  std::thread second([&] {
    std::unique_ptr<Transaction> tx = Begin();
    second_entry = ValueOf(tx->GetDedupe("jobs", "k"));
    second_saw.Notify();
  });
  // Wait until the server shows the second waiting for the first's lock.
  absl::StatusOr<postgres_internal::Session> admin =
      postgres_internal::Session::Open(db_->url());
  ASSERT_TRUE(admin.ok()) << admin.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool waiting = false;
  while (!waiting && absl::Now() < deadline) {
    absl::StatusOr<std::string> count = admin->QueryText(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT "
        "granted",
        {}, "waiters");
    ASSERT_TRUE(count.ok()) << count.status();
    waiting = *count == "1";
  }
  ASSERT_TRUE(waiting) << "the second transaction never waited";
  ASSERT_TRUE(first->PutDedupe({"jobs", "k", RunNo(1), std::nullopt}).ok());
  EXPECT_FALSE(second_saw.HasBeenNotified());
  ASSERT_TRUE(first->Commit().ok());
  second.join();
  ASSERT_TRUE(second_entry.has_value());
  EXPECT_EQ(second_entry->run_id, RunNo(1));
}

}  // namespace
}  // namespace sluice::testing
