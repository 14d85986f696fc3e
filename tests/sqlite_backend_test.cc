// SQLite-only behaviour of the SQLite backend: the schema and its version,
// WAL, busy handling, query plans, durability across reopen, corruption
// reporting, and several threads and processes sharing one file. The
// behaviour every backend shares is in backend_contract_test.cc.
#include "sqlite_backend.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_sql.h"
#include "sqlite_status.h"

namespace sluice {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

// A plain SQLite connection of the test's own, to look at the file from
// outside the backend (or to hold its write lock).
class RawDatabase {
 public:
  explicit RawDatabase(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDatabase() { sqlite3_close(db_); }

  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error),
              SQLITE_OK)
        << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }

  // Every row's columns, joined by '|'.
  std::vector<std::string> Rows(const std::string& sql) {
    std::vector<std::string> rows;
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    while (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(statement); ++i) {
        const unsigned char* text = sqlite3_column_text(statement, i);
        StrAppend(&row, i > 0 ? "|" : "",
                  text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      rows.push_back(row);
    }
    sqlite3_finalize(statement);
    return rows;
  }

  std::string Value(const std::string& sql) {
    std::vector<std::string> rows = Rows(sql);
    return rows.empty() ? "" : rows[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "sluice_sqlite_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/sluice.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteBackend> Open(SqliteOptions options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
        SqliteBackend::Open(path_, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  static std::unique_ptr<Transaction> Begin(Backend& backend) {
    absl::StatusOr<std::unique_ptr<Transaction>> transaction = backend.Begin();
    EXPECT_TRUE(transaction.ok()) << transaction.status();
    return transaction.ok() ? std::move(*transaction) : nullptr;
  }

  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

RunRecord MakeRun(RunId run_id, std::string flow_slug, absl::Time started_at) {
  RunRecord run;
  run.run_id = run_id;
  run.flow_slug = std::move(flow_slug);
  run.input = J(R"({"n":1})");
  run.remaining_steps = 1;
  run.started_at = started_at;
  return run;
}

TaskRecord MakeTask(RunId run_id, int task_index, int64_t message_id) {
  TaskRecord task;
  task.key = TaskKey{run_id, 0, task_index};
  task.flow_slug = "flow";
  task.input = J("[1,2]");
  task.queue_name = "flow";
  task.message_id = message_id;
  task.queued_at = kT0;
  return task;
}

QueueRecord MakeQueue(std::string name) {
  return QueueRecord{std::move(name), "flow", kT0};
}

// --- Schema ----------------------------------------------------------------

TEST_F(SqliteBackendTest, Open_NewFile_CreatesSchemaAtCurrentVersion) {
  ASSERT_NE(Open(), nullptr);

  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"),
            std::to_string(SqliteBackend::kSchemaVersion));
  EXPECT_THAT(raw.Rows("SELECT name FROM sqlite_schema WHERE type = 'table' "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY name"),
              ElementsAre("archived_messages", "flows", "messages", "outbox",
                          "queues", "runs", "step_states", "tasks", "workers"));
}

TEST_F(SqliteBackendTest, Open_NewFile_UsesWalMode) {
  std::unique_ptr<SqliteBackend> backend = Open();
  ASSERT_NE(backend, nullptr);

  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA journal_mode"), "wal");
  EXPECT_TRUE(std::filesystem::exists(path() + "-wal"));
}

TEST_F(SqliteBackendTest, Open_TwiceOnOneFile_KeepsTheSchema) {
  std::unique_ptr<SqliteBackend> first = Open();
  std::unique_ptr<SqliteBackend> second = Open();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(RawDatabase(path()).Value("PRAGMA user_version"), "1");
}

TEST_F(SqliteBackendTest, Open_NewerSchemaVersion_FailsNamingBothVersions) {
  ASSERT_NE(Open(), nullptr);
  RawDatabase(path()).Exec("PRAGMA user_version = 2");

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(),
              AllOf(HasSubstr("schema version 2"), HasSubstr("version 1"),
                    HasSubstr(path())));
}

TEST_F(SqliteBackendTest, Open_AnotherApplicationsDatabase_IsRefused) {
  RawDatabase(path()).Exec("CREATE TABLE invoices (id INTEGER)");

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(RawDatabase(path()).Rows("SELECT name FROM sqlite_schema"),
              ElementsAre("invoices"));
}

TEST_F(SqliteBackendTest, Open_FileThatIsNotADatabase_IsInternal) {
  std::ofstream(path()) << std::string(8192, 'x');

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(backend.status().message(), HasSubstr(path()));
}

// --- Durability ------------------------------------------------------------

TEST_F(SqliteBackendTest, Reopen_KeepsEveryRecordExactly) {
  const RunId run_id = RunId::Random();
  RunRecord run = MakeRun(run_id, "flow", kT0);
  run.output = Json();  // JSON null, which must not come back as "absent"
  run.finished_at = kT0 + absl::Seconds(3);
  StepStateRecord step;
  step.run_id = run_id;
  step.step_slug = "double";
  step.status = StepStatus::kSkipped;
  step.remaining_deps = 2;
  step.initial_tasks = 0;
  step.output = J("[]");
  step.skip_reason = SkipReason::kConditionUnmet;
  step.started_at = kT0;
  TaskRecord task = MakeTask(run_id, 0, 1);
  task.input = J(R"({"false":false,"zero":0,"empty":"","null":null})");
  task.output = J("0");
  task.stall_at = absl::InfiniteFuture();
  task.worker_id = "w1";
  WorkerRecord worker{"w1",        "flow", "flow", kT0, kT0 + absl::Seconds(1),
                      std::nullopt};
  {
    std::unique_ptr<SqliteBackend> backend = Open();
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->InsertFlow({"flow", J(R"({"steps":[]})"), kT0}).ok());
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    ASSERT_TRUE(txn->InsertStepStates({&step, 1}).ok());
    ASSERT_TRUE(txn->InsertTasks({&task, 1}).ok());
    OutgoingMessage message{J("null"), absl::InfiniteFuture()};
    ASSERT_TRUE(txn->SendMessages("flow", {&message, 1}, kT0).ok());
    OutboxReport report{0, task.key, "flow", ReportKind::kTypeViolation, kT0};
    ASSERT_TRUE(txn->AppendReports({&report, 1}).ok());
    ASSERT_TRUE(txn->UpsertWorker(worker).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }

  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  absl::StatusOr<std::optional<RunRecord>> got_run =
      txn->GetRun(run_id, LockMode::kNone);
  ASSERT_TRUE(got_run.ok() && got_run->has_value()) << got_run.status();
  EXPECT_EQ((*got_run)->input, run.input);
  ASSERT_TRUE((*got_run)->output.has_value());
  EXPECT_TRUE((*got_run)->output->is_null());
  EXPECT_EQ((*got_run)->finished_at, run.finished_at);

  absl::StatusOr<std::vector<StepStateRecord>> steps =
      txn->GetStepStates(run_id);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0].status, StepStatus::kSkipped);
  EXPECT_EQ((*steps)[0].initial_tasks, 0);
  EXPECT_EQ((*steps)[0].remaining_tasks, std::nullopt);
  EXPECT_EQ((*steps)[0].output, J("[]"));
  EXPECT_EQ((*steps)[0].skip_reason, SkipReason::kConditionUnmet);
  EXPECT_EQ((*steps)[0].finished_at, std::nullopt);

  absl::StatusOr<std::vector<TaskRecord>> tasks = txn->ListTasks(run_id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].input, task.input);
  EXPECT_EQ((*tasks)[0].output, J("0"));
  EXPECT_EQ((*tasks)[0].stall_at, absl::InfiniteFuture());
  EXPECT_EQ((*tasks)[0].started_at, std::nullopt);

  absl::StatusOr<std::optional<MessageLocation>> message =
      txn->LookupMessage("flow", 1);
  ASSERT_TRUE(message.ok() && message->has_value()) << message.status();
  EXPECT_TRUE((*message)->message.body.is_null());
  EXPECT_EQ((*message)->message.visible_at, absl::InfiniteFuture());

  absl::StatusOr<std::vector<OutboxReport>> reports =
      txn->TakeStaleReports(absl::InfiniteFuture(), 10);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_EQ((*reports)[0].kind, ReportKind::kTypeViolation);
  EXPECT_EQ((*reports)[0].task, task.key);

  absl::StatusOr<std::vector<WorkerRecord>> workers = txn->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].last_heartbeat_at, worker.last_heartbeat_at);
  EXPECT_EQ((*workers)[0].stopped_at, std::nullopt);
}

