// Upgrading a SQLite file of schema version 1, 2 or 3 (written by earlier
// builds) to this build's version on open: every record kept and readable,
// the new columns at their defaults (each flow its own active alias), the
// layout exactly a new file's, and a failed upgrade changing nothing.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "support/sqlite_schema_v1.h"
#include "support/sqlite_schema_v2.h"
#include "support/sqlite_schema_v3.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::GetRun;
using ::sluice::sqlite_testing::J;
using ::sluice::sqlite_testing::kSchemaV1;
using ::sluice::sqlite_testing::kSchemaV2;
using ::sluice::sqlite_testing::kSchemaV3;
using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::sluice::sqlite_testing::ValueOf;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const RunId kRun1(0x0190000000007000ULL, 1);
const RunId kRun2(0x0190000000007000ULL, 2);

// kT0 plus `seconds`, as stored (microseconds since the epoch).
std::string Stored(int seconds) {
  return StrCat(absl::ToUnixMicros(kT0 + absl::Seconds(seconds)));
}

// A version 1 file as a version 1 build left it: a started run with a
// completed task and two queued ones (one delayed), an ended run, a live and
// an archived message, an unapplied report and a worker.
void WriteVersion1File(const std::string& path) {
  RawDatabase raw(path);
  raw.Exec(kSchemaV1);
  const std::string r1 = StrCat("'", kRun1.ToString(), "'");
  const std::string r2 = StrCat("'", kRun2.ToString(), "'");
  raw.Exec(StrCat(
      "INSERT INTO flows VALUES ('greet', '{}', ", Stored(0), ");",
      "INSERT INTO queues VALUES ('greet', 'greet', ", Stored(0), ", 3);",
      "INSERT INTO archived_messages VALUES ('greet', 1, 1, ", Stored(0), ", ",
      Stored(30), ", ", Stored(2), ", '{\"m\":1}');",
      "INSERT INTO messages VALUES ('greet', 2, 1, ", Stored(0), ", ",
      Stored(1), ", '{\"m\":2}'), ('greet', 3, 0, ", Stored(0), ", ",
      Stored(600), ", '{\"m\":3}');", "INSERT INTO runs VALUES (1, ", r1,
      ", 'greet', 'started', 1, '', ", Stored(0),
      ", NULL, '{\"n\":1}', NULL), (2, ", r2, ", 'greet', 'completed', 0, '', ",
      Stored(0), ", ", Stored(5), ", '{\"n\":2}', '{\"done\":true}');",
      "INSERT INTO step_states VALUES (1, ", r1,
      ", 0, 'step0', 'started', 0, 3, 2, '', '', ", Stored(0), ", NULL, NULL);",
      "INSERT INTO tasks VALUES (1, ", r1,
      ", 0, 0, 'greet', 'completed', 1, '', 'greet', 1, ", Stored(0), ", ",
      Stored(1), ", ", Stored(2), ", NULL, 0, 'w1', '[1]', '\"out\"'), (1, ",
      r1, ", 0, 1, 'greet', 'queued', 1, 'boom', 'greet', 2, ", Stored(0),
      ", NULL, NULL, NULL, 0, 'w1', '[2]', NULL), (1, ", r1,
      ", 0, 2, 'greet', 'queued', 0, '', 'greet', 3, ", Stored(0),
      ", NULL, NULL, NULL, 0, '', '[3]', NULL);",
      "INSERT INTO outbox (run_id, step_index, task_index, flow_slug, kind, "
      "created_at) VALUES (",
      r1, ", 0, 0, 'greet', 'completed', ", Stored(2), ");",
      "INSERT INTO workers VALUES ('w1', 'greet', 'greet', ", Stored(0), ", ",
      Stored(2), ", NULL);", "PRAGMA user_version = 1;"));
}

// Everything about a file's layout that reads and plans depend on: each
// table's columns (type, NOT NULL, default, key) and kind, each index's
// definition and columns.
std::vector<std::string> Layout(const std::string& path) {
  RawDatabase raw(path);
  std::vector<std::string> layout = raw.Rows(
      "SELECT name, type, ncol, wr, strict FROM pragma_table_list "
      "WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  for (const char* sql :
       {"SELECT m.name, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, "
        "p.pk FROM sqlite_schema AS m, pragma_table_info(m.name) AS p "
        "WHERE m.type = 'table' ORDER BY m.name, p.cid",
        "SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'index' "
        "ORDER BY name",
        "SELECT m.name, x.seqno, x.cid, x.name, x.desc, x.key "
        "FROM sqlite_schema AS m, pragma_index_xinfo(m.name) AS x "
        "WHERE m.type = 'index' ORDER BY m.name, x.seqno"}) {
    for (std::string& row : raw.Rows(sql)) layout.push_back(std::move(row));
  }
  return layout;
}

