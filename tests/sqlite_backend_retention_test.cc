// Retention on the SQLite backend: FindFinishedRuns reads the runs_finished
// index, and DeleteRuns removes everything of a run (its step states, tasks,
// their live and archived messages, its outbox reports) and nothing else.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
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
using ::sluice::sqlite_testing::MakeStep;
using ::sluice::sqlite_testing::MakeTask;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::sluice::sqlite_testing::ValueOf;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

absl::Time At(int seconds) { return kT0 + absl::Seconds(seconds); }

RunRecord Ended(RunId run_id, RunStatus status, absl::Time finished_at) {
  RunRecord run = MakeRun(run_id, "flow", kT0);
  run.status = status;
  run.output = J("[1]");
  run.finished_at = finished_at;
  return run;
}

std::vector<RunId> IdsOf(const std::vector<RunRecord>& runs) {
  std::vector<RunId> ids;
  for (const RunRecord& run : runs) ids.push_back(run.run_id);
  return ids;
}

TEST_F(SqliteBackendTest, FindFinishedRuns_EndedBeforeTheCutoff_EarliestFirst) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId a(1, 1), b(1, 2), c(1, 3), d(1, 4), e(1, 5), f(1, 6);
  std::vector<RunRecord> runs = {
      Ended(a, RunStatus::kCompleted, At(5)),
      Ended(b, RunStatus::kFailed, At(3)),
      Ended(c, RunStatus::kCancelled, At(5)),   // ties a: inserted after it
      Ended(d, RunStatus::kCompleted, At(10)),  // not before the cutoff
      MakeRun(e, "flow", kT0),                  // still running
      Ended(f, RunStatus::kCompleted, At(1)),
  };
  runs[4].finished_at = At(0);  // a started run never counts, even so
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->InsertRuns(runs).ok());

  std::vector<RunRecord> found = ValueOf(txn->FindFinishedRuns(At(10), 10));
  std::vector<RunRecord> first_two = ValueOf(txn->FindFinishedRuns(At(10), 2));

  EXPECT_THAT(IdsOf(found), ElementsAre(f, b, a, c));
  EXPECT_THAT(IdsOf(first_two), ElementsAre(f, b));
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found[0].status, RunStatus::kCompleted);
  EXPECT_EQ(found[0].finished_at, At(1));
  EXPECT_TRUE(found[0].input.is_null());  // payloads are not filled
  EXPECT_EQ(found[0].output, std::nullopt);
  EXPECT_THAT(ValueOf(txn->FindFinishedRuns(At(10), 0)), IsEmpty());
}

TEST_F(SqliteBackendTest, FindFinishedRuns_FollowsUpdatedRuns) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id(1, 1);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  RunRecord run = MakeRun(run_id, "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  ASSERT_THAT(ValueOf(txn->FindFinishedRuns(At(10), 10)), IsEmpty());

  run = Ended(run_id, RunStatus::kFailed, At(2));
  ASSERT_TRUE(txn->UpdateRuns({&run, 1}).ok());

  EXPECT_THAT(IdsOf(ValueOf(txn->FindFinishedRuns(At(10), 10))),
              ElementsAre(run_id));
}

// Two runs with one step, one task and one message each; run 1's message is
// archived, and each has an outbox report.
class DeleteRunsTest : public SqliteBackendTest {
 protected:
  const RunId kFirst = RunId(1, 1);
  const RunId kSecond = RunId(1, 2);

