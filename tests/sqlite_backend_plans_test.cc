// The SQLite backend's query plans: every statement on a hot path, and
// every statement a batch or retention call runs, searches through the
// index it was written for, never scans a table and never sorts.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "sqlite_sql.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::J;
using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeQueue;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::MakeStep;
using ::sluice::sqlite_testing::MakeTask;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::testing::HasSubstr;
using ::testing::Not;

struct PlannedStatement {
  std::string_view name;
  std::string_view sql;
  std::vector<std::string_view> plan;  // what the plan must name, each
  // The one table it may scan whole, on purpose (sqlite_schema.cc says why).
  std::string_view deliberate_scan = {};
};

// How the plan names each kind of search.
constexpr std::string_view kRunById =
    "USING COVERING INDEX sqlite_autoindex_runs_1 (run_id=?)";
constexpr std::string_view kRunBySeq = "USING INTEGER PRIMARY KEY (rowid=?)";
constexpr std::string_view kStep =
    "USING PRIMARY KEY (run_seq=? AND step_index=?)";
constexpr std::string_view kRowsOfRun = "USING PRIMARY KEY (run_seq=?)";
constexpr std::string_view kTask =
    "USING PRIMARY KEY (run_seq=? AND step_index=? AND task_index=?)";
constexpr std::string_view kTasksOfStep =
    "USING PRIMARY KEY (run_seq=? AND step_index=?)";
constexpr std::string_view kMessage =
    "USING PRIMARY KEY (queue_name=? AND message_id=?)";
// The claim order itself: no sort.
constexpr std::string_view kClaimOrder =
    "USING INDEX messages_claim (queue_name=?)";
// A walk of the rows bound to sluice_rows(?n), in their order; a search of
// them by c0, or by c0 and c1.
constexpr std::string_view kBatch = "VIRTUAL TABLE INDEX 1:";
constexpr std::string_view kBatchByC0 = "VIRTUAL TABLE INDEX 2:";
constexpr std::string_view kBatchByC0C1 = "VIRTUAL TABLE INDEX 3:";

std::vector<PlannedStatement> RunStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"FindRunSeqs", sql::kFindRunSeqs, {kBatch, kRunById}},
      // The rowid b-tree's last entry: no index at all.
      {"MaxRunSeq", sql::kMaxRunSeq, {"|SEARCH runs\n"}},
      {"InsertRuns", sql::kInsertRuns, {kBatch}},
      {"GetRuns",
       sql::kGetRuns.all,
       {kBatch, "USING INDEX sqlite_autoindex_runs_1 (run_id=?)"}},
      {"GetRunsNoPayloads",
       sql::kGetRuns.no_payloads,
       {kBatch, "USING INDEX sqlite_autoindex_runs_1 (run_id=?)"}},
      {"UpdateRuns", sql::kUpdateRuns, {kBatch, kRunBySeq, kBatchByC0}},
      {"AddRunRemainingSteps",
       sql::kAddRunRemainingSteps,
       {kBatch, kRunBySeq, kBatchByC0}},
      {"GetRunRemainingSteps", sql::kGetRunRemainingSteps, {kBatch, kRunBySeq}},
      {"FindRunsByKey",
       sql::kFindRunsByKey.all,
       {kBatch, "runs_by_key (flow_slug=? AND external_key=?)"}},
      {"FindRunsByKeyNoPayloads",
       sql::kFindRunsByKey.no_payloads,
       {kBatch, "runs_by_key (flow_slug=? AND external_key=?)"}},
      {"FindFinishedRuns",
       sql::kFindFinishedRuns,
       {"USING INDEX runs_finished (finished_at>? AND finished_at<?)"}},
      {"DeleteRunMessages",
       sql::kDeleteRunMessages,
       {kBatch, kRowsOfRun, kMessage}},
      {"DeleteRunArchivedMessages",
       sql::kDeleteRunArchivedMessages,
       {kBatch, kRowsOfRun, kMessage}},
      {"DeleteRunReports", sql::kDeleteRunReports, {kBatch}, "SCAN outbox"},
      {"DeleteRunAttempts", sql::kDeleteRunAttempts, {kBatch, kRowsOfRun}},
      {"DeleteRunTasks", sql::kDeleteRunTasks, {kBatch, kRowsOfRun}},
      {"DeleteRunStepStates", sql::kDeleteRunStepStates, {kBatch, kRowsOfRun}},
      {"DeleteRuns", sql::kDeleteRuns, {kBatch, kRunBySeq}},
  };
}