TEST_F(SqliteBackendTest, Open_Version1File_UpgradesToTheNewLayout) {
  WriteVersion1File(path());

  ASSERT_NE(Open(), nullptr);
  const std::string fresh = path() + ".fresh";
  ASSERT_TRUE(SqliteBackend::Open(fresh).ok());

  EXPECT_EQ(RawDatabase(path()).Value("PRAGMA user_version"),
            StrCat(SqliteBackend::kSchemaVersion));
  const std::vector<std::string> upgraded = Layout(path());
  EXPECT_GT(upgraded.size(), 100u);
  EXPECT_EQ(upgraded, Layout(fresh));
  EXPECT_THAT(RawDatabase(path()).Rows("PRAGMA integrity_check"),
              ElementsAre("ok"));
}

TEST_F(SqliteBackendTest, Open_Version1File_KeepsEveryRecord) {
  WriteVersion1File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  std::unique_ptr<Transaction> txn = Begin(*backend);

  std::optional<RunRecord> run = GetRun(*txn, kRun1);
  ASSERT_TRUE(run.has_value());
  EXPECT_TRUE(run->unreadable.empty()) << run->unreadable;
  EXPECT_EQ(run->flow_slug, "greet");
  EXPECT_EQ(run->status, RunStatus::kStarted);
  EXPECT_EQ(run->input, J(R"({"n":1})"));
  EXPECT_EQ(run->priority, 0);
  EXPECT_EQ(run->external_key, "");
  EXPECT_TRUE(run->metadata.is_null());
  EXPECT_TRUE(run->options.is_null());
  EXPECT_FALSE(run->cancel_requested);
  std::optional<RunRecord> ended = GetRun(*txn, kRun2);
  EXPECT_EQ(ended->output, J(R"({"done":true})"));
  EXPECT_EQ(ended->finished_at, kT0 + absl::Seconds(5));

  std::vector<TaskRecord> tasks = ValueOf(txn->ListTasks(kRun1));
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].output, J(R"("out")"));
  EXPECT_EQ(tasks[0].worker_id, "w1");
  EXPECT_EQ(tasks[1].error, "boom");
  EXPECT_EQ(tasks[1].attempts, 1);
  EXPECT_EQ(tasks[1].budget_start, 0);
  EXPECT_FALSE(tasks[1].cancel_requested);
  EXPECT_TRUE(tasks[1].options.is_null());
  std::vector<std::vector<StepStateRecord>> steps =
      ValueOf(txn->GetStepStates(std::vector<RunId>{kRun1}, Fields::kAll));
  ASSERT_EQ(steps[0].size(), 1u);
  EXPECT_EQ(steps[0][0].remaining_tasks, 2);

  std::optional<MessageLocation> archived =
      ValueOf(txn->LookupMessage("greet", 1));
  ASSERT_TRUE(archived.has_value());
  EXPECT_TRUE(archived->archived);
  EXPECT_EQ(archived->archived_at, kT0 + absl::Seconds(2));
  EXPECT_EQ(archived->message.body, J(R"({"m":1})"));
  EXPECT_EQ(ValueOf(txn->CountReports()), 1);
  EXPECT_EQ(ValueOf(txn->ListWorkers()).size(), 1u);
  EXPECT_FALSE(ValueOf(txn->GetQueue("greet"))->paused);
  EXPECT_THAT(ValueOf(txn->ListAttempts(kRun1)), IsEmpty());
  // Through version 2 to 3: the flow is its own alias, active.
  std::optional<FlowRecord> flow = ValueOf(txn->GetFlow("greet"));
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->alias, "greet");
  EXPECT_EQ(flow->generation, 1);
  std::optional<AliasRecord> alias = ValueOf(txn->GetAlias("greet"));
  ASSERT_TRUE(alias.has_value());
  EXPECT_EQ(alias->active_slug, "greet");

  QueueCounts counts = ValueOf(
      txn->CountTasks("greet", kT0 + absl::Seconds(1), TaskCounts::kAll));
  EXPECT_EQ(counts.waiting, 1);
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.completed, 1);
}

