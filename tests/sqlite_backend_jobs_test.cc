// The SQLite backend's interface v4 operations for jobs: claim order by
// priority and FIFO sequence, sending to the tail, paused queues, external
// keys, the new run and task fields, task counts, the attempts ledger and
// the dedupe registry. Listing runs (RunQuery) is in
// sqlite_backend_listing_test.cc. The cross-backend contract is in
// backend_contract_*; these are the SQLite backend's own checks.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::GetRun;
using ::sluice::sqlite_testing::J;
using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeQueue;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::MakeTask;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::sluice::sqlite_testing::ValueOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RunId RunNo(int n) { return RunId(0x0190000000007000ULL, n); }

std::vector<int64_t> IdsOf(const std::vector<MessageRecord>& messages) {
  std::vector<int64_t> ids;
  for (const MessageRecord& message : messages)
    ids.push_back(message.message_id);
  return ids;
}

class SqliteJobsTest : public SqliteBackendTest {
 protected:
  void SetUp() override {
    SqliteBackendTest::SetUp();
    backend_ = Open();
    ASSERT_NE(backend_, nullptr);
    std::unique_ptr<Transaction> txn = Begin(*backend_);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("q")).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }

  using SqliteBackendTest::Begin;
  std::unique_ptr<Transaction> Begin() { return Begin(*backend_); }

  // Sends one message per priority, in order, visible at kT0; their ids.
  std::vector<int64_t> SendWithPriorities(Transaction& txn,
                                          std::vector<int> priorities) {
    std::vector<OutgoingMessage> messages;
    for (int priority : priorities) {
      messages.push_back({J(StrCat("{\"p\":", priority, "}")), kT0, priority});
    }
    return ValueOf(txn.SendMessages("q", messages, kT0));
  }

  std::vector<MessageRecord> Read(Transaction& txn, int limit) {
    return ValueOf(txn.ReadMessages("q", kT0, limit, kT0 + absl::Minutes(1),
                                    Fields::kAll));
  }

  std::unique_ptr<SqliteBackend> backend_;
};

// --- Claim order -------------------------------------------------------------

TEST_F(SqliteJobsTest, ReadMessages_HigherPriorityFirst_ThenSendOrder) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {0, 5, 0, 9, 5, -1});

  std::vector<MessageRecord> read = Read(*txn, 10);

  EXPECT_THAT(IdsOf(read),
              ElementsAre(ids[3], ids[1], ids[4], ids[0], ids[2], ids[5]));
  EXPECT_EQ(read[0].priority, 9);
  EXPECT_EQ(read[0].body, J(R"({"p":9})"));
  EXPECT_EQ(read[5].priority, -1);
}

TEST_F(SqliteJobsTest, ReadMessages_LimitTakesTheFirstInClaimOrder) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {1, 3, 2});

  EXPECT_THAT(IdsOf(Read(*txn, 2)), ElementsAre(ids[1], ids[2]));
  EXPECT_THAT(IdsOf(Read(*txn, 2)), ElementsAre(ids[0]));
}

TEST_F(SqliteJobsTest, SetVisibility_ToTail_GoesBehindItsPriorityOnly) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {0, 0, 0, 1});
  std::vector<VisibilityUpdate> retry = {{ids[0], kT0, /*to_tail=*/true}};
  ASSERT_TRUE(txn->SetVisibility("q", retry).ok());

  EXPECT_THAT(IdsOf(Read(*txn, 10)),
              ElementsAre(ids[3], ids[1], ids[2], ids[0]));
}

TEST_F(SqliteJobsTest, SetVisibility_WithoutToTail_KeepsItsPlace) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {0, 0, 0});
  ASSERT_THAT(IdsOf(Read(*txn, 1)), ElementsAre(ids[0]));
  std::vector<VisibilityUpdate> release = {{ids[0], kT0}};
  ASSERT_TRUE(txn->SetVisibility("q", release).ok());

  EXPECT_THAT(IdsOf(Read(*txn, 10)), ElementsAre(ids[0], ids[1], ids[2]));
}