std::vector<PlannedStatement> StepAndTaskStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"InsertStepStates", sql::kInsertStepStates, {kBatch}},
      {"GetStepStates", sql::kGetStepStates.all, {kBatch, kRowsOfRun}},
      {"GetStepStatesNoPayloads",
       sql::kGetStepStates.no_payloads,
       {kBatch, kRowsOfRun}},
      {"UpdateStepState", sql::kUpdateStepState, {kStep}},
      {"AddStepCounters", sql::kAddStepCounters, {kBatch, kStep, kBatchByC0C1}},
      {"GetStepCounters", sql::kGetStepCounters, {kBatch, kStep}},
      {"InsertTasks", sql::kInsertTasks, {kBatch}},
      {"GetTasks", sql::kGetTasks.all, {kBatch, kTask}},
      {"GetTasksNoPayloads", sql::kGetTasks.no_payloads, {kBatch, kTask}},
      {"GetTasksByMessage",
       sql::kGetTasksByMessage.all,
       {kBatch, "sqlite_autoindex_tasks_2 (queue_name=? AND message_id=?)"}},
      {"GetTasksByMessageNoPayloads",
       sql::kGetTasksByMessage.no_payloads,
       {kBatch, "sqlite_autoindex_tasks_2 (queue_name=? AND message_id=?)"}},
      {"UpdateTask", sql::kUpdateTask, {kTask}},
      {"UnfinishedOfRun", sql::kUnfinishedOfRun.all, {"tasks_unfinished"}},
      {"UnfinishedOfRunNoPayloads",
       sql::kUnfinishedOfRun.no_payloads,
       {"tasks_unfinished"}},
      {"UnfinishedOfStep", sql::kUnfinishedOfStep.all, {"tasks_unfinished"}},
      {"UnfinishedOfStepNoPayloads",
       sql::kUnfinishedOfStep.no_payloads,
       {"tasks_unfinished"}},
      {"ListTasks", sql::kListTasks, {kRowsOfRun}},
      {"GetTaskOutputs", sql::kGetTaskOutputs, {kBatch, kTasksOfStep}},
      {"FindStalledTasks", sql::kFindStalledTasks.all, {"tasks_stalled"}},
      {"FindStalledTasksNoPayloads",
       sql::kFindStalledTasks.no_payloads,
       {"tasks_stalled"}},
  };
}

std::vector<PlannedStatement> QueueAndOtherStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"AppendReports", sql::kAppendReports, {kBatch}},
      {"TakeReports", sql::kTakeReports, {kBatch, "INTEGER PRIMARY KEY"}},
      {"TakeStaleReports", sql::kTakeStaleReports, {"outbox_by_created"}},
      {"ReserveMessageIds", sql::kReserveMessageIds, {"PRIMARY KEY"}},
      {"InsertMessages", sql::kInsertMessages, {kBatch}},
      {"ReadMessages", sql::kReadMessages.all, {kClaimOrder, kMessage}},
      {"ReadMessagesNoPayloads",
       sql::kReadMessages.no_payloads,
       {kClaimOrder, kMessage}},
      {"SetVisibility", sql::kSetVisibility, {kMessage}},
      {"SetVisibilityToTail", sql::kSetVisibilityToTail, {kMessage}},
      {"ReserveSeqs", sql::kReserveSeqs, {"PRIMARY KEY"}},
      {"NextVisibleAt",
       sql::kNextVisibleAt,
       {"USING COVERING INDEX messages_visible (queue_name=? AND "
        "visible_at>?)"}},
      {"CopyToArchive", sql::kCopyToArchive, {kBatch, "PRIMARY KEY"}},
      {"DeleteMessages", sql::kDeleteMessages, {kBatch, "PRIMARY KEY"}},
      {"LookupLive", sql::kLookupLive, {kMessage}},
      {"LookupArchived", sql::kLookupArchived, {kMessage}},
      {"GetQueue", sql::kGetQueue, {"PRIMARY KEY"}},
      {"GetFlow", sql::kGetFlow, {"PRIMARY KEY"}},
  };
}

