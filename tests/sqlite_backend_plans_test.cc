// The SQLite backend's query plans: every statement on a hot path, and
// every statement a batch or retention call runs, searches through the
// index it was written for, never scans a table and never sorts.
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "sqlite_sql.h"
#include "sqlite_sql_children.h"
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
  // The one table it may scan whole, on purpose (sqlite_schema_parts.h says
  // why).
  std::string_view deliberate_scan = {};
  // It may sort rows that tie on the index's leading column (lazily, one
  // group of ties at a time), never the whole result.
  bool sorts_ties = false;
  // It sorts its rows: the due delayed or read messages of a claim, which
  // it reads only when a probe found some (sqlite_sql.h kAnyDue), or the
  // stalled tasks among the read messages due by a horizon.
  bool sorts_due = false;
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
    "USING INDEX messages_ready (queue_name=?)";
// The delayed or read messages due, by visible_at.
constexpr std::string_view kDelayedDue =
    "messages_delayed (queue_name=? AND visible_at<?)";
constexpr std::string_view kReadDue =
    "messages_read (queue_name=? AND visible_at<?)";
constexpr std::string_view kReadDueBy =
    "USING INDEX messages_read (queue_name=? AND visible_at<?)";
// A task by its message.
constexpr std::string_view kByMessage =
    "sqlite_autoindex_tasks_2 (queue_name=? AND message_id=?)";
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
      {"GetTasksByMessage", sql::kGetTasksByMessage.all, {kBatch, kByMessage}},
      {"GetTasksByMessageNoPayloads",
       sql::kGetTasksByMessage.no_payloads,
       {kBatch, kByMessage}},
      {"UpdateTask", sql::kUpdateTask, {kTask}},
      {"UnfinishedOfRun", sql::kUnfinishedOfRun.all, {kRowsOfRun}},
      {"UnfinishedOfRunNoPayloads",
       sql::kUnfinishedOfRun.no_payloads,
       {kRowsOfRun}},
      {"UnfinishedOfStep", sql::kUnfinishedOfStep.all, {kStep}},
      {"UnfinishedOfStepNoPayloads",
       sql::kUnfinishedOfStep.no_payloads,
       {kStep}},
      {"ListTasks", sql::kListTasks, {kRowsOfRun}},
      {"GetTaskOutputs", sql::kGetTaskOutputs, {kBatch, kTasksOfStep}},
      {"FindStalledTasks",
       sql::kFindStalledTasks.all,
       {kReadDueBy, kByMessage},
       {},
       false,
       true},
      {"FindStalledTasksNoPayloads",
       sql::kFindStalledTasks.no_payloads,
       {kReadDueBy, kByMessage},
       {},
       false,
       true},
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
      {"ChooseReady", sql::kChooseReady.all, {kClaimOrder}},
      {"ChooseReadyNoPayloads", sql::kChooseReady.no_payloads, {kClaimOrder}},
      {"AnyDue", sql::kAnyDue, {kDelayedDue, kReadDue}},
      {"ChooseDelayed",
       sql::kChooseDelayed.all,
       {kDelayedDue, kMessage},
       {},
       false,
       /*sorts_due=*/true},
      {"ChooseRead",
       sql::kChooseRead.no_payloads,
       {kReadDue, kMessage},
       {},
       false,
       /*sorts_due=*/true},
      {"HideMessages", sql::kHideMessages, {kMessage}},
      {"SetVisibility", sql::kSetVisibility, {kMessage}},
      {"SetVisibilityToTail", sql::kSetVisibilityToTail, {kMessage}},
      {"ReserveSeqs", sql::kReserveSeqs, {"PRIMARY KEY"}},
      {"NextVisibleAt",
       sql::kNextVisibleAt,
       {"messages_delayed (queue_name=? AND visible_at>?)",
        "messages_read (queue_name=? AND visible_at>?)"}},
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
  RunQuery newest_ended = finished_of_flow;  // retention's
  newest_ended.statuses = {RunStatus::kFailed};
  newest_ended.limit = 1;
  RunQuery one_status = all_flows;  // the dashboard's status filter
  one_status.statuses = {RunStatus::kFailed};
  one_status.after = RunQuery::Position{kT0, RunId(1, 2)};
  return {
      {"ListRunsOfOneStatus",
       ListRunsText(one_status, Fields::kAll),
       {"USING INDEX runs_by_status (status=? AND "
        "(started_at,run_id)<(?,?))"}},
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
       {"USING INDEX runs_finished (finished_at"},
       {},
       /*sorts_ties=*/true},
      {"ListRunsFinishedOfFlow",
       ListRunsText(finished_of_flow, Fields::kAll),
       {"USING INDEX runs_finished"},
       {},
       /*sorts_ties=*/true},
      {"ListRunsFinishedOfFlowAndStatus",
       ListRunsText(newest_ended, Fields::kNoPayloads),
       {"USING INDEX runs_finished_by_flow_status (flow_slug=? AND "
        "status=? AND finished_at"},
       {},
       /*sorts_ties=*/true},
  };
}