TEST_F(SqliteBackendTest, Open_Version1File_QueuesGoOnInSendOrder) {
  WriteVersion1File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  const absl::Time later = kT0 + absl::Hours(1);
  std::vector<OutgoingMessage> more = {{J(R"({"m":4})"), later}};

  EXPECT_THAT(ValueOf(txn->SendMessages("greet", more, later)), ElementsAre(4));
  std::vector<MessageRecord> read = ValueOf(txn->ReadMessages(
      "greet", later, 10, later + absl::Minutes(1), Fields::kAll));
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].message_id, 2);
  EXPECT_EQ(read[0].read_count, 2);
  EXPECT_EQ(read[1].message_id, 3);
  EXPECT_EQ(read[2].message_id, 4);
  EXPECT_EQ(ValueOf(txn->NextVisibleAt("greet", later)),
            later + absl::Minutes(1));

  // The new unique index holds on the upgraded file.
  RunRecord keyed = MakeRun(RunId(9, 9), "greet", later);
  keyed.external_key = "k";
  ASSERT_TRUE(txn->InsertRuns({&keyed, 1}).ok());
  keyed.run_id = RunId(9, 10);
  EXPECT_EQ(txn->InsertRuns({&keyed, 1}).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(SqliteBackendTest, Open_Version1FileThatCannotUpgrade_ChangesNothing) {
  WriteVersion1File(path());
  RawDatabase(path()).Exec("DROP TABLE tasks");

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("schema version 1"), HasSubstr("tasks"),
                    HasSubstr(path())));
  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"), "1");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM pragma_table_info('runs') "
                      "WHERE name = 'priority'"),
            "0");
  EXPECT_THAT(
      raw.Rows("SELECT name FROM sqlite_schema WHERE name LIKE "
               "'%\\_v1' ESCAPE '\\' OR name IN ('attempts', 'dedupe')"),
      IsEmpty());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM messages"), "2");
}

// --- Version 2 to 3
// ------------------------------------------------------------

// A version 2 file as a version 2 build left it: flows "greet" (with a
// started run, a live message and an unapplied report) and "report", queue
// "greet" (paused), a dedupe entry and a worker.
void WriteVersion2File(const std::string& path) {
  RawDatabase raw(path);
  raw.Exec(kSchemaV2);
  const std::string r1 = StrCat("'", kRun1.ToString(), "'");
  raw.Exec(StrCat(
      "INSERT INTO flows VALUES ('greet', '{\"steps\":[]}', ", Stored(0),
      "), ('report', '{}', ", Stored(7), ");",
      "INSERT INTO queues VALUES ('greet', 'greet', ", Stored(0), ", 1, 1, 1);",
      "INSERT INTO messages VALUES ('greet', 1, 0, 1, 0, ", Stored(0), ", ",
      Stored(0), ", '{\"m\":1}');", "INSERT INTO runs VALUES (1, ", r1,
      ", 'greet', 'started', 1, '', ", Stored(0),
      ", NULL, 0, 'k1', 0, '{\"t\":1}', NULL, '{\"n\":1}', NULL);",
      "INSERT INTO dedupe VALUES ('greet', 'd', ", r1, ", NULL);",
      "INSERT INTO outbox (run_id, step_index, task_index, flow_slug, kind, "
      "created_at) VALUES (",
      r1, ", 0, 0, 'greet', 'completed', ", Stored(2), ");",
      "INSERT INTO workers VALUES ('w1', 'greet', 'greet', ", Stored(0), ", ",
      Stored(2), ", NULL);", "PRAGMA user_version = 2;"));
}

TEST_F(SqliteBackendTest, Open_Version2File_UpgradesToTheNewLayout) {
  WriteVersion2File(path());

  ASSERT_NE(Open(), nullptr);
  const std::string fresh = path() + ".fresh";
  ASSERT_TRUE(SqliteBackend::Open(fresh).ok());

  EXPECT_EQ(RawDatabase(path()).Value("PRAGMA user_version"),
            StrCat(SqliteBackend::kSchemaVersion));
  EXPECT_EQ(Layout(path()), Layout(fresh));
  EXPECT_THAT(RawDatabase(path()).Rows("PRAGMA integrity_check"),
              ElementsAre("ok"));
}