TEST_F(SqliteBackendTest, Reopen_MessageIdsContinueAfterArchive) {
  const OutgoingMessage message{J("{}"), kT0};
  {
    std::unique_ptr<SqliteBackend> backend = Open();
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("q")).ok());
    ASSERT_TRUE(txn->SendMessages("q", {&message, 1}, kT0).ok());
    const int64_t first = 1;
    ASSERT_TRUE(txn->ArchiveMessages("q", {&first, 1}, kT0).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);

  absl::StatusOr<std::vector<int64_t>> ids =
      txn->SendMessages("q", {&message, 1}, kT0);

  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(2));
}

TEST_F(SqliteBackendTest, DroppedTransaction_LeavesNothingInTheFile) {
  std::unique_ptr<SqliteBackend> backend = Open();
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->InsertFlow({"flow", J("{}"), kT0}).ok());
  }
  EXPECT_EQ(RawDatabase(path()).Value("SELECT count(*) FROM flows"), "0");
  // The connection is free for the next transaction.
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_NE(txn, nullptr);
  EXPECT_EQ(txn->GetFlow("flow").value(), std::nullopt);
}

TEST_F(SqliteBackendTest, CommittedTransaction_RefusesFurtherCalls) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->Commit().ok());

  EXPECT_EQ(txn->ListFlows().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(txn->Commit().code(), absl::StatusCode::kFailedPrecondition);
  // The committed transaction no longer holds the connection.
  EXPECT_NE(Begin(*backend), nullptr);
}