// ListRuns' statement for each kind of query, kept for the string_views.
std::string_view ListRunsText(const RunQuery& query, Fields fields) {
  static auto* texts = new std::vector<std::unique_ptr<std::string>>();
  texts->push_back(std::make_unique<std::string>(
      sqlite_internal::sql::ListRunsSql(query, fields)));
  return *texts->back();
}

std::vector<PlannedStatement> ListRunsStatements() {
  RunQuery all_flows = RunQuery::OfFlow("", 10);
  RunQuery one_flow = RunQuery::OfFlow("greet", 10);
  RunQuery one_flow_after = one_flow;
  one_flow_after.after = RunQuery::Position{kT0, RunId(1, 2)};
  RunQuery everything = all_flows;  // every filter, oldest first
  everything.flow_slugs = {"a", "b"};
  everything.statuses = {RunStatus::kCompleted, RunStatus::kFailed};
  everything.from = kT0;
  everything.to = kT0 + absl::Hours(1);
  everything.after = RunQuery::Position{kT0, RunId(1, 2)};
  everything.newest_first = false;
  RunQuery finished = everything;
  finished.order_by = RunQuery::OrderBy::kFinishedAt;
  RunQuery finished_of_flow = RunQuery::OfFlow("greet", 10);
  finished_of_flow.order_by = RunQuery::OrderBy::kFinishedAt;
  return {
      {"ListRunsAll",
       ListRunsText(all_flows, Fields::kAll),
       {"USING INDEX runs_by_start"}},
      {"ListRunsOfFlow",
       ListRunsText(one_flow, Fields::kNoPayloads),
       {"USING INDEX runs_by_flow (flow_slug=?)"}},
      {"ListRunsOfFlowAfter",
       ListRunsText(one_flow_after, Fields::kAll),
       {"USING INDEX runs_by_flow (flow_slug=? AND "
        "(started_at,run_id)<(?,?))"}},
      {"ListRunsEveryFilter",
       ListRunsText(everything, Fields::kAll),
       {"USING INDEX runs_by_start ("}},
      {"ListRunsFinished",
       ListRunsText(finished, Fields::kAll),
       {"USING INDEX runs_finished ("}},
      {"ListRunsFinishedOfFlow",
       ListRunsText(finished_of_flow, Fields::kAll),
       {"USING INDEX runs_finished"}},
  };
}

// Jobs: counts, the attempts ledger, dedupe, the queue registry.
std::vector<PlannedStatement> JobStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"CountTasks",
       sql::kCountTasks,
       {"sqlite_autoindex_tasks_2 (queue_name=?)", kMessage}},
      {"AppendAttempts", sql::kAppendAttempts, {kBatch}},
      {"ListAttempts", sql::kListAttempts, {kRowsOfRun}},
      {"GetDedupe", sql::kGetDedupe, {"PRIMARY KEY (flow_slug=? AND key=?)"}},
      {"DeleteDedupe",
       sql::kDeleteDedupe,
       {"PRIMARY KEY (flow_slug=? AND key=?)"}},
      {"DeleteExpiredDedupe",
       sql::kDeleteExpiredDedupe,
       {"dedupe_expiring (expires_at>? AND expires_at<?)", "PRIMARY KEY"}},
      // The registry holds a row per queue, and listing reads them all.
      {"ListQueues", sql::kListQueues, {"SCAN queues"}, "SCAN queues"},
      {"SetQueuePaused", sql::kSetQueuePaused, {"PRIMARY KEY (name=?)"}},
  };
}