TEST_F(SqliteBackendTest, Open_Version2File_KeepsEveryRecordAndFillsAliases) {
  WriteVersion2File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  std::unique_ptr<Transaction> txn = Begin(*backend);

  std::vector<FlowRecord> flows = ValueOf(txn->ListFlows());
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].slug, "greet");
  EXPECT_EQ(flows[0].alias, "greet");
  EXPECT_EQ(flows[0].generation, 1);
  EXPECT_EQ(flows[0].definition, J(R"({"steps":[]})"));
  EXPECT_EQ(flows[0].created_at, kT0);
  EXPECT_EQ(flows[1].slug, "report");
  EXPECT_EQ(flows[1].alias, "report");
  EXPECT_EQ(flows[1].generation, 1);
  // Each flow is the active version of its own alias, since its creation.
  std::vector<AliasRecord> aliases = ValueOf(txn->ListAliases());
  ASSERT_EQ(aliases.size(), 2u);
  EXPECT_EQ(aliases[0].alias, "greet");
  EXPECT_EQ(aliases[0].active_slug, "greet");
  EXPECT_EQ(aliases[0].updated_at, kT0);
  EXPECT_EQ(aliases[1].alias, "report");
  EXPECT_EQ(aliases[1].active_slug, "report");
  EXPECT_EQ(aliases[1].updated_at, kT0 + absl::Seconds(7));

  std::vector<WorkerRecord> workers = ValueOf(txn->ListWorkers());
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].flow_slug, "greet");
  EXPECT_EQ(workers[0].last_heartbeat_at, kT0 + absl::Seconds(2));
  EXPECT_THAT(workers[0].served, IsEmpty());

  std::optional<RunRecord> run = GetRun(*txn, kRun1);
  ASSERT_TRUE(run.has_value());
  EXPECT_TRUE(run->unreadable.empty()) << run->unreadable;
  EXPECT_EQ(run->external_key, "k1");
  EXPECT_EQ(run->metadata, J(R"({"t":1})"));
  EXPECT_EQ(ValueOf(txn->CountRuns("greet")).started, 1);
  EXPECT_TRUE(ValueOf(txn->GetQueue("greet"))->paused);
  EXPECT_TRUE(ValueOf(txn->GetDedupe("greet", "d")).has_value());
  EXPECT_EQ(ValueOf(txn->CountReports()), 1);
  std::optional<MessageLocation> message =
      ValueOf(txn->LookupMessage("greet", 1));
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(message->message.body, J(R"({"m":1})"));
}

TEST_F(SqliteBackendTest, Open_Version2File_TakesTheNewRecords) {
  WriteVersion2File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->InsertFlow({.slug = "greet_v2",
                                 .definition = J("{}"),
                                 .created_at = kT0,
                                 .alias = "greet",
                                 .generation = 1})
                    .ok());
    ASSERT_TRUE(
        txn->PutAlias({.alias = "greet", .active_slug = "greet_v2"}).ok());
    WorkerRecord worker = ValueOf(txn->ListWorkers())[0];
    worker.served = {{.flow_slug = "greet_v2", .steps = {"a", "b"}}};
    ASSERT_TRUE(txn->UpsertWorker(worker).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  std::unique_ptr<Transaction> txn = Begin(*backend);
  EXPECT_EQ(ValueOf(txn->GetAlias("greet"))->active_slug, "greet_v2");
  EXPECT_EQ(ValueOf(txn->ListWorkers())[0].served.size(), 1u);
  EXPECT_EQ(RawDatabase(path()).Value("SELECT served FROM workers"),
            R"([{"flow":"greet_v2","steps":["a","b"]}])");
}

TEST_F(SqliteBackendTest, Open_Version2FileThatCannotUpgrade_ChangesNothing) {
  WriteVersion2File(path());
  // A table in the way of the upgrade.
  RawDatabase(path()).Exec("CREATE TABLE aliases (x)");

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("schema version 2"), HasSubstr("aliases"),
                    HasSubstr(path())));
  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"), "2");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM pragma_table_info('flows') "
                      "WHERE name IN ('alias', 'generation')"),
            "0");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM pragma_table_info('workers') "
                      "WHERE name = 'served'"),
            "0");
  EXPECT_THAT(raw.Rows("SELECT name FROM sqlite_schema WHERE name LIKE "
                       "'%\\_v2' ESCAPE '\\'"),
              IsEmpty());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM flows"), "2");
}