// --- Batches and stored data -----------------------------------------------

TEST_F(SqliteBackendTest, InsertTasks_DuplicateLateInBatch_CommitsNoneOfIt) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = RunId::Random();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  RunRecord run = MakeRun(run_id, "flow", kT0);
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  // The third task reuses the first task's message.
  std::vector<TaskRecord> tasks = {
      MakeTask(run_id, 0, 1), MakeTask(run_id, 1, 2), MakeTask(run_id, 2, 1)};

  absl::Status inserted = txn->InsertTasks(tasks);
  absl::Status committed = txn->Commit();
  txn.reset();

  EXPECT_EQ(inserted.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(committed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RawDatabase(path()).Value("SELECT count(*) FROM tasks"), "0");
}

// Batches bind their ids as one JSON list; a repeated id counts once.
TEST_F(SqliteBackendTest, BatchesOfIds_RepeatedIdCountsOnce) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->CreateQueue(MakeQueue("q")).ok());
  std::vector<OutgoingMessage> messages(2, OutgoingMessage{J("{}"), kT0});
  ASSERT_TRUE(txn->SendMessages("q", messages, kT0).ok());
  OutboxReport report{0, TaskKey{RunId::Random(), 0, 0}, "flow",
                      ReportKind::kCompleted, kT0};
  absl::StatusOr<std::vector<int64_t>> report_ids =
      txn->AppendReports({&report, 1});
  ASSERT_TRUE(report_ids.ok()) << report_ids.status();
  const std::vector<int64_t> twice = {(*report_ids)[0], (*report_ids)[0]};
  const std::vector<int64_t> first_twice = {1, 1};

  absl::StatusOr<std::vector<OutboxReport>> taken = txn->TakeReports(twice);
  absl::Status archived = txn->ArchiveMessages("q", first_twice, kT0);

  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->size(), 1u);
  ASSERT_TRUE(archived.ok()) << archived;
  EXPECT_TRUE(txn->LookupMessage("q", 1).value()->archived);
  EXPECT_FALSE(txn->LookupMessage("q", 2).value()->archived);
}