TEST_F(SqliteJobsTest, SetVisibility_ToTailInOneCall_KeepsTheCallsOrder) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {0, 0, 0});
  std::vector<VisibilityUpdate> retries = {{ids[1], kT0, true},
                                           {ids[0], kT0, true}};
  ASSERT_TRUE(txn->SetVisibility("q", retries).ok());
  // A later send still comes after them.
  std::vector<int64_t> later = SendWithPriorities(*txn, {0});

  EXPECT_THAT(IdsOf(Read(*txn, 10)),
              ElementsAre(ids[2], ids[1], ids[0], later[0]));
}

TEST_F(SqliteJobsTest, ReadMessages_PausedQueue_ReadsNothingUntilResumed) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {0});
  ASSERT_TRUE(txn->SetQueuePaused("q", true).ok());

  EXPECT_THAT(Read(*txn, 10), IsEmpty());
  EXPECT_TRUE(ValueOf(txn->GetQueue("q"))->paused);
  ASSERT_TRUE(txn->SetQueuePaused("q", false).ok());
  EXPECT_THAT(IdsOf(Read(*txn, 10)), ElementsAre(ids[0]));
}

TEST_F(SqliteJobsTest, SetQueuePaused_UnknownQueue_IsNotFound) {
  std::unique_ptr<Transaction> txn = Begin();
  absl::Status status = txn->SetQueuePaused("nope", true);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("\"nope\""));
}

TEST_F(SqliteJobsTest, ListQueues_ByName_WithPausedFlags) {
  std::unique_ptr<Transaction> txn = Begin();
  QueueRecord paused = MakeQueue("a");
  paused.paused = true;
  ASSERT_TRUE(txn->CreateQueue(paused).ok());

  std::vector<QueueRecord> queues = ValueOf(txn->ListQueues());

  ASSERT_EQ(queues.size(), 2u);
  EXPECT_EQ(queues[0].name, "a");
  EXPECT_TRUE(queues[0].paused);
  EXPECT_EQ(queues[1].name, "q");
  EXPECT_FALSE(queues[1].paused);
  EXPECT_EQ(queues[1].owner_flow, "flow");
  EXPECT_EQ(queues[1].created_at, kT0);
}

TEST_F(SqliteJobsTest, NextVisibleAt_EarliestAfterNow_EvenWhilePaused) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<OutgoingMessage> messages = {{J("1"), kT0},
                                           {J("2"), kT0 + absl::Seconds(30)},
                                           {J("3"), kT0 + absl::Seconds(10)}};
  ASSERT_TRUE(txn->SendMessages("q", messages, kT0).ok());
  ASSERT_TRUE(txn->SetQueuePaused("q", true).ok());

  EXPECT_EQ(ValueOf(txn->NextVisibleAt("q", kT0)), kT0 + absl::Seconds(10));
  EXPECT_EQ(ValueOf(txn->NextVisibleAt("q", kT0 + absl::Seconds(10))),
            kT0 + absl::Seconds(30));
  EXPECT_EQ(ValueOf(txn->NextVisibleAt("q", kT0 + absl::Seconds(30))),
            std::nullopt);
  EXPECT_EQ(txn->NextVisibleAt("nope", kT0).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SqliteJobsTest, LookupMessage_ArchivedKeepsItsPriority) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<int64_t> ids = SendWithPriorities(*txn, {7});
  ASSERT_TRUE(txn->ArchiveMessages("q", ids, kT0).ok());

  std::optional<MessageLocation> found =
      ValueOf(txn->LookupMessage("q", ids[0]));

  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->archived);
  EXPECT_EQ(found->archived_at, kT0);
  EXPECT_EQ(found->message.priority, 7);
}

// --- Runs and tasks ----------------------------------------------------------

TEST_F(SqliteJobsTest, Runs_NewFields_RoundTripAndCancelRequestedUpdates) {
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  run.priority = -3;
  run.external_key = "order-17";
  run.metadata = J(R"({"tenant":"acme","tags":["a","b"]})");
  run.options = J(R"({"max_attempts":3})");
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  RunRecord plain = MakeRun(RunNo(2), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&plain, 1}).ok());

  std::optional<RunRecord> read = GetRun(*txn, RunNo(1), Fields::kNoPayloads);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->priority, -3);
  EXPECT_EQ(read->external_key, "order-17");
  EXPECT_EQ(read->metadata, run.metadata);
  EXPECT_EQ(read->options, run.options);
  EXPECT_FALSE(read->cancel_requested);
  EXPECT_TRUE(read->input.is_null());  // kNoPayloads
  std::optional<RunRecord> read_plain = GetRun(*txn, RunNo(2));
  EXPECT_TRUE(read_plain->metadata.is_null());
  EXPECT_TRUE(read_plain->options.is_null());
  EXPECT_EQ(read_plain->external_key, "");

  read->cancel_requested = true;
  ASSERT_TRUE(txn->UpdateRuns({&*read, 1}).ok());
  EXPECT_TRUE(GetRun(*txn, RunNo(1))->cancel_requested);
}

