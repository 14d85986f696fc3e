// SQLite-only behaviour of the SQLite backend: the schema and its version,
// WAL, busy handling, durability across reopen, and several threads and
// processes sharing one file. Batches, Fields and retention are in
// sqlite_backend_batches_test.cc, query plans in
// sqlite_backend_plans_test.cc, files that are damaged, full or read-only
// in sqlite_backend_faults_test.cc. The behaviour every backend shares is in
// backend_contract_test.cc.
#include "sqlite_backend.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_status.h"
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
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// --- Schema ----------------------------------------------------------------

TEST_F(SqliteBackendTest, Open_NewFile_CreatesSchemaAtCurrentVersion) {
  ASSERT_NE(Open(), nullptr);

  RawDatabase raw(path());
  EXPECT_EQ(raw.Value("PRAGMA user_version"),
            std::to_string(SqliteBackend::kSchemaVersion));
  EXPECT_THAT(raw.Rows("SELECT name FROM sqlite_schema WHERE type = 'table' "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY name"),
              ElementsAre("aliases", "archived_messages", "attempts",
                          "child_links", "child_reports", "dedupe", "flows",
                          "messages", "outbox", "queues", "runs", "schedules",
                          "step_states", "tasks", "workers"));
  EXPECT_THAT(raw.Rows("SELECT name FROM sqlite_schema WHERE type = 'index' "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY name"),
              ElementsAre("child_links_by_status", "child_links_pending",
                          "child_links_uncascaded", "dedupe_expiring",
                          "messages_delayed", "messages_read", "messages_ready",
                          "outbox_by_created", "runs_by_flow", "runs_by_key",
                          "runs_by_start", "runs_by_status", "runs_finished",
                          "runs_finished_by_flow_status"));
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
  EXPECT_EQ(RawDatabase(path()).Value("PRAGMA user_version"),
            std::to_string(SqliteBackend::kSchemaVersion));
}

TEST_F(SqliteBackendTest, Open_NewerSchemaVersion_FailsNamingBothVersions) {
  ASSERT_NE(Open(), nullptr);
  const int newer = SqliteBackend::kSchemaVersion + 1;
  RawDatabase(path()).Exec(StrCat("PRAGMA user_version = ", newer));

  absl::StatusOr<std::unique_ptr<SqliteBackend>> backend =
      SqliteBackend::Open(path());

  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      backend.status().message(),
      AllOf(HasSubstr(StrCat("schema version ", newer)),
            HasSubstr(StrCat("version ", SqliteBackend::kSchemaVersion)),
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

// Reads `sql`'s first value from the main database file alone, as if the
// WAL file were not there.
std::string ValueInMainFile(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2(StrCat("file:", path, "?immutable=1").c_str(), &db,
                      SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                      nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
      value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return value;
}

TEST_F(SqliteBackendTest, CheckpointPages_One_CopiesACommitIntoTheMainFile) {
  std::unique_ptr<SqliteBackend> backend = Open({.checkpoint_pages = 1});
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->InsertFlow({"flow", J("{}"), kT0}).ok());
  ASSERT_TRUE(txn->Commit().ok());

  EXPECT_EQ(ValueInMainFile(path(), "SELECT count(*) FROM flows"), "1");
}

TEST_F(SqliteBackendTest, CheckpointPages_Default_LeavesACommitInTheWal) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->InsertFlow({"flow", J("{}"), kT0}).ok());
  ASSERT_TRUE(txn->Commit().ok());

  // Not even the schema has reached the main file yet.
  EXPECT_EQ(ValueInMainFile(path(), "SELECT count(*) FROM sqlite_schema"), "0");
  backend.reset();  // the last connection to close checkpoints
  EXPECT_EQ(ValueInMainFile(path(), "SELECT count(*) FROM flows"), "1");
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
  std::optional<RunRecord> got_run = GetRun(*txn, run_id);
  ASSERT_TRUE(got_run.has_value());
  EXPECT_EQ(got_run->input, run.input);
  ASSERT_TRUE(got_run->output.has_value());
  EXPECT_TRUE(got_run->output->is_null());
  EXPECT_EQ(got_run->finished_at, run.finished_at);

  absl::StatusOr<std::vector<std::vector<StepStateRecord>>> steps =
      txn->GetStepStates({&run_id, 1}, Fields::kAll);
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 1u);
  ASSERT_EQ((*steps)[0].size(), 1u);
  const StepStateRecord& got_step = (*steps)[0][0];
  EXPECT_EQ(got_step.status, StepStatus::kSkipped);
  EXPECT_EQ(got_step.initial_tasks, 0);
  EXPECT_EQ(got_step.remaining_tasks, std::nullopt);
  EXPECT_EQ(got_step.output, J("[]"));
  EXPECT_EQ(got_step.skip_reason, SkipReason::kConditionUnmet);
  EXPECT_EQ(got_step.finished_at, std::nullopt);

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
  OutgoingMessage message{J("{}"), kT0};
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
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusFromSqlite(SQLITE_IOERR_WRITE, nullptr, "op").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_FULL, nullptr, "op").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusFromSqlite(SQLITE_READONLY, nullptr, "op").code(),
            absl::StatusCode::kFailedPrecondition);
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

TEST_F(SqliteBackendTest, Begin_ThisThreadHoldsATransaction_FailsAtOnce) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> first = Begin(*backend);

  absl::StatusOr<std::unique_ptr<Transaction>> second = backend->Begin();

  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(first->ListFlows().ok());  // the open one is unharmed
  first.reset();
  EXPECT_NE(Begin(*backend), nullptr);
}

TEST_F(SqliteBackendTest, Begin_AnotherThreadHoldsATransaction_WaitsForIt) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> first = Begin(*backend);
  ASSERT_TRUE(first->InsertFlow({"f", J("{}"), kT0}).ok());
  absl::StatusOr<std::optional<FlowRecord>> seen;
  std::thread other([&] {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    if (txn != nullptr) seen = txn->GetFlow("f");
  });
  absl::SleepFor(absl::Milliseconds(20));  // let it start waiting
  ASSERT_TRUE(first->Commit().ok());
  other.join();

  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(seen->has_value());
}

TEST_F(SqliteBackendTest, Begin_OtherConnectionCommits_SeesItsWrite) {
  std::unique_ptr<SqliteBackend> backend = Open();
  RawDatabase other(path());
  other.Exec("BEGIN IMMEDIATE");
  other.Exec(
      "INSERT INTO flows (slug, alias, generation, created_at, definition) "
      "VALUES ('f', 'f', 1, 0, '{}')");
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
        const RunCounterDelta add_one{counter, 1};
        if (!txn.ok() || !(*txn)->AddRunRemainingSteps({&add_one, 1}).ok() ||
            !(*txn)->Commit().ok()) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_THAT(failures, ::testing::Each(0));
  std::unique_ptr<Transaction> txn = Begin(*backend);
  EXPECT_EQ(GetRun(*txn, counter)->remaining_steps, kThreads * kIncrements);
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
        txn->ReadMessages("shared", kT0, 1, absl::InfiniteFuture(),
                          Fields::kAll));
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
    const RunCounterDelta add_one{counter, 1};
    if (!(*txn)->AddRunRemainingSteps({&add_one, 1}).ok()) return 14;
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
  EXPECT_EQ(GetRun(*txn, counter)->remaining_steps, 2 * kRounds);
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

}  // namespace
}  // namespace sluice