// Step states and tasks are keyed by their run's seq (sqlite_schema.cc).
TEST_F(SqliteBackendTest, InsertTasksAndStepStates_UnknownRun_NotFound) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = RunId::Random();
  TaskRecord task = MakeTask(run_id, 0, 1);
  StepStateRecord step;
  step.run_id = run_id;

  EXPECT_EQ(Begin(*backend)->InsertTasks({&task, 1}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Begin(*backend)->InsertStepStates({&step, 1}).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SqliteBackendTest, CorruptStoredJson_IsInternalWithoutTheText) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = RunId::Random();
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    RunRecord run = MakeRun(run_id, "flow", kT0);
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase(path()).Exec("UPDATE runs SET input = '{\"secret\": '");

  std::unique_ptr<Transaction> txn = Begin(*backend);
  absl::Status status = txn->GetRun(run_id, LockMode::kNone).status();

  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("corrupt"), Not(HasSubstr("secret"))));
}

TEST_F(SqliteBackendTest, NoPayloads_DoesNotReadTheStoredPayloads) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = RunId::Random();
  TaskRecord task = MakeTask(run_id, 0, 1);
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    RunRecord run = MakeRun(run_id, "flow", kT0);
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    ASSERT_TRUE(txn->InsertTasks({&task, 1}).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  // Payloads that would fail to parse prove they are never parsed.
  RawDatabase(path()).Exec("UPDATE tasks SET input = '[', output = '{'");
  std::unique_ptr<Transaction> txn = Begin(*backend);

  absl::StatusOr<std::vector<std::optional<TaskRecord>>> state_only =
      txn->GetTasks({&task.key, 1}, TaskFields::kNoPayloads);
  absl::StatusOr<std::vector<std::optional<TaskRecord>>> everything =
      txn->GetTasks({&task.key, 1}, TaskFields::kAll);

  ASSERT_TRUE(state_only.ok()) << state_only.status();
  ASSERT_TRUE((*state_only)[0].has_value());
  EXPECT_EQ((*state_only)[0]->message_id, 1);
  EXPECT_EQ(everything.status().code(), absl::StatusCode::kInternal);
}

TEST_F(SqliteBackendTest, ListRuns_SameStartTime_LaterInsertIsNewer) {
  std::unique_ptr<SqliteBackend> backend = Open();
  // Ids that sort opposite to insertion order.
  const RunId first(2, 0);
  const RunId second(1, 0);
  std::vector<RunRecord> runs = {MakeRun(first, "flow", kT0),
                                 MakeRun(second, "flow", kT0)};
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->InsertRuns(runs).ok());

  absl::StatusOr<std::vector<RunRecord>> listed = txn->ListRuns("flow", 10);

  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].run_id, second);
  EXPECT_EQ((*listed)[1].run_id, first);
}

// --- Errors ----------------------------------------------------------------