TEST_F(SqliteJobsTest, InsertRuns_DuplicateExternalKeyInFlow_AlreadyExists) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<RunRecord> runs = {
      MakeRun(RunNo(1), "flow", kT0), MakeRun(RunNo(2), "other", kT0),
      MakeRun(RunNo(3), "flow", kT0), MakeRun(RunNo(4), "flow", kT0)};
  runs[0].external_key = "k";
  runs[1].external_key = "k";               // another flow: its own key
  ASSERT_TRUE(txn->InsertRuns(runs).ok());  // 3 and 4: no key, no conflict
  ASSERT_TRUE(txn->Commit().ok());

  txn = Begin();
  RunRecord duplicate = MakeRun(RunNo(5), "flow", kT0);
  duplicate.external_key = "k";
  absl::Status status = txn->InsertRuns({&duplicate, 1});
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("external key"));
}

TEST_F(SqliteJobsTest, FindRunsByKey_OneEntryPerKeyInOrder) {
  std::unique_ptr<Transaction> txn = Begin();
  std::vector<RunRecord> runs = {MakeRun(RunNo(1), "flow", kT0),
                                 MakeRun(RunNo(2), "flow", kT0),
                                 MakeRun(RunNo(3), "other", kT0)};
  runs[0].external_key = "a";
  runs[1].external_key = "b";
  runs[2].external_key = "c";
  ASSERT_TRUE(txn->InsertRuns(runs).ok());
  const std::vector<std::string> keys = {"b", "c", "", "a", "b"};

  std::vector<std::optional<RunRecord>> found =
      ValueOf(txn->FindRunsByKey("flow", keys, Fields::kAll));

  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(found[0]->run_id, RunNo(2));
  EXPECT_FALSE(found[1].has_value());  // another flow's key
  EXPECT_FALSE(found[2].has_value());  // no key matches nothing
  EXPECT_EQ(found[3]->run_id, RunNo(1));
  EXPECT_EQ(found[3]->input, J(R"({"n":1})"));
  EXPECT_EQ(found[4]->run_id, RunNo(2));
}

TEST_F(SqliteJobsTest, Tasks_NewFields_RoundTripAndUpdate) {
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  std::vector<TaskRecord> tasks = {MakeTask(RunNo(1), 0, 1),
                                   MakeTask(RunNo(1), 1, 2)};
  tasks[0].options = J(R"({"timeout_ms":500})");
  tasks[0].budget_start = 2;
  ASSERT_TRUE(txn->InsertTasks(tasks).ok());

  std::vector<TaskRecord> listed = ValueOf(txn->ListTasks(RunNo(1)));
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].options, tasks[0].options);
  EXPECT_EQ(listed[0].budget_start, 2);
  EXPECT_FALSE(listed[0].cancel_requested);
  EXPECT_TRUE(listed[1].options.is_null());

  TaskUpdate update{listed[0], TaskStatus::kQueued, 0};
  update.task.budget_start = 4;
  update.task.cancel_requested = true;
  ASSERT_THAT(ValueOf(txn->UpdateTasks({&update, 1})), ElementsAre(true));
  std::vector<std::optional<TaskRecord>> read =
      ValueOf(txn->GetTasks({&listed[0].key, 1}, Fields::kNoPayloads));
  EXPECT_EQ(read[0]->budget_start, 4);
  EXPECT_TRUE(read[0]->cancel_requested);
  EXPECT_EQ(read[0]->options, tasks[0].options);  // not a payload
}