// Jobs: counts, the attempts ledger, dedupe, the queue registry.
std::vector<PlannedStatement> JobStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"CountTasks",
       sql::kCountTasks,
       {"sqlite_autoindex_tasks_2 (queue_name=?)", kMessage}},
      {"CountTasksInFlight",
       sql::kCountTasksInFlight,
       {"PRIMARY KEY (queue_name=?)",
        "sqlite_autoindex_tasks_2 (queue_name=? AND message_id=?)"}},
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

// Versions: flows, aliases, run counts per flow, dropping a queue.
std::vector<PlannedStatement> VersionStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"UpdateFlow", sql::kUpdateFlow, {"PRIMARY KEY (slug=?)"}},
      {"DeleteFlow", sql::kDeleteFlow, {"PRIMARY KEY (slug=?)"}},
      {"CountRuns", sql::kCountRuns, {"runs_by_flow (flow_slug=?)"}},
      {"GetAlias", sql::kGetAlias, {"PRIMARY KEY (alias=?)"}},
      // As the queue registry: a row per alias, and listing reads them all.
      {"ListAliases", sql::kListAliases, {"SCAN aliases"}, "SCAN aliases"},
      // By the primary key or one of the partial indexes of messages: each
      // is searched by queue_name.
      {"DeleteQueueMessages", sql::kDeleteQueueMessages, {"(queue_name=?)"}},
      {"DeleteQueueArchive",
       sql::kDeleteQueueArchive,
       {"PRIMARY KEY (queue_name=?)"}},
      {"DeleteQueue", sql::kDeleteQueue, {"PRIMARY KEY (name=?)"}},
  };
}

// Fan-out: child links and child reports.
std::vector<PlannedStatement> ChildStatements() {
  namespace sql = sqlite_internal::sql;
  constexpr std::string_view kLinksOfParent =
      "(parent_run_seq=? AND parent_step=? AND parent_task=?";
  constexpr std::string_view kLink =
      "PRIMARY KEY (parent_run_seq=? AND parent_step=? AND parent_task=? AND "
      "child_index=?)";
  // One link by its whole key: through the primary key, or through
  // child_links_by_status, which holds the key too (status is bound).
  constexpr std::string_view kLinkByKey = "AND child_index=?)";
  return {
      {"FindMissingParent", sql::kFindMissingParent, {kBatch, kTask}},
      {"InsertChildLinks", sql::kInsertChildLinks, {kBatch}},
      {"GetChildLinks", sql::kGetChildLinksAll, {kLinksOfParent}},
      {"GetChildLinksNoPayloads",
       sql::kGetChildLinksNoPayloads,
       {kLinksOfParent}},
      {"CountChildLinks",
       sql::kCountChildLinks,
       {"USING COVERING INDEX child_links_by_status", kLinksOfParent}},
      {"SettleChildLink", sql::kSettleChildLink, {kLinksOfParent, kLinkByKey}},
      {"CancelPendingChildLinks",
       sql::kCancelPendingChildLinks,
       {kLinksOfParent}},
      {"FindStaleChildLinks",
       sql::kFindStaleChildLinks,
       {"USING INDEX child_links_pending (pending_since<?)"}},
      {"RearmChildLinks", sql::kRearmChildLinks, {kBatch, kLink}},
      {"FindUncascadedChildLinks",
       sql::kFindUncascadedChildLinks,
       {"USING INDEX child_links_uncascaded"}},
      {"MarkChildLinksCascaded", sql::kMarkChildLinksCascaded, {kBatch, kLink}},
      {"DeleteRunChildLinks",
       sql::kDeleteRunChildLinks,
       {kBatch, "(parent_run_seq=?)"}},
      {"AppendChildReports", sql::kAppendChildReports, {kBatch}},
      {"PeekChildReports",
       sql::kPeekChildReports,
       {"USING INTEGER PRIMARY KEY (rowid>?)"}},
      {"DeleteChildReports",
       sql::kDeleteChildReports,
       {kBatch, "INTEGER PRIMARY KEY"}},
  };
}