TEST(SqliteStatusTest, ResultCodes_MapToRetryMeaning) {
  using sqlite_internal::StatusFromSqlite;
  EXPECT_EQ(StatusFromSqlite(SQLITE_BUSY, nullptr, "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_LOCKED, nullptr, "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_CONSTRAINT_UNIQUE, nullptr, "op").code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(
      StatusFromSqlite(SQLITE_CONSTRAINT_PRIMARYKEY, nullptr, "op").code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(StatusFromSqlite(SQLITE_CORRUPT, nullptr, "op").code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(StatusFromSqlite(SQLITE_NOTADB, nullptr, "op").code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(StatusFromSqlite(SQLITE_IOERR_WRITE, nullptr, "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_FULL, nullptr, "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(StatusFromSqlite(SQLITE_FULL, nullptr, "InsertTasks").message(),
              HasSubstr("InsertTasks"));
}

// --- Locking ---------------------------------------------------------------

TEST_F(SqliteBackendTest, Begin_OtherConnectionHoldsWriteLock_Unavailable) {
  std::unique_ptr<SqliteBackend> backend =
      Open({.busy_timeout = absl::Milliseconds(50)});
  RawDatabase other(path());
  other.Exec("BEGIN IMMEDIATE");

  absl::StatusOr<std::unique_ptr<Transaction>> blocked = backend->Begin();

  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable);
  other.Exec("ROLLBACK");
  EXPECT_NE(Begin(*backend), nullptr);
}

TEST_F(SqliteBackendTest, Begin_OtherConnectionCommits_SeesItsWrite) {
  std::unique_ptr<SqliteBackend> backend = Open();
  RawDatabase other(path());
  other.Exec("BEGIN IMMEDIATE");
  other.Exec(
      "INSERT INTO flows (slug, definition, created_at) VALUES ('f', '{}', 0)");
  absl::StatusOr<std::optional<FlowRecord>> seen;
  // Whether Begin() starts waiting before or after the commit, it must
  // succeed and see the committed row.
  std::thread reader([&] {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    if (txn != nullptr) seen = txn->GetFlow("f");
  });
  other.Exec("COMMIT");
  reader.join();

  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(seen->has_value());
}

TEST_F(SqliteBackendTest, ThreadsSharingOneBackend_LoseNoIncrement) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId counter = RunId::Random();
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    RunRecord run = MakeRun(counter, "flow", kT0);
    run.remaining_steps = 0;
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  constexpr int kThreads = 4;
  constexpr int kIncrements = 250;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrements; ++i) {
        absl::StatusOr<std::unique_ptr<Transaction>> txn = backend->Begin();
        if (!txn.ok() || !(*txn)->AddRunRemainingSteps(counter, 1).ok() ||
            !(*txn)->Commit().ok()) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_THAT(failures, ::testing::Each(0));
  std::unique_ptr<Transaction> txn = Begin(*backend);
  EXPECT_EQ(txn->GetRun(counter, LockMode::kNone).value()->remaining_steps,
            kThreads * kIncrements);
}

// Runs in a child process: opens its own backend on the shared file, waits
// until `go_fd` reaches end of file, then `rounds` times sends one message
// and adds 1 to the shared counter in one transaction, and consumes at most
// one visible message in another. Each consumed message leaves a run keyed
// by its id, so a message consumed twice fails its second InsertRuns. At the
// end it drains the queue. Returns a process exit code.
int ShareFileWithAnotherProcess(const std::string& path, int go_fd,
                                int producer, int rounds,
                                const RunId& counter) {
  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path);
  if (!backend.ok()) return 10;
  char byte;
  if (read(go_fd, &byte, 1) != 0) return 11;
  const std::string consumer = StrCat("consumer_", producer);
  // Returns whether a message was consumed, or an error.
  auto consume_one = [&]() -> absl::StatusOr<bool> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> txn,
                            (*backend)->Begin());
    SLUICE_ASSIGN_OR_RETURN(
        std::vector<MessageRecord> messages,
        txn->ReadMessages("shared", kT0, 1, absl::InfiniteFuture()));
    if (messages.empty()) return false;
    const int64_t id = messages[0].message_id;
    RunRecord witness = MakeRun(RunId(0, id), consumer, kT0);
    SLUICE_RETURN_IF_ERROR(txn->InsertRuns({&witness, 1}));
    SLUICE_RETURN_IF_ERROR(txn->ArchiveMessages("shared", {&id, 1}, kT0));
    SLUICE_RETURN_IF_ERROR(txn->Commit());
    return true;
  };
  for (int i = 0; i < rounds; ++i) {
    absl::StatusOr<std::unique_ptr<Transaction>> txn = (*backend)->Begin();
    if (!txn.ok()) return 12;
    OutgoingMessage message{
        J(StrCat(R"({"producer":)", producer, R"(,"seq":)", i, "}")), kT0};
    if (!(*txn)->SendMessages("shared", {&message, 1}, kT0).ok()) return 13;
    if (!(*txn)->AddRunRemainingSteps(counter, 1).ok()) return 14;
    if (!(*txn)->Commit().ok()) return 15;
    if (!consume_one().ok()) return 16;
  }
  while (true) {
    absl::StatusOr<bool> consumed = consume_one();
    if (!consumed.ok()) return 17;
    if (!*consumed) return 0;
  }
}

TEST_F(SqliteBackendTest, TwoProcessesSharingOneFile_LoseAndDuplicateNothing) {
  const RunId counter = RunId::Random();
  {
    std::unique_ptr<SqliteBackend> backend = Open();
    std::unique_ptr<Transaction> txn = Begin(*backend);
    RunRecord run = MakeRun(counter, "counter", kT0);
    run.remaining_steps = 0;
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("shared")).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }  // closed: no connection crosses fork()
  constexpr int kRounds = 1000;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> children;
  for (int producer = 0; producer < 2; ++producer) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      _exit(ShareFileWithAnotherProcess(path(), go[0], producer, kRounds,
                                        counter));
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(go[1]);  // both children start now
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child exit code (see the child)";
  }

  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  EXPECT_EQ(txn->GetRun(counter, LockMode::kNone).value()->remaining_steps,
            2 * kRounds);
  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("SELECT count(*) FROM messages"), "0");
  EXPECT_EQ(raw.Value("SELECT count(*), min(message_id), max(message_id) "
                      "FROM archived_messages"),
            StrCat(2 * kRounds, "|1|", 2 * kRounds));
  EXPECT_EQ(raw.Value("SELECT count(*) FROM runs "
                      "WHERE flow_slug LIKE 'consumer_%'"),
            std::to_string(2 * kRounds));
  EXPECT_EQ(
      raw.Rows("SELECT json_extract(body, '$.producer'), count(*) "
               "FROM archived_messages GROUP BY 1 ORDER BY 1"),
      std::vector<std::string>({StrCat("0|", kRounds), StrCat("1|", kRounds)}));
}