TEST_F(SqliteJobsTest, CountTasks_QueuedSplitByVisibility) {
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  std::vector<OutgoingMessage> messages = {{J("0"), kT0},
                                           {J("1"), kT0 + absl::Minutes(5)},
                                           {J("2"), kT0},
                                           {J("3"), kT0},
                                           {J("4"), kT0}};
  std::vector<int64_t> ids = ValueOf(txn->SendMessages("q", messages, kT0));
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < 5; ++i) {
    tasks.push_back(MakeTask(RunNo(1), i, ids[i]));
    tasks.back().queue_name = "q";
  }
  tasks[2].status = TaskStatus::kStarted;
  tasks[3].status = TaskStatus::kCompleted;
  tasks[4].status = TaskStatus::kFailed;
  ASSERT_TRUE(txn->InsertTasks(tasks).ok());

  QueueCounts counts = ValueOf(txn->CountTasks("q", kT0, TaskCounts::kAll));
  EXPECT_EQ(counts.waiting, 1);
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.active, 1);
  EXPECT_EQ(counts.completed, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.cancelled, 0);
  EXPECT_EQ(counts.skipped, 0);
  EXPECT_EQ(
      ValueOf(txn->CountTasks("q", kT0 + absl::Minutes(5), TaskCounts::kAll))
          .waiting,
      2);
  EXPECT_EQ(ValueOf(txn->CountTasks("empty", kT0, TaskCounts::kAll)).waiting,
            0);
}

// --- The attempts ledger -----------------------------------------------------

AttemptRecord Attempt(int task_index, int attempt, AttemptOutcome outcome) {
  AttemptRecord record;
  record.task = TaskKey{RunNo(1), 0, task_index};
  record.attempt = attempt;
  record.worker_id = "w1";
  record.started_at = kT0 + absl::Seconds(attempt);
  record.finished_at = kT0 + absl::Seconds(attempt + 1);
  record.outcome = outcome;
  record.error = outcome == AttemptOutcome::kCompleted ? "" : "boom";
  return record;
}

TEST_F(SqliteJobsTest, Attempts_ListedByTaskThenAttempt_AndGoWithTheRun) {
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  std::vector<AttemptRecord> attempts = {
      Attempt(1, 1, AttemptOutcome::kCompleted),
      Attempt(0, 2, AttemptOutcome::kCompleted),
      Attempt(0, 1, AttemptOutcome::kRetried)};
  attempts[0].started_at.reset();
  ASSERT_TRUE(txn->AppendAttempts(attempts).ok());

  std::vector<AttemptRecord> listed = ValueOf(txn->ListAttempts(RunNo(1)));
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].task.task_index, 0);
  EXPECT_EQ(listed[0].attempt, 1);
  EXPECT_EQ(listed[0].outcome, AttemptOutcome::kRetried);
  EXPECT_EQ(listed[0].error, "boom");
  EXPECT_EQ(listed[0].worker_id, "w1");
  EXPECT_EQ(listed[0].started_at, kT0 + absl::Seconds(1));
  EXPECT_EQ(listed[0].finished_at, kT0 + absl::Seconds(2));
  EXPECT_EQ(listed[1].attempt, 2);
  EXPECT_EQ(listed[2].task.task_index, 1);
  EXPECT_EQ(listed[2].started_at, std::nullopt);
  EXPECT_TRUE(listed[2].unreadable.empty());

  ASSERT_EQ(ValueOf(txn->DeleteRuns(std::vector<RunId>{RunNo(1)})), 1);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());  // the same id again
  EXPECT_THAT(ValueOf(txn->ListAttempts(RunNo(1))), IsEmpty());
}