  void SetUp() override {
    SqliteBackendTest::SetUp();
    backend_ = Open();
    std::unique_ptr<Transaction> txn = Begin(*backend_);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    std::vector<RunRecord> runs = {Ended(kFirst, RunStatus::kCompleted, kT0),
                                   Ended(kSecond, RunStatus::kCompleted, kT0)};
    ASSERT_TRUE(txn->InsertRuns(runs).ok());
    std::vector<StepStateRecord> steps = {MakeStep(kFirst, 0),
                                          MakeStep(kSecond, 0)};
    ASSERT_TRUE(txn->InsertStepStates(steps).ok());
    std::vector<OutgoingMessage> messages(2, OutgoingMessage{J("{}"), kT0});
    ASSERT_THAT(ValueOf(txn->SendMessages("flow", messages, kT0)),
                ElementsAre(1, 2));
    std::vector<TaskRecord> tasks = {MakeTask(kFirst, 0, 1),
                                     MakeTask(kSecond, 0, 2)};
    ASSERT_TRUE(txn->InsertTasks(tasks).ok());
    const int64_t archived = 1;
    ASSERT_TRUE(txn->ArchiveMessages("flow", {&archived, 1}, At(1)).ok());
    std::vector<OutboxReport> reports = {
        {0, tasks[0].key, "flow", ReportKind::kCompleted, kT0},
        {0, tasks[1].key, "flow", ReportKind::kCompleted, kT0}};
    ASSERT_TRUE(txn->AppendReports(reports).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }

  // Rows per table: runs, step_states, tasks, messages, archived_messages,
  // outbox.
  std::string Counts() {
    RawDatabase raw(path());
    std::string counts;
    for (const char* table : {"runs", "step_states", "tasks", "messages",
                              "archived_messages", "outbox"}) {
      StrAppend(&counts, counts.empty() ? "" : " ",
                raw.Value(StrCat("SELECT count(*) FROM ", table)));
    }
    return counts;
  }

  std::unique_ptr<SqliteBackend> backend_;
};

TEST_F(DeleteRunsTest, RemovesEveryRowOfTheRunsAndNothingElse) {
  std::unique_ptr<Transaction> txn = Begin(*backend_);
  const std::vector<RunId> ids = {RunId(9, 9), kFirst, kFirst};

  EXPECT_EQ(ValueOf(txn->DeleteRuns(ids)), 1);
  ASSERT_TRUE(txn->Commit().ok());

  EXPECT_EQ(Counts(), "1 1 1 1 0 1");
  txn = Begin(*backend_);
  EXPECT_EQ(GetRun(*txn, kFirst), std::nullopt);
  EXPECT_TRUE(GetRun(*txn, kSecond).has_value());
  EXPECT_EQ(ValueOf(txn->LookupMessage("flow", 1)), std::nullopt);
  EXPECT_TRUE(ValueOf(txn->LookupMessage("flow", 2)).has_value());
  EXPECT_THAT(ValueOf(txn->ListTasks(kSecond)), ::testing::SizeIs(1));
}

TEST_F(DeleteRunsTest, BothRuns_LeaveTheQueueAndItsIds) {
  std::unique_ptr<Transaction> txn = Begin(*backend_);

  EXPECT_EQ(ValueOf(txn->DeleteRuns(std::vector<RunId>{kSecond, kFirst})), 2);
  OutgoingMessage message{J("{}"), kT0};

  EXPECT_THAT(ValueOf(txn->SendMessages("flow", {&message, 1}, kT0)),
              ElementsAre(3));
  ASSERT_TRUE(txn->Commit().ok());
  EXPECT_EQ(Counts(), "0 0 0 1 0 0");
}

// The transaction remembers run seqs; a deleted run must be forgotten, or
// the run inserted again under its id would find the old run's rows.
TEST_F(DeleteRunsTest, ThenInsertTheSameIdInOneTransaction_StartsAfresh) {
  std::unique_ptr<Transaction> txn = Begin(*backend_);
  ASSERT_EQ(ValueOf(txn->GetStepStates({&kFirst, 1}, Fields::kAll))[0].size(),
            1u);
  ASSERT_EQ(ValueOf(txn->DeleteRuns({&kFirst, 1})), 1);
  RunRecord again = MakeRun(kFirst, "flow", kT0);

  ASSERT_TRUE(txn->InsertRuns({&again, 1}).ok());

  EXPECT_THAT(ValueOf(txn->GetStepStates({&kFirst, 1}, Fields::kAll))[0],
              IsEmpty());
  EXPECT_THAT(ValueOf(txn->ListTasks(kFirst)), IsEmpty());
  StepStateRecord step = MakeStep(kFirst, 0);
  EXPECT_TRUE(txn->InsertStepStates({&step, 1}).ok());
  EXPECT_EQ(ValueOf(txn->GetStepStates({&kSecond, 1}, Fields::kAll))[0].size(),
            1u);
}

TEST_F(DeleteRunsTest, NoneExist_DeletesNothing) {
  std::unique_ptr<Transaction> txn = Begin(*backend_);
  const RunId missing(9, 9);

  EXPECT_EQ(ValueOf(txn->DeleteRuns({&missing, 1})), 0);
  EXPECT_EQ(ValueOf(txn->DeleteRuns({})), 0);
  ASSERT_TRUE(txn->Commit().ok());
  EXPECT_EQ(Counts(), "2 2 2 1 1 2");
}

TEST_F(DeleteRunsTest, LookupMessage_Archived_HasArchivedAt) {
  std::unique_ptr<Transaction> txn = Begin(*backend_);

  std::optional<MessageLocation> archived =
      ValueOf(txn->LookupMessage("flow", 1));
  std::optional<MessageLocation> live = ValueOf(txn->LookupMessage("flow", 2));

  ASSERT_TRUE(archived.has_value() && live.has_value());
  EXPECT_TRUE(archived->archived);
  EXPECT_EQ(archived->archived_at, At(1));
  EXPECT_FALSE(live->archived);
  EXPECT_EQ(live->archived_at, std::nullopt);
}

}  // namespace
}  // namespace sluice