// --- Query plans -----------------------------------------------------------

struct HotStatement {
  std::string_view name;
  std::string_view sql;
  std::string_view index;  // what the plan must name
};

std::vector<HotStatement> HotStatements() {
  namespace sql = sqlite_internal::sql;
  return {
      {"GetRun", sql::kGetRun, "sqlite_autoindex_runs_1"},
      {"UpdateRun", sql::kUpdateRun, "sqlite_autoindex_runs_1"},
      {"AddRunRemainingSteps", sql::kAddRunRemainingSteps,
       "sqlite_autoindex_runs_1"},
      {"GetRunRemainingSteps", sql::kGetRunRemainingSteps,
       "sqlite_autoindex_runs_1"},
      {"GetRunSeq", sql::kGetRunSeq, "sqlite_autoindex_runs_1"},
      {"ListRunsOfFlow", sql::kListRunsOfFlow, "runs_by_flow"},
      {"ListAllRuns", sql::kListAllRuns, "runs_by_start"},
      {"GetStepStates", sql::kGetStepStates, "PRIMARY KEY"},
      {"UpdateStepState", sql::kUpdateStepState, "PRIMARY KEY"},
      {"AddStepRemainingTasks", sql::kAddStepRemainingTasks, "PRIMARY KEY"},
      {"AddStepRemainingDeps", sql::kAddStepRemainingDeps, "PRIMARY KEY"},
      {"GetStepRemainingTasks", sql::kGetStepRemainingTasks, "PRIMARY KEY"},
      {"GetStepRemainingDeps", sql::kGetStepRemainingDeps, "PRIMARY KEY"},
      {"GetTask", sql::kGetTask.all, "PRIMARY KEY"},
      {"GetTaskState", sql::kGetTask.state_only, "PRIMARY KEY"},
      {"GetTaskByMessage", sql::kGetTaskByMessage.all,
       "sqlite_autoindex_tasks_2"},
      {"UpdateTask", sql::kUpdateTask, "PRIMARY KEY"},
      {"UnfinishedOfRun", sql::kUnfinishedOfRun.all, "tasks_unfinished"},
      {"UnfinishedOfStep", sql::kUnfinishedOfStep.state_only,
       "tasks_unfinished"},
      {"ListTasks", sql::kListTasks, "PRIMARY KEY"},
      {"GetTaskOutputs", sql::kGetTaskOutputs, "PRIMARY KEY"},
      {"FindStalledTasks", sql::kFindStalledTasks, "tasks_stalled"},
      {"TakeReports", sql::kTakeReports, "INTEGER PRIMARY KEY"},
      {"TakeStaleReports", sql::kTakeStaleReports, "outbox_by_created"},
      {"ReserveMessageIds", sql::kReserveMessageIds, "PRIMARY KEY"},
      {"ReadMessages", sql::kReadMessages, "PRIMARY KEY"},
      {"SetVisibility", sql::kSetVisibility, "PRIMARY KEY"},
      {"CopyToArchive", sql::kCopyToArchive, "PRIMARY KEY"},
      {"DeleteMessages", sql::kDeleteMessages, "PRIMARY KEY"},
      {"LookupLive", sql::kLookupLive, "PRIMARY KEY"},
      {"LookupArchived", sql::kLookupArchived, "PRIMARY KEY"},
      {"GetQueue", sql::kGetQueue, "PRIMARY KEY"},
      {"GetFlow", sql::kGetFlow, "PRIMARY KEY"},
  };
}