TEST_F(SqliteJobsTest, AppendAttempts_DuplicateOrMissingRun_FailsClearly) {
  {
    std::unique_ptr<Transaction> txn = Begin();
    std::vector<AttemptRecord> orphan = {
        Attempt(0, 1, AttemptOutcome::kFailed)};
    absl::Status status = txn->AppendAttempts(orphan);
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(status.message(), HasSubstr(RunNo(1).ToString()));
  }
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  std::vector<AttemptRecord> twice = {Attempt(0, 1, AttemptOutcome::kRetried),
                                      Attempt(0, 1, AttemptOutcome::kFailed)};
  EXPECT_EQ(txn->AppendAttempts(twice).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(SqliteJobsTest, Attempts_UnknownOutcome_IsUnreadableNotAFailure) {
  {
    std::unique_ptr<Transaction> txn = Begin();
    RunRecord run = MakeRun(RunNo(1), "flow", kT0);
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    std::vector<AttemptRecord> one = {Attempt(0, 1, AttemptOutcome::kFailed)};
    ASSERT_TRUE(txn->AppendAttempts(one).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase(path()).Exec("UPDATE attempts SET outcome = 'exploded'");

  std::vector<AttemptRecord> listed = ValueOf(Begin()->ListAttempts(RunNo(1)));

  ASSERT_EQ(listed.size(), 1u);
  EXPECT_THAT(listed[0].unreadable, HasSubstr("exploded"));
  EXPECT_EQ(listed[0].error, "boom");
}

// --- The dedupe registry -----------------------------------------------------

TEST_F(SqliteJobsTest, Dedupe_PutOverwritesAndDeleteNeedsTheHolder) {
  std::unique_ptr<Transaction> txn = Begin();
  EXPECT_EQ(ValueOf(txn->GetDedupe("flow", "k")), std::nullopt);
  ASSERT_TRUE(txn->PutDedupe({"flow", "k", RunNo(1), std::nullopt}).ok());
  ASSERT_TRUE(txn->PutDedupe({"other", "k", RunNo(3), kT0}).ok());
  ASSERT_TRUE(txn->PutDedupe({"flow", "k", RunNo(2), kT0}).ok());

  std::optional<DedupeRecord> entry = ValueOf(txn->GetDedupe("flow", "k"));
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->run_id, RunNo(2));
  EXPECT_EQ(entry->expires_at, kT0);
  EXPECT_FALSE(ValueOf(txn->DeleteDedupe("flow", "k", RunNo(1))));
  EXPECT_TRUE(ValueOf(txn->DeleteDedupe("flow", "k", RunNo(2))));
  EXPECT_EQ(ValueOf(txn->GetDedupe("flow", "k")), std::nullopt);
  EXPECT_EQ(ValueOf(txn->GetDedupe("other", "k"))->run_id, RunNo(3));
}

TEST_F(SqliteJobsTest, DeleteExpiredDedupe_OnlyEndedWindows_UpToTheLimit) {
  std::unique_ptr<Transaction> txn = Begin();
  ASSERT_TRUE(txn->PutDedupe({"f", "pending", RunNo(1), std::nullopt}).ok());
  ASSERT_TRUE(txn->PutDedupe({"f", "a", RunNo(2), kT0}).ok());
  ASSERT_TRUE(
      txn->PutDedupe({"f", "b", RunNo(3), kT0 + absl::Seconds(1)}).ok());
  ASSERT_TRUE(
      txn->PutDedupe({"f", "c", RunNo(4), kT0 + absl::Seconds(9)}).ok());

  EXPECT_EQ(ValueOf(txn->DeleteExpiredDedupe(kT0 + absl::Seconds(1), 0)), 0);
  EXPECT_EQ(ValueOf(txn->DeleteExpiredDedupe(kT0 + absl::Seconds(1), 1)), 1);
  EXPECT_EQ(ValueOf(txn->GetDedupe("f", "a")), std::nullopt);  // earliest
  EXPECT_EQ(ValueOf(txn->DeleteExpiredDedupe(kT0 + absl::Seconds(1), 10)), 1);
  EXPECT_TRUE(ValueOf(txn->GetDedupe("f", "pending")).has_value());
  EXPECT_TRUE(ValueOf(txn->GetDedupe("f", "c")).has_value());
}

TEST_F(SqliteJobsTest, Dedupe_OutlivesItsRun) {
  std::unique_ptr<Transaction> txn = Begin();
  RunRecord run = MakeRun(RunNo(1), "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  ASSERT_TRUE(txn->PutDedupe({"flow", "k", RunNo(1), std::nullopt}).ok());
  ASSERT_EQ(ValueOf(txn->DeleteRuns(std::vector<RunId>{RunNo(1)})), 1);

  EXPECT_EQ(ValueOf(txn->GetDedupe("flow", "k"))->run_id, RunNo(1));
}

}  // namespace
}  // namespace sluice