std::vector<PlannedStatement> PlannedStatements() {
  std::vector<PlannedStatement> all = RunStatements();
  for (auto* more :
       {StepAndTaskStatements, QueueAndOtherStatements, ListRunsStatements,
        JobStatements, VersionStatements, ChildStatements}) {
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
    if (statement.sorts_due) {
      EXPECT_THAT(joined, HasSubstr("USE TEMP B-TREE FOR ORDER BY"))
          << statement.name;
    } else if (statement.sorts_ties) {
      EXPECT_THAT(joined, Not(HasSubstr("USE TEMP B-TREE FOR ORDER BY")))
          << statement.name;
    } else {
      EXPECT_THAT(joined, Not(HasSubstr("TEMP B-TREE"))) << statement.name;
    }
    for (const std::string& row : plan) {
      if (row.find("SCAN") == std::string::npos) continue;
      if (row.find("VIRTUAL TABLE INDEX") != std::string::npos) continue;
      // Scans of a subquery's few rows or of the one constant row read no
      // table.
      if (row.find("SCAN (subquery-") != std::string::npos ||
          row.find("SCAN CONSTANT ROW") != std::string::npos) {
        continue;
      }
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
    std::vector<ChildLinkRecord> links;
    for (int i = 0; i < 3; ++i) {
      links.push_back({.parent = tasks[0].key,
                       .child_index = i,
                       .child_run_id = RunId::Random(),
                       .pending_since = kT0,
                       .spec = J("{}")});
    }
    ASSERT_TRUE(txn->InsertChildLinks(links).ok());
    // No child report, as no outbox report: both hold only what is not
    // relayed yet, and statistics taken over a handful of rows make SQLite
    // scan them (docs/decisions/0036-fan-out-storage.md).
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase raw(path());
  raw.Exec("ANALYZE");
  ExpectIndexedPlans(raw);
}

// The virtual machine steps one claim of `limit` messages takes on a queue
// of `queued` visible messages (and as many delayed ones of a lower
// priority), run on a plain connection and rolled back.
int64_t ClaimSteps(const std::string& path, int queued, int limit) {
  {
    std::unique_ptr<SqliteBackend> backend =
        std::move(*SqliteBackend::Open(path));
    std::unique_ptr<Transaction> txn = std::move(*backend->Begin());
    EXPECT_TRUE(txn->CreateQueue(MakeQueue("q")).ok());
    std::vector<OutgoingMessage> messages;
    for (int i = 0; i < queued; ++i) {
      messages.push_back({J("{}"), kT0, /*priority=*/1 + i % 3});
      messages.push_back({J("{}"), kT0 + absl::Hours(1), /*priority=*/0});
    }
    EXPECT_TRUE(txn->SendMessages("q", messages, kT0).ok());
    EXPECT_TRUE(txn->Commit().ok());
  }
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), SQLITE_OK);
  const std::string_view sql = sqlite_internal::sql::kChooseReady.all;
  sqlite3_stmt* read = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()),
                               &read, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_bind_text(read, 1, "q", -1, SQLITE_STATIC);
  sqlite3_bind_int64(read, 2, absl::ToUnixMicros(kT0));
  sqlite3_bind_int(read, 3, limit);
  int rows = 0;
  while (sqlite3_step(read) == SQLITE_ROW) ++rows;
  EXPECT_EQ(rows, limit);
  const int64_t steps =
      sqlite3_stmt_status(read, SQLITE_STMTSTATUS_VM_STEP, /*reset=*/0);
  EXPECT_EQ(sqlite3_stmt_status(read, SQLITE_STMTSTATUS_SORT, 0), 0);
  sqlite3_finalize(read);
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return steps;
}