// --- Version 3 to 4 (fan-out) ----------------------------------------------

// A version 3 file as a version 3 build left it: flow "greet" with a started
// run whose task 0 is queued and task 1 started.
void WriteVersion3File(const std::string& path) {
  RawDatabase raw(path);
  raw.Exec(kSchemaV3);
  const std::string r1 = StrCat("'", kRun1.ToString(), "'");
  raw.Exec(StrCat(
      "INSERT INTO flows VALUES ('greet', 'greet', 1, ", Stored(0), ", '{}');",
      "INSERT INTO aliases VALUES ('greet', 'greet', ", Stored(0), ");",
      "INSERT INTO queues VALUES ('greet', 'greet', ", Stored(0), ", 2, 0, 2);",
      "INSERT INTO runs VALUES (1, ", r1, ", 'greet', 'started', 1, '', ",
      Stored(0), ", NULL, 0, '', 0, NULL, NULL, '{\"n\":1}', NULL);",
      "INSERT INTO tasks VALUES (1, ", r1,
      ", 0, 0, 'greet', 'queued', 0, '', 'greet', 1, ", Stored(0),
      ", NULL, NULL, NULL, 0, '', 0, 0, NULL, '[1]', NULL), (1, ", r1,
      ", 0, 1, 'greet', 'started', 1, '', 'greet', 2, ", Stored(0), ", ",
      Stored(1), ", NULL, ", Stored(60), ", 0, 'w1', 0, 0, NULL, '[2]', NULL);",
      "PRAGMA user_version = 3;"));
}

// Fan-out works on an upgraded file: a task parks (waiting) and stays
// unfinished, links and reports are kept.
void ExpectFanOutWorks(Transaction& txn) {
  std::vector<TaskRecord> tasks = ValueOf(txn.ListTasks(kRun1));
  ASSERT_GE(tasks.size(), 2u);
  TaskUpdate park{.task = tasks[1],
                  .expected_status = tasks[1].status,
                  .expected_attempts = tasks[1].attempts};
  park.task.status = TaskStatus::kWaiting;
  EXPECT_THAT(ValueOf(txn.UpdateTasks({&park, 1})), ElementsAre(true));
  std::vector<TaskRecord> unfinished =
      ValueOf(txn.GetUnfinishedTasks(kRun1, 0, Fields::kAll));
  EXPECT_GE(unfinished.size(), 1u);
  EXPECT_TRUE(std::any_of(
      unfinished.begin(), unfinished.end(),
      [](const TaskRecord& t) { return t.status == TaskStatus::kWaiting; }));
  EXPECT_EQ(ValueOf(txn.CountTasks("greet", kT0, TaskCounts::kAll)).parked, 1);
  ChildLinkRecord link{.parent = park.task.key,
                       .child_index = 0,
                       .child_run_id = kRun2,
                       .pending_since = kT0,
                       .spec = J(R"({"flow":"child"})")};
  EXPECT_TRUE(txn.InsertChildLinks({&link, 1}).ok());
  EXPECT_EQ(ValueOf(txn.CountChildLinks(park.task.key, 10)).pending, 1);
  ChildReport report{.parent = park.task.key, .child_run_id = kRun2};
  EXPECT_THAT(ValueOf(txn.AppendChildReports({&report, 1})), ElementsAre(1));
}

TEST_F(SqliteBackendTest, Open_Version3File_UpgradesToTheNewLayout) {
  WriteVersion3File(path());

  ASSERT_NE(Open(), nullptr);
  const std::string fresh = path() + ".fresh";
  ASSERT_TRUE(SqliteBackend::Open(fresh).ok());

  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"),
            StrCat(SqliteBackend::kSchemaVersion));
  EXPECT_EQ(Layout(path()), Layout(fresh));
  EXPECT_THAT(raw.Rows("PRAGMA integrity_check"), ElementsAre("ok"));
  EXPECT_EQ(raw.Value("SELECT count(*) FROM sqlite_schema "
                      "WHERE name = 'tasks_unfinished'"),
            "0");
}