std::vector<PlannedStatement> PlannedStatements() {
  std::vector<PlannedStatement> all = RunStatements();
  for (auto* more : {StepAndTaskStatements, QueueAndOtherStatements,
                     ListRunsStatements, JobStatements}) {
    for (PlannedStatement& statement : more()) all.push_back(statement);
  }
  return all;
}

// Each plan must name what its statement was written for, and never sort
// in a temporary b-tree. Each line must search through an index or walk or
// search a bound batch: a bare SCAN of a table reads all of it.
void ExpectIndexedPlans(RawDatabase& raw) {
  for (const PlannedStatement& statement : PlannedStatements()) {
    std::vector<std::string> plan =
        raw.Rows(StrCat("EXPLAIN QUERY PLAN ", statement.sql));
    std::string joined;
    for (const std::string& row : plan) StrAppend(&joined, row, "\n");
    ASSERT_FALSE(plan.empty()) << statement.name;
    for (std::string_view expected : statement.plan) {
      EXPECT_THAT(joined, HasSubstr(expected)) << statement.name;
    }
    EXPECT_THAT(joined, Not(HasSubstr("TEMP B-TREE"))) << statement.name;
    for (const std::string& row : plan) {
      if (row.find("SCAN") == std::string::npos) continue;
      if (row.find("VIRTUAL TABLE INDEX") != std::string::npos) continue;
      if (!statement.deliberate_scan.empty() &&
          row.find(statement.deliberate_scan) != std::string::npos) {
        continue;
      }
      EXPECT_THAT(row, HasSubstr("USING")) << statement.name << "\n" << joined;
    }
  }
}

TEST_F(SqliteBackendTest, PlannedStatements_UseTheirIndexes) {
  ASSERT_NE(Open(), nullptr);
  RawDatabase raw(path());
  ExpectIndexedPlans(raw);
}

// After ANALYZE over a few rows, statistics could tempt the planner into
// table scans (the trap DESIGN.md describes for Postgres); they must not.
TEST_F(SqliteBackendTest, PlannedStatements_UseTheirIndexes_AfterAnalyze) {
  std::unique_ptr<SqliteBackend> backend = Open();
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    const RunId run_id = RunId::Random();
    RunRecord run = MakeRun(run_id, "flow", kT0);
    run.external_key = "key";
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    StepStateRecord step = MakeStep(run_id, 0);
    ASSERT_TRUE(txn->InsertStepStates({&step, 1}).ok());
    std::vector<TaskRecord> tasks;
    std::vector<OutgoingMessage> messages;
    for (int i = 0; i < 3; ++i) {
      tasks.push_back(MakeTask(run_id, i, i + 1));
      messages.push_back({J("{}"), kT0});
    }
    ASSERT_TRUE(txn->InsertTasks(tasks).ok());
    ASSERT_TRUE(txn->SendMessages("flow", messages, kT0).ok());
    AttemptRecord attempt;
    attempt.task = tasks[0].key;
    attempt.finished_at = kT0;
    ASSERT_TRUE(txn->AppendAttempts({&attempt, 1}).ok());
    ASSERT_TRUE(txn->PutDedupe({"flow", "key", run_id, kT0}).ok());
    ASSERT_TRUE(txn->PutDedupe({"flow", "held", run_id, std::nullopt}).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase raw(path());
  raw.Exec("ANALYZE");
  ExpectIndexedPlans(raw);
}

}  // namespace
}  // namespace sluice