// Each plan line must search or scan through an index (never a bare table
// scan; a scan of json_each walks a bound id list) and never sort in a
// temporary b-tree.
void ExpectIndexedPlans(RawDatabase& raw) {
  for (const HotStatement& statement : HotStatements()) {
    std::vector<std::string> plan =
        raw.Rows(StrCat("EXPLAIN QUERY PLAN ", statement.sql));
    std::string joined;
    for (const std::string& row : plan) StrAppend(&joined, row, "\n");
    EXPECT_THAT(joined, HasSubstr(statement.index)) << statement.name;
    EXPECT_THAT(joined, Not(HasSubstr("TEMP B-TREE"))) << statement.name;
    for (const std::string& row : plan) {
      if (row.find("SCAN") == std::string::npos) continue;
      if (row.find("SCAN json_each VIRTUAL TABLE") != std::string::npos) {
        continue;
      }
      EXPECT_THAT(row, HasSubstr("USING")) << statement.name << "\n" << joined;
    }
  }
}

TEST_F(SqliteBackendTest, HotStatements_UseTheirIndexes) {
  ASSERT_NE(Open(), nullptr);
  RawDatabase raw(path());
  ExpectIndexedPlans(raw);
}

// After ANALYZE over a few rows, statistics could tempt the planner into
// table scans (the trap DESIGN.md describes for Postgres); they must not.
TEST_F(SqliteBackendTest, HotStatements_UseTheirIndexes_AfterAnalyze) {
  std::unique_ptr<SqliteBackend> backend = Open();
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    const RunId run_id = RunId::Random();
    RunRecord run = MakeRun(run_id, "flow", kT0);
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    std::vector<TaskRecord> tasks;
    std::vector<OutgoingMessage> messages;
    for (int i = 0; i < 3; ++i) {
      tasks.push_back(MakeTask(run_id, i, i + 1));
      messages.push_back({J("{}"), kT0});
    }
    ASSERT_TRUE(txn->InsertTasks(tasks).ok());
    ASSERT_TRUE(txn->SendMessages("flow", messages, kT0).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase raw(path());
  raw.Exec("ANALYZE");
  ExpectIndexedPlans(raw);
}

}  // namespace
}  // namespace sluice