TEST_F(SqliteBackendTest, Open_Version3File_KeepsTasksAndTakesFanOut) {
  WriteVersion3File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  std::unique_ptr<Transaction> txn = Begin(*backend);

  std::vector<TaskRecord> unfinished =
      ValueOf(txn->GetUnfinishedTasks(kRun1, std::nullopt, Fields::kAll));
  ASSERT_EQ(unfinished.size(), 2u);
  EXPECT_EQ(unfinished[0].status, TaskStatus::kQueued);
  EXPECT_EQ(unfinished[1].status, TaskStatus::kStarted);
  EXPECT_EQ(unfinished[1].worker_id, "w1");
  EXPECT_EQ(ValueOf(txn->CountChildReports()), 0);
  ExpectFanOutWorks(*txn);
  EXPECT_TRUE(txn->Commit().ok());
}

TEST_F(SqliteBackendTest, Open_Version1File_UpgradesThroughToFanOut) {
  WriteVersion1File(path());
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ExpectFanOutWorks(*txn);
  EXPECT_TRUE(txn->Commit().ok());
}

// A file of `version`: today's layout plus `index`, which a later version
// dropped, made by `create`. Opening it upgrades it to today's layout.
class SqliteDroppedIndexTest : public SqliteBackendTest {
 protected:
  void ExpectUpgradeDrops(int version, std::string_view index,
                          std::string_view create) {
    const std::string fresh = path() + ".fresh";
    ASSERT_TRUE(SqliteBackend::Open(fresh).ok());
    ASSERT_TRUE(SqliteBackend::Open(path()).ok());
    RawDatabase(path()).Exec(
        StrCat(create, "; PRAGMA user_version = ", version));

    ASSERT_NE(Open(), nullptr);

    RawDatabase raw(path());
    EXPECT_EQ(raw.Value("PRAGMA user_version"),
              StrCat(SqliteBackend::kSchemaVersion));
    EXPECT_EQ(raw.Value(StrCat("SELECT count(*) FROM sqlite_schema "
                               "WHERE name = '",
                               index, "'")),
              "0");
    EXPECT_EQ(Layout(path()), Layout(fresh));
  }
};

TEST_F(SqliteDroppedIndexTest, Version5File_DropsTheUnfinishedTasksIndex) {
  ExpectUpgradeDrops(5, "tasks_unfinished",
                     "CREATE INDEX tasks_unfinished ON tasks (run_seq, "
                     "step_index, task_index) WHERE status IN ('queued', "
                     "'started', 'waiting')");
}

TEST_F(SqliteBackendTest, Open_Version7File_IndexesEndedRunsByFlowAndStatus) {
  const std::string fresh = path() + ".fresh";
  ASSERT_TRUE(SqliteBackend::Open(fresh).ok());
  // A version 7 file: today's layout without the index version 8 added.
  ASSERT_TRUE(SqliteBackend::Open(path()).ok());
  RawDatabase(path()).Exec(
      "DROP INDEX runs_finished_by_flow_status; PRAGMA user_version = 7");

  ASSERT_NE(Open(), nullptr);

  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"),
            StrCat(SqliteBackend::kSchemaVersion));
  EXPECT_EQ(Layout(path()), Layout(fresh));
}

TEST_F(SqliteDroppedIndexTest, Version9File_DropsTheStalledTasksIndex) {
  ExpectUpgradeDrops(9, "tasks_stalled",
                     "CREATE INDEX tasks_stalled ON tasks (stall_at) "
                     "WHERE status = 'started'");
}

TEST_F(SqliteBackendTest, Open_Version3FileThatCannotUpgrade_ChangesNothing) {
  WriteVersion3File(path());
  // A table in the way of the upgrade.
  RawDatabase(path()).Exec("CREATE TABLE child_reports (x)");

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("schema version 3"), HasSubstr("child_reports"),
                    HasSubstr(path())));
  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"), "3");
  EXPECT_EQ(raw.Value("SELECT count(*) FROM sqlite_schema "
                      "WHERE name LIKE 'child\\_links%' ESCAPE '\\'"),
            "0");
  EXPECT_THAT(raw.Value("SELECT sql FROM sqlite_schema "
                        "WHERE name = 'tasks_unfinished'"),
              Not(HasSubstr("'waiting'")));
  EXPECT_EQ(raw.Value("SELECT count(*) FROM tasks"), "2");
}

}  // namespace
}  // namespace sluice