// A claim reads the claim index from its start: what it costs depends on
// `limit`, not on how many messages wait behind them.
TEST_F(SqliteBackendTest, ReadMessages_CostDoesNotGrowWithTheQueue) {
  const int64_t small = ClaimSteps(path(), 20, 10);
  const int64_t large = ClaimSteps(path() + ".large", 5'000, 10);

  EXPECT_GT(small, 0);
  EXPECT_EQ(large, small);
}

// The virtual machine steps one in-flight count takes on a queue of 10
// queued tasks and `ended` completed ones, whose messages are archived.
int64_t InFlightCountSteps(const std::string& path, int ended) {
  constexpr int kQueued = 10;
  {
    std::unique_ptr<SqliteBackend> backend =
        std::move(*SqliteBackend::Open(path));
    std::unique_ptr<Transaction> txn = std::move(*backend->Begin());
    EXPECT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    const RunId run_id = RunId::Random();
    RunRecord run = MakeRun(run_id, "flow", kT0);
    EXPECT_TRUE(txn->InsertRuns({&run, 1}).ok());
    StepStateRecord step = MakeStep(run_id, 0);
    EXPECT_TRUE(txn->InsertStepStates({&step, 1}).ok());
    std::vector<OutgoingMessage> messages(kQueued + ended, {J("{}"), kT0});
    const std::vector<int64_t> ids =
        sqlite_testing::ValueOf(txn->SendMessages("flow", messages, kT0));
    std::vector<TaskRecord> tasks;
    for (size_t i = 0; i < ids.size(); ++i) {
      tasks.push_back(MakeTask(run_id, static_cast<int>(i), ids[i]));
      if (i < kQueued) continue;
      tasks.back().status = TaskStatus::kCompleted;
      tasks.back().finished_at = kT0;
    }
    EXPECT_TRUE(txn->InsertTasks(tasks).ok());
    EXPECT_TRUE(
        txn->ArchiveMessages("flow", std::span(ids).subspan(kQueued), kT0)
            .ok());
    EXPECT_TRUE(txn->Commit().ok());
  }
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string_view sql = sqlite_internal::sql::kCountTasksInFlight;
  sqlite3_stmt* count = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()),
                               &count, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_bind_text(count, 1, "flow", -1, SQLITE_STATIC);
  sqlite3_bind_int64(count, 2, absl::ToUnixMicros(kT0));
  EXPECT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(count, 0), kQueued);
  const int64_t steps =
      sqlite3_stmt_status(count, SQLITE_STMTSTATUS_VM_STEP, /*reset=*/0);
  sqlite3_finalize(count);
  sqlite3_close(db);
  return steps;
}

// The metrics' count reads the live messages: ended tasks, however many the
// store keeps, cost it nothing.
TEST_F(SqliteBackendTest, CountTasksInFlight_CostDoesNotGrowWithEndedTasks) {
  const int64_t few = InFlightCountSteps(path(), 10);
  const int64_t many = InFlightCountSteps(path() + ".many", 2'000);

  EXPECT_GT(few, 0);
  EXPECT_EQ(many, few);
}

}  // namespace
}  // namespace sluice
