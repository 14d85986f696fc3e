// The Transaction contract (sluice/backend.h), run against every backend
// opened through OpenBackend(). Each test starts from an empty backend and
// passes every time explicitly, so nothing depends on a clock.
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/json/monotonic_resource.hpp"
#include "boost/json/parse.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/backends.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

#define SLUICE_TEST_CONCAT_INNER(a, b) a##b
#define SLUICE_TEST_CONCAT(a, b) SLUICE_TEST_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                                    \
  do {                                                     \
    const absl::Status _status = StatusOf(expr);           \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status; \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(SLUICE_TEST_CONCAT(_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, expr)              \
  auto statusor = (expr);                                           \
  ASSERT_TRUE(statusor.ok()) << #expr << ": " << statusor.status(); \
  lhs = std::move(*statusor)

absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}
template <typename T>
absl::StatusCode CodeOf(const T& result) {
  return StatusOf(result).code();
}
// The value, or T() after failing the test. Returns by value, so a range-for
// over it does not dangle.
template <typename T>
T ValueOf(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? std::move(*result) : T();
}

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
absl::Time At(int seconds) { return kT0 + absl::Seconds(seconds); }

Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

RunId RunNo(uint64_t n) { return RunId(0x5eed'0000'0000'0000, n); }

// A span over a temporary array, for the calls that may move from their
// input: `tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)}))`. The array lives
// until the end of the full expression.
template <typename T, size_t N>
std::span<T> Movable(T (&&items)[N]) {
  return std::span<T>(items, N);
}

// --- Single-record reads over the batch calls --------------------------------

absl::StatusOr<std::optional<RunRecord>> GetRun(Transaction& tx,
                                                const RunId& run_id,
                                                LockMode lock = LockMode::kNone,
                                                Fields fields = Fields::kAll) {
  absl::StatusOr<std::vector<std::optional<RunRecord>>> runs =
      tx.GetRuns(std::span(&run_id, 1), lock, fields);
  if (!runs.ok()) return runs.status();
  if (runs->size() != 1) {
    return absl::InternalError(
        StrCat("GetRuns returned ", runs->size(), " entries for 1 id"));
  }
  return std::move((*runs)[0]);
}

absl::StatusOr<std::vector<StepStateRecord>> GetSteps(
    Transaction& tx, const RunId& run_id, Fields fields = Fields::kAll) {
  absl::StatusOr<std::vector<std::vector<StepStateRecord>>> states =
      tx.GetStepStates(std::span(&run_id, 1), fields);
  if (!states.ok()) return states.status();
  if (states->size() != 1) {
    return absl::InternalError(
        StrCat("GetStepStates returned ", states->size(), " entries for 1 id"));
  }
  return std::move((*states)[0]);
}

RunCounterDelta RunDelta(uint64_t run, int remaining_steps) {
  return RunCounterDelta{.run_id = RunNo(run),
                         .remaining_steps = remaining_steps};
}

StepCounterDelta StepDelta(uint64_t run, int step_index, int remaining_tasks,
                           int remaining_deps) {
  return StepCounterDelta{.step = {RunNo(run), step_index},
                          .remaining_tasks = remaining_tasks,
                          .remaining_deps = remaining_deps};
}

// --- Whole-record descriptions, so a mismatch shows every field --------------

std::string Text(const std::optional<Json>& v) {
  return v.has_value() ? SerializeJson(*v) : "<none>";
}
std::string Text(std::optional<absl::Time> t) {
  return t.has_value() ? absl::FormatTime(*t) : "<none>";
}
std::string Text(std::optional<int> n) {
  return n.has_value() ? std::to_string(*n) : "<none>";
}

std::string Describe(const RunRecord& r) {
  return StrCat(r.run_id.ToString(), " ", r.flow_slug, " ", ToString(r.status),
                " in=", SerializeJson(r.input), " out=", Text(r.output),
                " remaining=", r.remaining_steps, " err=", r.error,
                " started=", absl::FormatTime(r.started_at),
                " finished=", Text(r.finished_at));
}

std::string Describe(const StepStateRecord& s) {
  return StrCat(s.run_id.ToString(), "/", s.step_index, " ", s.step_slug, " ",
                ToString(s.status), " deps=", s.remaining_deps,
                " initial=", Text(s.initial_tasks),
                " remaining=", Text(s.remaining_tasks), " out=", Text(s.output),
                " err=", s.error, " skip=", ToString(s.skip_reason),
                " started=", Text(s.started_at),
                " finished=", Text(s.finished_at));
}

std::string Describe(const TaskRecord& t) {
  return StrCat(t.key.run_id.ToString(), "/", t.key.step_index, "/",
                t.key.task_index, " ", t.flow_slug, " ", ToString(t.status),
                " attempts=", t.attempts, " in=", SerializeJson(t.input),
                " out=", Text(t.output), " err=", t.error,
                " msg=", t.queue_name, "#", t.message_id,
                " queued=", absl::FormatTime(t.queued_at),
                " started=", Text(t.started_at),
                " finished=", Text(t.finished_at), " stall=", Text(t.stall_at),
                " requeued=", t.requeued_count, " worker=", t.worker_id);
}

std::string Describe(const MessageRecord& m) {
  return StrCat("#", m.message_id, " reads=", m.read_count,
                " enqueued=", absl::FormatTime(m.enqueued_at),
                " visible=", absl::FormatTime(m.visible_at),
                " body=", SerializeJson(m.body));
}

std::string Describe(const OutboxReport& r) {
  return StrCat("#", r.report_id, " ", r.task.run_id.ToString(), "/",
                r.task.step_index, "/", r.task.task_index, " ", r.flow_slug,
                " ", ToString(r.kind),
                " created=", absl::FormatTime(r.created_at));
}

std::string Describe(const WorkerRecord& w) {
  return StrCat(w.worker_id, " ", w.queue_name, " ", w.flow_slug,
                " started=", absl::FormatTime(w.started_at),
                " beat=", absl::FormatTime(w.last_heartbeat_at),
                " stopped=", Text(w.stopped_at));
}

// --- Records
// -------------------------------------------------------------------

RunRecord MakeRun(uint64_t n, std::string flow = "greet",
                  absl::Time started_at = kT0) {
  return RunRecord{.run_id = RunNo(n),
                   .flow_slug = std::move(flow),
                   .input = J(R"({"name":"ada"})"),
                   .remaining_steps = 2,
                   .started_at = started_at};
}

StepStateRecord MakeStep(uint64_t run, int step_index) {
  return StepStateRecord{.run_id = RunNo(run),
                         .step_index = step_index,
                         .step_slug = StrCat("step", step_index),
                         .remaining_deps = 1};
}

// A queued task whose message is (queue, message_id).
TaskRecord MakeTask(uint64_t run, int step_index, int task_index,
                    int64_t message_id, std::string queue = "greet") {
  return TaskRecord{.key = {RunNo(run), step_index, task_index},
                    .flow_slug = "greet",
                    .input = J(R"({"n":1})"),
                    .queue_name = std::move(queue),
                    .message_id = message_id,
                    .queued_at = kT0};
}

// `task` claimed by worker "w1" at `at`, stalling at `stall_at`.
TaskRecord Started(TaskRecord task, absl::Time at, absl::Time stall_at) {
  task.status = TaskStatus::kStarted;
  task.attempts += 1;
  task.started_at = at;
  task.stall_at = stall_at;
  task.worker_id = "w1";
  return task;
}

TaskUpdate UpdateOf(const TaskRecord& before, TaskRecord after) {
  return TaskUpdate{.task = std::move(after),
                    .expected_status = before.status,
                    .expected_attempts = before.attempts};
}

OutboxReport MakeReport(int task_index, absl::Time created_at,
                        uint64_t run = 1) {
  return OutboxReport{.task = {RunNo(run), 0, task_index},
                      .flow_slug = "greet",
                      .kind = ReportKind::kCompleted,
                      .created_at = created_at};
}

OutgoingMessage Message(int n, absl::Time visible_at = kT0) {
  return OutgoingMessage{.body = Json(boost::json::object{{"n", n}}),
                         .visible_at = visible_at};
}

std::vector<int64_t> IdsOf(const std::vector<MessageRecord>& messages) {
  std::vector<int64_t> ids;
  for (const MessageRecord& m : messages) ids.push_back(m.message_id);
  return ids;
}

std::vector<int> TaskIndexesOf(const std::vector<TaskRecord>& tasks) {
  std::vector<int> indexes;
  for (const TaskRecord& t : tasks) indexes.push_back(t.key.task_index);
  return indexes;
}

std::vector<std::pair<int, int>> StepsAndTasksOf(
    const std::vector<TaskRecord>& tasks) {
  std::vector<std::pair<int, int>> keys;
  for (const TaskRecord& t : tasks) {
    keys.emplace_back(t.key.step_index, t.key.task_index);
  }
  return keys;
}

std::vector<int64_t> ReportIdsOf(const std::vector<OutboxReport>& reports) {
  std::vector<int64_t> ids;
  for (const OutboxReport& r : reports) ids.push_back(r.report_id);
  return ids;
}

// --- Fixture
// -------------------------------------------------------------------

class BackendContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string url = GetParam();
    if (url == "sqlite:") {
      char dir[] = "/tmp/sluice-contract-XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      temp_dir_ = dir;
      url = StrCat("sqlite:", temp_dir_, "/contract.db");
    }
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
    if (backend.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << url << ": " << backend.status();
    }
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  void TearDown() override {
    backend_.reset();
    if (!temp_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(temp_dir_, ignored);
    }
  }

  std::unique_ptr<Transaction> Begin() {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    return tx.ok() ? std::move(*tx) : nullptr;
  }

  // Runs `body` in a transaction and commits it.
  template <typename Body>
  void Committed(Body body) {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    body(*tx);
    ASSERT_OK(tx->Commit());
  }

  void CreateQueue(const std::string& name) {
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.CreateQueue({.name = name, .created_at = kT0}));
    });
  }

  // Sends `messages` to `queue` at `now` and commits; returns their ids.
  std::vector<int64_t> Send(std::vector<OutgoingMessage> messages,
                            absl::Time now = kT0,
                            std::string_view queue = "greet") {
    std::unique_ptr<Transaction> tx = Begin();
    absl::StatusOr<std::vector<int64_t>> ids =
        tx->SendMessages(queue, messages, now);
    EXPECT_TRUE(ids.ok()) << ids.status();
    EXPECT_TRUE(tx->Commit().ok());
    return ids.ok() ? *ids : std::vector<int64_t>(messages.size());
  }

  // A committed run 1 of flow "greet", steps 0 and 1, and the queue "greet".
  void SeedRun() {
    CreateQueue("greet");
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
      ASSERT_OK(tx.InsertStepStates(Movable({MakeStep(1, 0), MakeStep(1, 1)})));
    });
  }

  std::optional<TaskRecord> GetTask(Transaction& tx, const TaskKey& key) {
    absl::StatusOr<std::vector<std::optional<TaskRecord>>> tasks =
        tx.GetTasks({{key}}, Fields::kAll);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? (*tasks)[0] : std::nullopt;
  }

  std::optional<MessageLocation> Lookup(Transaction& tx, int64_t id,
                                        std::string_view queue = "greet") {
    absl::StatusOr<std::optional<MessageLocation>> found =
        tx.LookupMessage(queue, id);
    EXPECT_TRUE(found.ok()) << found.status();
    return found.ok() ? *found : std::nullopt;
  }

  std::unique_ptr<Backend> backend_;
  std::string temp_dir_;
};

INSTANTIATE_TEST_SUITE_P(Backends, BackendContractTest,
                         ::testing::Values("memory:", "sqlite:"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "memory:"
                                      ? std::string("Memory")
                                      : std::string("Sqlite");
                         });

// --- Transactions
// --------------------------------------------------------------

TEST_P(BackendContractTest, Commit_MakesChangesVisibleToTheNextTransaction) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });

  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::optional<RunRecord> run,
                       GetRun(*tx, RunNo(1), LockMode::kNone));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(Describe(*run), Describe(MakeRun(1)));
}

TEST_P(BackendContractTest, Changes_AreVisibleInsideTheirOwnTransaction) {
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK(tx->InsertRuns(Movable({MakeRun(1)})));
  ASSERT_OK_AND_ASSIGN(std::optional<RunRecord> run,
                       GetRun(*tx, RunNo(1), LockMode::kForUpdate));
  EXPECT_TRUE(run.has_value());
}

TEST_P(BackendContractTest, Drop_WithoutCommit_RollsBackInsertedRecords) {
  CreateQueue("greet");
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->InsertFlow({.slug = "greet", .definition = J("{}")}));
    ASSERT_OK(tx->CreateQueue({.name = "other", .created_at = kT0}));
    ASSERT_OK(tx->InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(tx->InsertStepStates(Movable({MakeStep(1, 0)})));
    ASSERT_OK(tx->InsertTasks(Movable({MakeTask(1, 0, 0, 1)})));
    ASSERT_OK(tx->UpsertWorker({.worker_id = "w1", .queue_name = "greet"}));
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_FALSE(tx->GetFlow("greet")->has_value());
  EXPECT_THAT(ValueOf(tx->QueueExists("other")), false);
  EXPECT_FALSE(GetRun(*tx, RunNo(1), LockMode::kNone)->has_value());
  EXPECT_THAT(ValueOf(GetSteps(*tx, RunNo(1))), IsEmpty());
  EXPECT_EQ(GetTask(*tx, {RunNo(1), 0, 0}), std::nullopt);
  EXPECT_THAT(ValueOf(tx->GetTasksByMessage("greet", {{1}}, Fields::kAll)),
              ElementsAre(::testing::Eq(std::nullopt)));
  EXPECT_THAT(ValueOf(tx->ListWorkers()), IsEmpty());
}

TEST_P(BackendContractTest, Drop_WithoutCommit_FreesKeysForReuse) {
  SeedRun();
  { ASSERT_OK(Begin()->InsertTasks(Movable({MakeTask(1, 0, 0, 7)}))); }
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->InsertRuns(Movable({MakeRun(2)})));
    ASSERT_OK(tx->CreateQueue({.name = "other", .created_at = kT0}));
  }
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, 7)})));
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
    ASSERT_OK(tx.CreateQueue({.name = "other", .created_at = kT0}));
  });
}

TEST_P(BackendContractTest, Drop_WithoutCommit_RollsBackUpdatesAndCounters) {
  SeedRun();
  const TaskRecord queued = MakeTask(1, 0, 0, 1);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({queued})));
    StepStateRecord started = MakeStep(1, 0);
    started.status = StepStatus::kStarted;
    ASSERT_OK(tx.UpdateStepStates(Movable({started})));
    ASSERT_OK(tx.AddStepCounters({{StepDelta(1, 0, 1, 0)}}));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps_before,
                       GetSteps(*Begin(), RunNo(1)));
  {
    std::unique_ptr<Transaction> tx = Begin();
    RunRecord run = MakeRun(1);
    run.status = RunStatus::kCompleted;
    run.output = J("[1]");
    run.error = "x";
    run.finished_at = At(5);
    ASSERT_OK(tx->UpdateRuns(Movable({run})));
    ASSERT_OK(tx->AddRunRemainingSteps({{RunDelta(1, -1)}}));
    StepStateRecord step = steps_before[0];
    step.status = StepStatus::kCompleted;
    step.output = J("[]");
    ASSERT_OK(tx->UpdateStepStates(Movable({step})));
    ASSERT_OK(tx->AddStepCounters(
        {{StepDelta(1, 0, -1, 0), StepDelta(1, 1, 4, -1)}}));
    ASSERT_OK_AND_ASSIGN(std::vector<bool> applied,
                         tx->UpdateTasks(Movable({UpdateOf(
                             queued, Started(queued, At(1), At(60)))})));
    ASSERT_THAT(applied, ElementsAre(true));
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(MakeRun(1)));
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps_after,
                       GetSteps(*tx, RunNo(1)));
  ASSERT_EQ(steps_after.size(), 2u);
  EXPECT_EQ(Describe(steps_after[0]), Describe(steps_before[0]));
  EXPECT_EQ(Describe(steps_after[1]), Describe(steps_before[1]));
  EXPECT_EQ(steps_after[1].remaining_tasks, std::nullopt);  // unset again
  EXPECT_EQ(Describe(*GetTask(*tx, queued.key)), Describe(queued));
  EXPECT_THAT(ValueOf(tx->FindStalledTasks(At(1000), 10, Fields::kAll)),
              IsEmpty());
  EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(1000), 10)), IsEmpty());
}

TEST_P(BackendContractTest, Drop_WithoutCommit_RollsBackQueueChanges) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  std::vector<std::string> before;
  {
    std::unique_ptr<Transaction> tx = Begin();
    for (int64_t id : ids) before.push_back(Describe(Lookup(*tx, id)->message));
  }
  int64_t rolled_back_id = 0;
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK_AND_ASSIGN(
        std::vector<MessageRecord> read,
        tx->ReadMessages("greet", At(1), 2, At(30), Fields::kAll));
    ASSERT_THAT(IdsOf(read), ElementsAre(ids[0], ids[1]));
    ASSERT_OK(tx->SetVisibility(
        "greet", {{{.message_id = ids[2], .visible_at = At(100)}}}));
    ASSERT_OK(tx->ArchiveMessages("greet", {{ids[0]}}, At(1)));
    ASSERT_OK_AND_ASSIGN(
        std::vector<int64_t> sent,
        tx->SendMessages("greet", Movable({Message(4)}), At(1)));
    rolled_back_id = sent[0];
  }
  std::unique_ptr<Transaction> tx = Begin();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::optional<MessageLocation> found = Lookup(*tx, ids[i]);
    ASSERT_TRUE(found.has_value());
    EXPECT_FALSE(found->archived);
    EXPECT_EQ(Describe(found->message), before[i]);
  }
  EXPECT_EQ(Lookup(*tx, rolled_back_id), std::nullopt);
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", At(1), 10, At(30), Fields::kAll));
  EXPECT_THAT(IdsOf(read), ElementsAre(ids[0], ids[1], ids[2]));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> next,
                       tx->SendMessages("greet", Movable({Message(5)}), At(1)));
  EXPECT_GT(next[0], ids[2]);
}

TEST_P(BackendContractTest, Drop_WithoutCommit_RollsBackOutboxChanges) {
  std::vector<int64_t> ids;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        ids, tx.AppendReports({{MakeReport(0, kT0), MakeReport(1, kT0)}}));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->TakeReports({{ids[0]}}));
    ASSERT_OK(tx->TakeStaleReports(At(1), 10));
    ASSERT_OK(tx->AppendReports({{MakeReport(2, kT0)}}));
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->CountReports()), 2);
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxReport> taken,
                       tx->TakeReports({{ids[0], ids[1]}}));
  EXPECT_THAT(ReportIdsOf(taken), ElementsAre(ids[0], ids[1]));
}

TEST_P(BackendContractTest, Drop_WithoutCommit_RollsBackWorkerReplacement) {
  const WorkerRecord first{.worker_id = "w1",
                           .queue_name = "greet",
                           .flow_slug = "greet",
                           .started_at = kT0,
                           .last_heartbeat_at = kT0};
  Committed([&](Transaction& tx) { ASSERT_OK(tx.UpsertWorker(first)); });
  {
    std::unique_ptr<Transaction> tx = Begin();
    WorkerRecord beat = first;
    beat.last_heartbeat_at = At(10);
    ASSERT_OK(tx->UpsertWorker(beat));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<WorkerRecord> workers,
                       Begin()->ListWorkers());
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(Describe(workers[0]), Describe(first));
}

TEST_P(BackendContractTest, Drop_AfterALargeTransaction_RestoresEveryRecord) {
  CreateQueue("greet");
  constexpr int kCount = 1500;
  // Runs 1..kCount, each with one task whose message is then archived.
  auto insert_all = [&](Transaction& tx) {
    std::vector<RunRecord> runs;
    std::vector<OutgoingMessage> messages;
    for (int i = 1; i <= kCount; ++i) {
      runs.push_back(MakeRun(i));
      messages.push_back(Message(i));
    }
    ASSERT_OK(tx.InsertRuns(runs));
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids,
                         tx.SendMessages("greet", messages, kT0));
    std::vector<TaskRecord> tasks;
    for (int i = 1; i <= kCount; ++i) {
      tasks.push_back(MakeTask(i, 0, 0, ids[i - 1]));
    }
    ASSERT_OK(tx.InsertTasks(tasks));
    ASSERT_OK(tx.ArchiveMessages("greet", ids, At(1)));
  };
  {
    std::unique_ptr<Transaction> tx = Begin();
    insert_all(*tx);
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_THAT(ValueOf(tx->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll)),
                IsEmpty());
    EXPECT_THAT(ValueOf(tx->ListTasks(RunNo(kCount))), IsEmpty());
  }
  Committed(insert_all);
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(
      ValueOf(tx->ListRuns(RunQuery::OfFlow("", 2 * kCount), Fields::kAll))
          .size(),
      static_cast<size_t>(kCount));
  EXPECT_THAT(TaskIndexesOf(ValueOf(tx->ListTasks(RunNo(kCount)))),
              ElementsAre(0));
}

TEST_P(BackendContractTest, FailedCall_RollsBackEarlierCallsOfItsTransaction) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->InsertRuns(Movable({MakeRun(2)})));
    EXPECT_EQ(CodeOf(tx->InsertRuns(Movable({MakeRun(3), MakeRun(1)}))),
              absl::StatusCode::kAlreadyExists);
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_FALSE(GetRun(*tx, RunNo(2), LockMode::kNone)->has_value());
  EXPECT_FALSE(GetRun(*tx, RunNo(3), LockMode::kNone)->has_value());
  EXPECT_TRUE(GetRun(*tx, RunNo(1), LockMode::kNone)->has_value());
}

TEST_P(BackendContractTest, CallsAfterCommit_FailWithFailedPrecondition) {
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK(tx->Commit());
  EXPECT_EQ(CodeOf(tx->Commit()), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeOf(tx->InsertRuns(Movable({MakeRun(1)}))),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeOf(tx->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll)),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(BackendContractTest, CallsAfterAFailedCall_FailWithFailedPrecondition) {
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_EQ(CodeOf(tx->UpdateRuns(Movable({MakeRun(1)}))),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(GetRun(*tx, RunNo(1), LockMode::kNone)),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeOf(tx->Commit()), absl::StatusCode::kFailedPrecondition);
}

TEST_P(BackendContractTest, Begin_WaitsForTheOpenTransactionAndSeesItsCommit) {
  std::unique_ptr<Transaction> first = Begin();
  ASSERT_OK(first->InsertRuns(Movable({MakeRun(1)})));
  std::optional<RunRecord> seen;
  std::thread second([&] {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return;
    absl::StatusOr<std::optional<RunRecord>> run =
        GetRun(*tx, RunNo(1), LockMode::kNone);
    if (run.ok()) seen = *run;
  });
  ASSERT_OK(first->Commit());
  second.join();
  EXPECT_TRUE(seen.has_value());
}

TEST_P(BackendContractTest,
       Begin_OnAThreadWithAnOpenTransaction_FailsWithFailedPrecondition) {
  std::unique_ptr<Transaction> first = Begin();
  ASSERT_OK(first->InsertRuns(Movable({MakeRun(1)})));
  EXPECT_EQ(backend_->Begin().status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The open transaction is unharmed.
  ASSERT_OK(first->Commit());
  EXPECT_TRUE(ValueOf(GetRun(*Begin(), RunNo(1))).has_value());
}

// --- Flows and the queue registry --------------------------------------------

TEST_P(BackendContractTest, InsertFlow_ThenGetFlow_ReturnsIt) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.LockFlowSlug("greet"));
    ASSERT_OK(tx.InsertFlow({.slug = "greet",
                             .definition = J(R"({"steps":[{"slug":"a"}]})"),
                             .created_at = At(3)}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::optional<FlowRecord> flow, tx->GetFlow("greet"));
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->slug, "greet");
  EXPECT_EQ(SerializeJson(flow->definition), R"({"steps":[{"slug":"a"}]})");
  EXPECT_EQ(flow->created_at, At(3));
  EXPECT_FALSE(tx->GetFlow("other")->has_value());
}

TEST_P(BackendContractTest, InsertFlow_ExistingSlug_FailsWithAlreadyExists) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertFlow({.slug = "greet", .definition = J("1")}));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->InsertFlow({.slug = "greet", .definition = J("2")})),
              absl::StatusCode::kAlreadyExists);
  }
  ASSERT_OK_AND_ASSIGN(std::optional<FlowRecord> flow,
                       Begin()->GetFlow("greet"));
  EXPECT_EQ(SerializeJson(flow->definition), "1");
}

TEST_P(BackendContractTest, ListFlows_ReturnsEveryFlow) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertFlow({.slug = "b", .definition = J("{}")}));
    ASSERT_OK(tx.InsertFlow({.slug = "a", .definition = J("{}")}));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<FlowRecord> flows, Begin()->ListFlows());
  std::vector<std::string> slugs;
  for (const FlowRecord& f : flows) slugs.push_back(f.slug);
  EXPECT_THAT(slugs, UnorderedElementsAre("a", "b"));
}

TEST_P(BackendContractTest, CreateQueue_RegistersAndCreatesTheQueue) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.CreateQueue(
        {.name = "greet", .owner_flow = "greet", .created_at = At(2)}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::optional<QueueRecord> queue, tx->GetQueue("greet"));
  ASSERT_TRUE(queue.has_value());
  EXPECT_EQ(queue->name, "greet");
  EXPECT_EQ(queue->owner_flow, "greet");
  EXPECT_EQ(queue->created_at, At(2));
  EXPECT_EQ(ValueOf(tx->QueueExists("greet")), true);
  EXPECT_FALSE(tx->GetQueue("other")->has_value());
  EXPECT_EQ(ValueOf(tx->QueueExists("other")), false);
}

TEST_P(BackendContractTest, CreateQueue_ExistingName_FailsAndKeepsTheOwner) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.CreateQueue({.name = "shared", .created_at = kT0}));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(
        CodeOf(tx->CreateQueue(
            {.name = "shared", .owner_flow = "greet", .created_at = kT0})),
        absl::StatusCode::kAlreadyExists);
  }
  ASSERT_OK_AND_ASSIGN(std::optional<QueueRecord> queue,
                       Begin()->GetQueue("shared"));
  EXPECT_EQ(queue->owner_flow, "");
}

// --- Runs
// ------------------------------------------------------------------------

TEST_P(BackendContractTest, InsertRuns_ThenGetRun_ReturnsEveryField) {
  RunRecord run = MakeRun(1);
  run.input = J("false");  // a scalar input stays exactly as given
  run.output = J(R"({"a":0})");
  run.error = "boom";
  run.status = RunStatus::kFailed;
  run.finished_at = At(9);
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({run}))); });
  ASSERT_OK_AND_ASSIGN(std::optional<RunRecord> got,
                       GetRun(*Begin(), RunNo(1), LockMode::kNone));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(Describe(*got), Describe(run));
}

TEST_P(BackendContractTest, GetRun_UnknownId_ReturnsNullopt) {
  ASSERT_OK_AND_ASSIGN(std::optional<RunRecord> run,
                       GetRun(*Begin(), RunNo(1), LockMode::kNone));
  EXPECT_EQ(run, std::nullopt);
}

TEST_P(BackendContractTest, InsertRuns_ExistingId_FailsWithAlreadyExists) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(CodeOf(tx->InsertRuns(Movable({MakeRun(2), MakeRun(1)}))),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertRuns_SameIdTwiceInOneBatch_FailsAndAddsNone) {
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->InsertRuns(Movable({MakeRun(1), MakeRun(1)}))),
              absl::StatusCode::kAlreadyExists);
  }
  ASSERT_OK_AND_ASSIGN(
      std::vector<RunRecord> runs,
      Begin()->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll));
  EXPECT_THAT(runs, IsEmpty());
}

TEST_P(BackendContractTest, GetRuns_ReturnsOneEntryPerIdInOrder) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2, "other")})));
  });
  for (LockMode lock : {LockMode::kNone, LockMode::kForUpdate}) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<std::optional<RunRecord>> runs,
        Begin()->GetRuns({{RunNo(2), RunNo(7), RunNo(1), RunNo(2)}}, lock,
                         Fields::kAll));
    ASSERT_EQ(runs.size(), 4u);
    ASSERT_TRUE(runs[0].has_value());
    EXPECT_EQ(Describe(*runs[0]), Describe(MakeRun(2, "other")));
    EXPECT_EQ(runs[1], std::nullopt);
    ASSERT_TRUE(runs[2].has_value());
    EXPECT_EQ(Describe(*runs[2]), Describe(MakeRun(1)));
    ASSERT_TRUE(runs[3].has_value());
    EXPECT_EQ(runs[3]->run_id, RunNo(2));
  }
  EXPECT_THAT(ValueOf(Begin()->GetRuns({}, LockMode::kNone, Fields::kAll)),
              IsEmpty());
}

TEST_P(BackendContractTest, GetRuns_NoPayloads_LeavesInputAndOutputEmpty) {
  RunRecord run = MakeRun(1);
  run.status = RunStatus::kCompleted;
  run.output = J(R"({"big":"payload"})");
  run.error = "kept";
  run.finished_at = At(3);
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({run}))); });
  ASSERT_OK_AND_ASSIGN(
      std::optional<RunRecord> got,
      GetRun(*Begin(), RunNo(1), LockMode::kForUpdate, Fields::kNoPayloads));
  ASSERT_TRUE(got.has_value());
  RunRecord expected = run;
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(*got), Describe(expected));
}

TEST_P(BackendContractTest, UpdateRuns_WritesOnlyTheMutableFields) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)})));
  });
  RunRecord update = MakeRun(1, "other_flow", At(50));
  update.input = J("[]");
  update.status = RunStatus::kCompleted;
  update.output = J("null");
  update.remaining_steps = 0;  // counters move only by AddRunRemainingSteps
  update.error = "none";
  update.finished_at = At(7);
  RunRecord failed = MakeRun(2);
  failed.status = RunStatus::kFailed;
  failed.error = "boom";
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpdateRuns(Movable({update, failed})));
  });

  RunRecord expected = MakeRun(1);
  expected.status = RunStatus::kCompleted;
  expected.output = J("null");
  expected.error = "none";
  expected.finished_at = At(7);
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(expected));
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(2)))), Describe(failed));
}

TEST_P(BackendContractTest, UpdateRuns_UnknownRun_FailsAndUpdatesNone) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  RunRecord completed = MakeRun(1);
  completed.status = RunStatus::kCompleted;
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->UpdateRuns(Movable({completed, MakeRun(2)}))),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(ValueOf(GetRun(*Begin(), RunNo(1)))->status, RunStatus::kStarted);
}

TEST_P(BackendContractTest, AddRunRemainingSteps_AddsEachDeltaInOrder) {
  Committed([](Transaction& tx) {
    // remaining_steps = 2 each.
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)})));
    EXPECT_THAT(
        ValueOf(tx.AddRunRemainingSteps({{RunDelta(1, -1), RunDelta(2, 5),
                                          RunDelta(1, 3), RunDelta(2, 0)}})),
        ElementsAre(1, 7, 4, 7));
    EXPECT_THAT(ValueOf(tx.AddRunRemainingSteps({})), IsEmpty());
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(1)))->remaining_steps, 4);
  EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(2)))->remaining_steps, 7);
}

TEST_P(BackendContractTest, AddRunRemainingSteps_UnknownRun_FailsWithNotFound) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(
        CodeOf(tx->AddRunRemainingSteps({{RunDelta(1, -1), RunDelta(2, 1)}})),
        absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(ValueOf(GetRun(*Begin(), RunNo(1)))->remaining_steps, 2);
}

TEST_P(BackendContractTest, ListRuns_ReturnsNewestFirstUpToTheLimit) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({MakeRun(1, "greet", At(10)), MakeRun(2, "greet", At(30)),
                 MakeRun(3, "greet", At(20))})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<RunRecord> all,
      tx->ListRuns(RunQuery::OfFlow("greet", 10), Fields::kAll));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].run_id, RunNo(2));
  EXPECT_EQ(all[1].run_id, RunNo(3));
  EXPECT_EQ(all[2].run_id, RunNo(1));
  ASSERT_OK_AND_ASSIGN(
      std::vector<RunRecord> two,
      tx->ListRuns(RunQuery::OfFlow("greet", 2), Fields::kAll));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].run_id, RunNo(3));
  EXPECT_THAT(ValueOf(tx->ListRuns(RunQuery::OfFlow("greet", 0), Fields::kAll)),
              IsEmpty());
}

TEST_P(BackendContractTest, ListRuns_FiltersByFlowOrListsAllFlows) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({MakeRun(1, "a", At(1)), MakeRun(2, "b", At(2)),
                 MakeRun(3, "a", At(3)), MakeRun(4, "c", At(4))})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<RunRecord> a,
                       tx->ListRuns(RunQuery::OfFlow("a", 10), Fields::kAll));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].run_id, RunNo(3));
  EXPECT_EQ(a[1].run_id, RunNo(1));
  ASSERT_OK_AND_ASSIGN(std::vector<RunRecord> all,
                       tx->ListRuns(RunQuery::OfFlow("", 3), Fields::kAll));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].run_id, RunNo(4));
  EXPECT_EQ(all[1].run_id, RunNo(3));
  EXPECT_EQ(all[2].run_id, RunNo(2));
  EXPECT_THAT(ValueOf(tx->ListRuns(RunQuery::OfFlow("none", 10), Fields::kAll)),
              IsEmpty());
}

TEST_P(BackendContractTest, ListRuns_SameStartTime_ListsTheLaterInsertFirst) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(5), MakeRun(2)})));
  });
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(9), MakeRun(1)})));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<RunRecord> runs,
      Begin()->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll));
  std::vector<RunId> ids;
  for (const RunRecord& r : runs) ids.push_back(r.run_id);
  EXPECT_THAT(ids, ElementsAre(RunNo(1), RunNo(9), RunNo(2), RunNo(5)));
}

// --- Finished runs and deletion
// -----------------------------------------------

// Run `n` ended with `status` at `finished_at`, with an output.
RunRecord Ended(uint64_t n, RunStatus status, absl::Time finished_at) {
  RunRecord run = MakeRun(n);
  run.status = status;
  run.output = J(R"({"done":true})");
  run.remaining_steps = 0;
  run.finished_at = finished_at;
  return run;
}

std::vector<RunId> RunIdsOf(const std::vector<RunRecord>& runs) {
  std::vector<RunId> ids;
  for (const RunRecord& r : runs) ids.push_back(r.run_id);
  return ids;
}

TEST_P(BackendContractTest,
       FindFinishedRuns_ListsEndedRunsEarliestFirstWithoutPayloads) {
  RunRecord started_with_a_finish_time = MakeRun(7);
  started_with_a_finish_time.finished_at = At(5);
  Committed([&](Transaction& tx) {
    // Runs 5 and 3 end at the same time; 5 is inserted first.
    ASSERT_OK(
        tx.InsertRuns(Movable({Ended(5, RunStatus::kCompleted, At(20)),
                               Ended(1, RunStatus::kCompleted, At(30)),
                               Ended(2, RunStatus::kFailed, At(10)), MakeRun(4),
                               Ended(6, RunStatus::kCompleted, At(50)),
                               Ended(3, RunStatus::kCancelled, At(20)),
                               started_with_a_finish_time})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<RunRecord> finished,
                       tx->FindFinishedRuns(At(50), 10));
  EXPECT_THAT(RunIdsOf(finished),
              ElementsAre(RunNo(2), RunNo(5), RunNo(3), RunNo(1)));
  RunRecord expected = Ended(2, RunStatus::kFailed, At(10));
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(finished[0]), Describe(expected));
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(50), 2))),
              ElementsAre(RunNo(2), RunNo(5)));
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(51), 10))),
              ElementsAre(RunNo(2), RunNo(5), RunNo(3), RunNo(1), RunNo(6)));
  EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(10), 10)), IsEmpty());
  EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(50), 0)), IsEmpty());
  EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(50), -1)), IsEmpty());
}

TEST_P(BackendContractTest, FindFinishedRuns_FollowsUpdateRunsAndRollback) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({MakeRun(1), Ended(2, RunStatus::kCompleted, At(20))})));
  });
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.UpdateRuns(Movable({Ended(1, RunStatus::kFailed, At(10))})));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    RunRecord reopened = MakeRun(2);  // no longer ended
    ASSERT_OK(tx->UpdateRuns(
        Movable({Ended(1, RunStatus::kFailed, At(40)), reopened})));
    EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(100), 10))),
                ElementsAre(RunNo(1)));
  }
  EXPECT_THAT(RunIdsOf(ValueOf(Begin()->FindFinishedRuns(At(100), 10))),
              ElementsAre(RunNo(1), RunNo(2)));
}

TEST_P(BackendContractTest, DeleteRuns_UnknownIds_DeleteNothing) {
  SeedRun();
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->DeleteRuns({{RunNo(7), RunNo(8)}})), 0);
  EXPECT_EQ(ValueOf(tx->DeleteRuns({})), 0);
  EXPECT_TRUE(ValueOf(GetRun(*tx, RunNo(1))).has_value());
  EXPECT_EQ(ValueOf(GetSteps(*tx, RunNo(1))).size(), 2u);
}

// --- Step states
// -----------------------------------------------------------------

std::vector<std::pair<int, int>> PairsOf(
    const std::vector<StepCounters>& counters) {
  std::vector<std::pair<int, int>> pairs;
  for (const StepCounters& c : counters) {
    pairs.emplace_back(c.remaining_tasks, c.remaining_deps);
  }
  return pairs;
}

TEST_P(BackendContractTest, GetStepStates_ReturnsEveryFieldByStepIndex) {
  StepStateRecord done = MakeStep(1, 0);
  done.status = StepStatus::kSkipped;
  done.initial_tasks = 0;
  done.remaining_tasks = 0;
  done.output = J(R"("")");
  done.error = "e";
  done.skip_reason = SkipReason::kConditionUnmet;
  done.started_at = At(1);
  done.finished_at = At(2);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(
        tx.InsertStepStates(Movable({MakeStep(1, 2), done, MakeStep(1, 1)})));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(Describe(steps[0]), Describe(done));
  EXPECT_EQ(Describe(steps[1]), Describe(MakeStep(1, 1)));
  EXPECT_EQ(Describe(steps[2]), Describe(MakeStep(1, 2)));
}

TEST_P(BackendContractTest, GetStepStates_ReturnsOneEntryPerRunInOrder) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2), MakeRun(3)})));
    ASSERT_OK(tx.InsertStepStates(
        Movable({MakeStep(2, 1), MakeStep(1, 0), MakeStep(2, 0)})));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::vector<StepStateRecord>> states,
      Begin()->GetStepStates({{RunNo(2), RunNo(9), RunNo(3), RunNo(1)}},
                             Fields::kAll));
  ASSERT_EQ(states.size(), 4u);
  ASSERT_EQ(states[0].size(), 2u);
  EXPECT_EQ(Describe(states[0][0]), Describe(MakeStep(2, 0)));
  EXPECT_EQ(Describe(states[0][1]), Describe(MakeStep(2, 1)));
  EXPECT_THAT(states[1], IsEmpty());  // no such run
  EXPECT_THAT(states[2], IsEmpty());  // a run without step states
  ASSERT_EQ(states[3].size(), 1u);
  EXPECT_EQ(Describe(states[3][0]), Describe(MakeStep(1, 0)));
}

TEST_P(BackendContractTest, GetStepStates_NoPayloads_LeavesOutputsEmpty) {
  StepStateRecord done = MakeStep(1, 0);
  done.status = StepStatus::kCompleted;
  done.output = J(R"({"big":"payload"})");
  done.error = "kept";
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(tx.InsertStepStates(Movable({done})));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1), Fields::kNoPayloads));
  ASSERT_EQ(steps.size(), 1u);
  StepStateRecord expected = done;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(steps[0]), Describe(expected));
}

TEST_P(BackendContractTest, GetStepStates_UnknownRun_ReturnsNone) {
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_THAT(steps, IsEmpty());
}

TEST_P(BackendContractTest,
       InsertStepStates_ExistingStep_FailsWithAlreadyExists) {
  SeedRun();
  EXPECT_EQ(CodeOf(Begin()->InsertStepStates(Movable({MakeStep(1, 1)}))),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertStepStates_UnknownRun_FailsWithNotFound) {
  EXPECT_EQ(CodeOf(Begin()->InsertStepStates(Movable({MakeStep(1, 0)}))),
            absl::StatusCode::kNotFound);
}

TEST_P(BackendContractTest, UpdateStepStates_WritesAllButTheCounters) {
  SeedRun();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AddStepCounters({{StepDelta(1, 1, 4, 0)}}));
  });
  StepStateRecord update = MakeStep(1, 1);
  update.step_slug = "ignored";
  update.remaining_deps = 42;
  update.status = StepStatus::kStarted;
  update.initial_tasks = 3;
  update.remaining_tasks = 3;
  update.output = J("0");
  update.error = "e";
  update.skip_reason = SkipReason::kHandlerFailed;
  update.started_at = At(4);
  update.finished_at = At(5);
  StepStateRecord unset_counters = MakeStep(1, 0);
  unset_counters.remaining_tasks = 9;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpdateStepStates(Movable({update, unset_counters})));
  });

  StepStateRecord expected = update;
  expected.step_slug = "step1";
  expected.remaining_deps = 1;
  expected.remaining_tasks = 4;
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(Describe(steps[1]), Describe(expected));
  EXPECT_EQ(Describe(steps[0]), Describe(MakeStep(1, 0)));
}

TEST_P(BackendContractTest, UpdateStepStates_UnknownStep_FailsWithNotFound) {
  SeedRun();
  EXPECT_EQ(CodeOf(Begin()->UpdateStepStates(Movable({MakeStep(1, 5)}))),
            absl::StatusCode::kNotFound);
}

TEST_P(BackendContractTest, AddStepCounters_AddsEachDeltaInOrder) {
  SeedRun();  // remaining_deps = 1 each, remaining_tasks unset
  Committed([](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<StepCounters> counters,
        tx.AddStepCounters({{StepDelta(1, 0, 5, 0), StepDelta(1, 0, -2, 2),
                             StepDelta(1, 1, 0, -1), StepDelta(1, 0, -3, 0)}}));
    EXPECT_THAT(PairsOf(counters),
                ElementsAre(std::pair(5, 1), std::pair(3, 3), std::pair(0, 0),
                            std::pair(0, 3)));
    EXPECT_THAT(ValueOf(tx.AddStepCounters({})), IsEmpty());
  });
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(steps[0].remaining_tasks, 0);
  EXPECT_EQ(steps[0].remaining_deps, 3);
  EXPECT_EQ(steps[0].initial_tasks, std::nullopt);
  // An unset remaining_tasks counts as 0 and becomes set, even by a 0 delta.
  EXPECT_EQ(steps[1].remaining_tasks, 0);
  EXPECT_EQ(steps[1].remaining_deps, 0);
}

TEST_P(BackendContractTest, AddStepCounters_RolledBack_LeaveTasksUnset) {
  SeedRun();  // remaining_tasks unset
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AddStepCounters({{StepDelta(1, 0, 3, 0)}}));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(
        tx->AddStepCounters({{StepDelta(1, 1, 2, 0), StepDelta(1, 0, -1, 4)}}));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(steps[0].remaining_tasks, 3);
  EXPECT_EQ(steps[0].remaining_deps, 1);
  EXPECT_EQ(steps[1].remaining_tasks, std::nullopt);  // rolled back to unset
}

TEST_P(BackendContractTest, AddStepCounters_UnknownStep_FailsAndAddsNone) {
  SeedRun();
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->AddStepCounters(
                  {{StepDelta(1, 0, 1, 1), StepDelta(1, 7, 1, 0)}})),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(CodeOf(Begin()->AddStepCounters({{StepDelta(2, 0, 1, 0)}})),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(Describe(steps[0]), Describe(MakeStep(1, 0)));
}

// --- Tasks
// -----------------------------------------------------------------------

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
  EXPECT_EQ(CodeOf(Begin()->InsertTasks(Movable({MakeTask(1, 0, 0, 2)}))),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertTasks_UnknownRun_FailsWithNotFound) {
  SeedRun();
  EXPECT_EQ(CodeOf(Begin()->InsertTasks(Movable({MakeTask(2, 0, 0, 1)}))),
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
    EXPECT_EQ(CodeOf(tx->InsertTasks(
                  Movable({MakeTask(1, 1, 0, 2), MakeTask(1, 1, 1, 1)}))),
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
  expected.message_id = task.message_id;
  expected.queued_at = task.queued_at;
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*GetTask(*tx, task.key)), Describe(expected));
  EXPECT_THAT(ValueOf(tx->GetTasksByMessage("greet", {{1}}, Fields::kAll)),
              ElementsAre(::testing::Optional(::testing::_)));
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
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(
        Movable({Started(MakeTask(1, 0, 0, 1), At(0), At(30)),
                 Started(MakeTask(1, 0, 1, 2), At(0), At(10)),
                 Started(MakeTask(1, 0, 2, 3), At(0), At(50)),  // stalls at now
                 Started(MakeTask(1, 0, 3, 4), At(0), At(20)),
                 queued_with_stall, completed})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> stalled,
                       tx->FindStalledTasks(At(50), 10, Fields::kAll));
  EXPECT_THAT(TaskIndexesOf(stalled), ElementsAre(1, 3, 0));
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> first_two,
                       tx->FindStalledTasks(At(50), 2, Fields::kAll));
  EXPECT_THAT(TaskIndexesOf(first_two), ElementsAre(1, 3));
  EXPECT_THAT(ValueOf(tx->FindStalledTasks(At(10), 10, Fields::kAll)),
              IsEmpty());
}

TEST_P(BackendContractTest,
       FindStalledTasks_SameStallTime_OrdersByRunInsertThenKey) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(9)})));
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
    ASSERT_OK(
        tx.InsertTasks(Movable({Started(MakeTask(2, 0, 0, 1), kT0, At(10)),
                                Started(MakeTask(9, 1, 0, 2), kT0, At(10)),
                                Started(MakeTask(9, 0, 3, 3), kT0, At(10)),
                                Started(MakeTask(9, 0, 1, 4), kT0, At(10))})));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> stalled,
                       Begin()->FindStalledTasks(At(11), 10, Fields::kAll));
  std::vector<std::string> keys;
  for (const TaskRecord& t : stalled) {
    keys.push_back(StrCat(t.key.run_id == RunNo(9) ? "r9/" : "r2/",
                          t.key.step_index, "/", t.key.task_index));
  }
  EXPECT_THAT(keys, ElementsAre("r9/0/1", "r9/0/3", "r9/1/0", "r2/0/0"));
}

TEST_P(BackendContractTest, FindStalledTasks_FollowsUpdatedStallTimes) {
  SeedRun();
  const TaskRecord a = Started(MakeTask(1, 0, 0, 1), At(0), At(10));
  const TaskRecord b = Started(MakeTask(1, 0, 1, 2), At(0), At(20));
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable({a, b})));
  });
  TaskRecord a_extended = a;  // a heartbeat
  a_extended.stall_at = At(100);
  TaskRecord b_done = b;
  b_done.status = TaskStatus::kCompleted;
  b_done.stall_at = std::nullopt;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpdateTasks(
        Movable({UpdateOf(a, a_extended), UpdateOf(b, b_done)})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->FindStalledTasks(At(50), 10, Fields::kAll)),
              IsEmpty());
  EXPECT_THAT(
      TaskIndexesOf(ValueOf(tx->FindStalledTasks(At(101), 10, Fields::kAll))),
      ElementsAre(0));
}

TEST_P(BackendContractTest,
       FindStalledTasks_NoPayloads_LeavesInputAndOutputEmpty) {
  SeedRun();
  TaskRecord task = Started(MakeTask(1, 0, 0, 1), At(0), At(10));
  task.output = J(R"({"partial":1})");
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({task}))); });
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> stalled,
      Begin()->FindStalledTasks(At(11), 10, Fields::kNoPayloads));
  ASSERT_EQ(stalled.size(), 1u);
  TaskRecord expected = task;
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(stalled[0]), Describe(expected));
}

// --- Outbox
// ----------------------------------------------------------------------

TEST_P(BackendContractTest, AppendReports_AssignsIncreasingIds) {
  std::vector<int64_t> first;
  std::vector<int64_t> second;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        first, tx.AppendReports({{MakeReport(0, kT0), MakeReport(1, kT0)}}));
  });
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(second, tx.AppendReports({{MakeReport(2, kT0)}}));
  });
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_LT(first[0], first[1]);
  EXPECT_LT(first[1], second[0]);
  EXPECT_EQ(ValueOf(Begin()->CountReports()), 3);
}

TEST_P(BackendContractTest, TakeReports_DeletesAndReturnsThosePresentById) {
  std::vector<int64_t> ids;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        ids, tx.AppendReports({{MakeReport(0, At(1)), MakeReport(1, At(2)),
                                MakeReport(2, At(3))}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxReport> taken,
                       tx->TakeReports({{ids[2], ids[0], ids[2] + 1000}}));
  ASSERT_THAT(ReportIdsOf(taken), ElementsAre(ids[0], ids[2]));
  OutboxReport expected = MakeReport(0, At(1));
  expected.report_id = ids[0];
  EXPECT_EQ(Describe(taken[0]), Describe(expected));
  EXPECT_EQ(ValueOf(tx->CountReports()), 1);
  EXPECT_THAT(ValueOf(tx->TakeReports({{ids[0]}})), IsEmpty());
}

TEST_P(BackendContractTest, TakeStaleReports_TakesOldestFirstBeforeTheCutoff) {
  std::vector<int64_t> ids;
  Committed([&](Transaction& tx) {
    // Creation times out of id order: the oldest comes first regardless.
    ASSERT_OK_AND_ASSIGN(
        ids,
        tx.AppendReports({{MakeReport(0, At(30)), MakeReport(1, At(10)),
                           MakeReport(2, At(20)), MakeReport(3, At(40))}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxReport> first,
                       tx->TakeStaleReports(At(40), 2));
  EXPECT_THAT(ReportIdsOf(first), ElementsAre(ids[1], ids[2]));
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxReport> rest,
                       tx->TakeStaleReports(At(40), 10));
  EXPECT_THAT(ReportIdsOf(rest), ElementsAre(ids[0]));
  EXPECT_EQ(ValueOf(tx->CountReports()), 1);
}

// --- Queues
// ----------------------------------------------------------------------

TEST_P(BackendContractTest, QueueOperations_UnknownQueue_FailWithNotFound) {
  EXPECT_EQ(CodeOf(Begin()->SendMessages("nope", Movable({Message(1)}), kT0)),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->ReadMessages("nope", kT0, 1, At(30), Fields::kAll)),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->SetVisibility("nope", {{{.message_id = 1}}})),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->ArchiveMessages("nope", {{1}}, kT0)),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->LookupMessage("nope", 1)),
            absl::StatusCode::kNotFound);
}

TEST_P(BackendContractTest, SendMessages_AssignsIncreasingIdsAndStoresThem) {
  CreateQueue("greet");
  const std::vector<int64_t> first =
      Send({Message(1), Message(2, At(60))}, At(5));
  const std::vector<int64_t> second = Send({Message(3)}, At(6));
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_LT(first[0], first[1]);
  EXPECT_LT(first[1], second[0]);
  std::optional<MessageLocation> found = Lookup(*Begin(), first[1]);
  ASSERT_TRUE(found.has_value());
  EXPECT_FALSE(found->archived);
  EXPECT_EQ(Describe(found->message), Describe({.message_id = first[1],
                                                .read_count = 0,
                                                .enqueued_at = At(5),
                                                .visible_at = At(60),
                                                .body = J(R"({"n":2})")}));
}

TEST_P(BackendContractTest, SendMessages_KeepsScalarBodiesExactly) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({{.body = J("null"), .visible_at = kT0},
            {.body = J("false"), .visible_at = kT0}});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[0])->message.body), "null");
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[1])->message.body), "false");
}

TEST_P(BackendContractTest, ReadMessages_TakesVisibleMessagesInIdOrder) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1, At(10)), Message(2, At(0)),
                                         Message(3, At(5)), Message(4, At(6))});
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", At(5), 10, At(100), Fields::kAll));
  // Visible means visible_at <= now: the third becomes visible exactly at 5.
  EXPECT_THAT(IdsOf(read), ElementsAre(ids[1], ids[2]));
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(Describe(read[0]), Describe({.message_id = ids[1],
                                         .read_count = 1,
                                         .enqueued_at = kT0,
                                         .visible_at = At(100),
                                         .body = J(R"({"n":2})")}));
}

TEST_P(BackendContractTest, ReadMessages_SkipsInvisibleMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1, At(10)), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(9), 10, At(100), Fields::kAll))),
              ElementsAre(ids[1]));
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(10), 10, At(100),
                                             Fields::kAll))),
              ElementsAre(ids[0]));
}

TEST_P(BackendContractTest, ReadMessages_HidesMessagesUntilVisibleUntil) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  Committed([&](Transaction& tx) {
    EXPECT_THAT(IdsOf(ValueOf(
                    tx.ReadMessages("greet", At(1), 1, At(30), Fields::kAll))),
                ElementsAre(ids[0]));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(29), 10, At(40), Fields::kAll))),
              ElementsAre(ids[1]));
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> again,
      tx->ReadMessages("greet", At(30), 10, At(60), Fields::kAll));
  ASSERT_THAT(IdsOf(again), ElementsAre(ids[0]));
  EXPECT_EQ(again[0].read_count, 2);
  EXPECT_EQ(again[0].visible_at, At(60));
}

TEST_P(BackendContractTest, ReadMessages_TakesAtMostTheLimit) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->ReadMessages("greet", kT0, 0, At(30), Fields::kAll)),
              IsEmpty());
  EXPECT_THAT(
      IdsOf(ValueOf(tx->ReadMessages("greet", kT0, 2, At(30), Fields::kAll))),
      ElementsAre(ids[0], ids[1]));
  EXPECT_THAT(
      IdsOf(ValueOf(tx->ReadMessages("greet", kT0, 2, At(30), Fields::kAll))),
      ElementsAre(ids[2]));
}

TEST_P(BackendContractTest,
       ReadMessages_EarlierNowThanTheLastRead_StillHidesLaterMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({Message(1, At(50)), Message(2, At(80)), Message(3, At(200))});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(100), 1, At(300),
                                             Fields::kAll))),
              ElementsAre(ids[0]));
  EXPECT_THAT(
      ValueOf(tx->ReadMessages("greet", At(10), 10, At(300), Fields::kAll)),
      IsEmpty());
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(90), 10, At(300),
                                             Fields::kAll))),
              ElementsAre(ids[1]));
}

TEST_P(BackendContractTest,
       ReadMessages_VisibleUntilNotAfterNow_LeavesThemVisible) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(10), 10, At(10), Fields::kAll))),
              ElementsAre(ids[0], ids[1]));
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> again,
      tx->ReadMessages("greet", At(10), 10, At(20), Fields::kAll));
  EXPECT_THAT(IdsOf(again), ElementsAre(ids[0], ids[1]));
  EXPECT_EQ(again[1].read_count, 2);
}

TEST_P(BackendContractTest, SetVisibility_HidesAndRevealsLiveMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({Message(1), Message(2), Message(3, At(100))});
  const int64_t unknown = ids[2] + 1000;
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK(tx->SetVisibility("greet",
                              {{{.message_id = ids[0], .visible_at = At(50)},
                                {.message_id = ids[2], .visible_at = At(5)},
                                {.message_id = unknown, .visible_at = kT0}}}));
  EXPECT_EQ(Lookup(*tx, ids[0])->message.visible_at, At(50));
  EXPECT_EQ(Lookup(*tx, ids[0])->message.read_count, 0);
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(10), 10, At(20), Fields::kAll))),
              ElementsAre(ids[1], ids[2]));
  EXPECT_EQ(Lookup(*tx, unknown), std::nullopt);
}

TEST_P(BackendContractTest, ArchiveMessages_MovesLiveMessagesToTheArchive) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  const int64_t unknown = ids[1] + 1000;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ReadMessages("greet", kT0, 1, At(30), Fields::kAll));
  });
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0], unknown}}, At(3)));
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0]}}, At(4)));  // a no-op
  });
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<MessageLocation> archived = Lookup(*tx, ids[0]);
  ASSERT_TRUE(archived.has_value());
  EXPECT_TRUE(archived->archived);
  EXPECT_EQ(archived->archived_at, At(3));
  EXPECT_EQ(Lookup(*tx, ids[1])->archived_at, std::nullopt);
  EXPECT_EQ(Describe(archived->message), Describe({.message_id = ids[0],
                                                   .read_count = 1,
                                                   .enqueued_at = kT0,
                                                   .visible_at = At(30),
                                                   .body = J(R"({"n":1})")}));
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(100), 10, At(130),
                                             Fields::kAll))),
              ElementsAre(ids[1]));
  // An archived message is not live: visibility changes skip it.
  ASSERT_OK(tx->SetVisibility("greet",
                              {{{.message_id = ids[0], .visible_at = kT0}}}));
  EXPECT_TRUE(Lookup(*tx, ids[0])->archived);
  EXPECT_EQ(Lookup(*tx, ids[0])->message.visible_at, At(30));
  EXPECT_EQ(Lookup(*tx, unknown), std::nullopt);
}

TEST_P(BackendContractTest, ReadMessages_NoPayloads_LeavesBodiesEmpty) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", At(1), 10, At(30), Fields::kNoPayloads));
  ASSERT_THAT(IdsOf(read), ElementsAre(ids[0], ids[1]));
  EXPECT_EQ(Describe(read[0]), Describe({.message_id = ids[0],
                                         .read_count = 1,
                                         .enqueued_at = kT0,
                                         .visible_at = At(30),
                                         .body = nullptr}));
  // The stored body is untouched.
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[1])->message.body), R"({"n":2})");
}

TEST_P(BackendContractTest, LookupMessage_UnknownId_ReturnsNullopt) {
  CreateQueue("greet");
  EXPECT_EQ(Lookup(*Begin(), 1), std::nullopt);
}

// --- Workers
// ---------------------------------------------------------------------

TEST_P(BackendContractTest, UpsertWorker_InsertsThenReplacesTheWholeRecord) {
  const WorkerRecord w1{.worker_id = "w1",
                        .queue_name = "greet",
                        .flow_slug = "greet",
                        .started_at = kT0,
                        .last_heartbeat_at = kT0};
  const WorkerRecord w2{.worker_id = "w2",
                        .queue_name = "other",
                        .flow_slug = "other",
                        .started_at = At(1),
                        .last_heartbeat_at = At(1)};
  WorkerRecord w1_stopped = w1;
  w1_stopped.last_heartbeat_at = At(9);
  w1_stopped.stopped_at = At(10);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpsertWorker(w1));
    ASSERT_OK(tx.UpsertWorker(w2));
  });
  Committed([&](Transaction& tx) { ASSERT_OK(tx.UpsertWorker(w1_stopped)); });
  ASSERT_OK_AND_ASSIGN(std::vector<WorkerRecord> workers,
                       Begin()->ListWorkers());
  std::vector<std::string> described;
  for (const WorkerRecord& w : workers) described.push_back(Describe(w));
  EXPECT_THAT(described,
              UnorderedElementsAre(Describe(w1_stopped), Describe(w2)));
}

// --- Limits
// ----------------------------------------------------------------------

TEST_P(BackendContractTest, Limits_ZeroOrNegative_TakeAndListNothing) {
  CreateQueue("greet");
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({Ended(1, RunStatus::kCompleted, kT0)})));
    ASSERT_OK(
        tx.InsertTasks(Movable({Started(MakeTask(1, 0, 0, 1), kT0, At(1))})));
    ASSERT_OK(tx.SendMessages("greet", Movable({Message(1)}), kT0));
    ASSERT_OK(tx.AppendReports({{MakeReport(0, kT0)}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  for (int limit : {0, -1}) {
    EXPECT_THAT(
        ValueOf(tx->ListRuns(RunQuery::OfFlow("", limit), Fields::kAll)),
        IsEmpty());
    EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(100), limit)), IsEmpty());
    EXPECT_THAT(ValueOf(tx->FindStalledTasks(At(100), limit, Fields::kAll)),
                IsEmpty());
    EXPECT_THAT(ValueOf(tx->TakeStaleReports(At(100), limit)), IsEmpty());
    EXPECT_THAT(ValueOf(tx->ReadMessages("greet", At(100), limit, At(200),
                                         Fields::kAll)),
                IsEmpty());
  }
  EXPECT_EQ(ValueOf(tx->CountReports()), 1);
}

// --- Rollback of arbitrary mixes of changes
// ------------------------------------

// What the random walk below has created, so it only issues calls that
// succeed.
struct Universe {
  std::vector<uint64_t> runs;
  std::vector<std::pair<uint64_t, int>> steps;  // (run, step index)
  std::vector<TaskKey> tasks;
  std::vector<int64_t> messages;  // of queue "greet"
  std::vector<int64_t> reports;
  uint64_t next_run = 1;
  int next_step = 0;
  int next_task = 0;

  // Forgets what deleting `run` deleted. Its messages stay listed: Snapshot
  // shows them absent.
  void DeleteRun(uint64_t run) {
    std::erase(runs, run);
    std::erase_if(steps, [&](const auto& s) { return s.first == run; });
    std::erase_if(tasks,
                  [&](const TaskKey& k) { return k.run_id == RunNo(run); });
  }
};

std::string Describe(const MessageLocation& m) {
  return StrCat(m.archived ? "archived at " : "live ", Text(m.archived_at), " ",
                Describe(m.message));
}

// Every record the backend holds, as text. Destructive probes (reading every
// message, taking every report) run last, in a transaction that is dropped.
std::string Snapshot(Backend& backend, const Universe& u) {
  std::unique_ptr<Transaction> tx = ValueOf(backend.Begin());
  std::string out;
  for (const FlowRecord& f : ValueOf(tx->ListFlows())) {
    StrAppend(&out, "flow ", f.slug, "\n");
  }
  for (const RunRecord& r :
       ValueOf(tx->ListRuns(RunQuery::OfFlow("", 1000), Fields::kAll))) {
    StrAppend(&out, "run ", Describe(r), "\n");
  }
  for (const RunRecord& r :
       ValueOf(tx->FindFinishedRuns(absl::InfiniteFuture(), 1000))) {
    StrAppend(&out, "finished ", Describe(r), "\n");
  }
  for (uint64_t run : u.runs) {
    for (const StepStateRecord& s : ValueOf(GetSteps(*tx, RunNo(run)))) {
      StrAppend(&out, "step ", Describe(s), "\n");
    }
    for (const TaskRecord& t : ValueOf(tx->ListTasks(RunNo(run)))) {
      StrAppend(&out, "task ", Describe(t), "\n");
    }
  }
  for (const TaskRecord& t : ValueOf(
           tx->FindStalledTasks(absl::InfiniteFuture(), 1000, Fields::kAll))) {
    StrAppend(&out, "stalled ", Describe(t), "\n");
  }
  for (int64_t id : u.messages) {
    std::optional<MessageLocation> m = ValueOf(tx->LookupMessage("greet", id));
    StrAppend(&out, "message ", id, " ",
              m.has_value() ? Describe(*m) : "absent", "\n");
  }
  for (const std::optional<TaskRecord>& t : ValueOf(
           tx->GetTasksByMessage("greet", u.messages, Fields::kNoPayloads))) {
    StrAppend(&out, "by message ", t.has_value() ? Describe(*t) : "none", "\n");
  }
  for (const WorkerRecord& w : ValueOf(tx->ListWorkers())) {
    StrAppend(&out, "worker ", Describe(w), "\n");
  }
  StrAppend(&out, "queue other: ", ValueOf(tx->QueueExists("other")), "\n");
  StrAppend(&out, "reports: ", ValueOf(tx->CountReports()), "\n");
  for (const OutboxReport& r :
       ValueOf(tx->TakeStaleReports(absl::InfiniteFuture(), 1000))) {
    StrAppend(&out, "report ", Describe(r), "\n");
  }
  for (const MessageRecord& m : ValueOf(
           tx->ReadMessages("greet", At(1000), 1000, At(2000), Fields::kAll))) {
    StrAppend(&out, "readable ", Describe(m), "\n");
  }
  return out;
}

// One random call that succeeds, recorded in `u`.
absl::Status RandomChange(Transaction& tx, Universe& u, std::mt19937& rng) {
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  auto time = [&] { return At(static_cast<int>(pick(100))); };
  auto any_run = [&] { return u.runs[pick(u.runs.size())]; };
  switch (pick(16)) {
    case 0:
    case 14: {
      const uint64_t run = u.next_run++;
      u.runs.push_back(run);
      return tx.InsertRuns(
          Movable({MakeRun(run, pick(2) ? "a" : "b", time())}));
    }
    case 1: {
      if (u.runs.empty()) return absl::OkStatus();
      const uint64_t run = any_run();
      const int step = u.next_step++;
      u.steps.emplace_back(run, step);
      StepStateRecord state = MakeStep(run, step);
      state.remaining_tasks = 5;
      return tx.InsertStepStates(Movable({state}));
    }
    case 2: {
      if (u.runs.empty()) return absl::OkStatus();
      RunRecord run = MakeRun(any_run());
      run.status = pick(3) ? RunStatus::kCompleted : RunStatus::kCancelled;
      run.output = J(R"({"x":[1,2]})");
      run.finished_at = time();
      if (!tx.UpdateRuns(Movable({run})).ok())
        return absl::InternalError("UpdateRuns");
      return tx
          .AddRunRemainingSteps(
              {{RunCounterDelta{.run_id = run.run_id, .remaining_steps = 1}}})
          .status();
    }
    case 3: {
      if (u.steps.empty()) return absl::OkStatus();
      const auto [run, step] = u.steps[pick(u.steps.size())];
      StepStateRecord state = MakeStep(run, step);
      state.status = StepStatus::kStarted;
      state.output = J("[true]");
      if (!tx.UpdateStepStates(Movable({state})).ok())
        return absl::InternalError("U");
      const auto [other_run, other_step] = u.steps[pick(u.steps.size())];
      return tx
          .AddStepCounters({{StepDelta(run, step, 2, -1),
                             StepDelta(other_run, other_step,
                                       static_cast<int>(pick(3)) - 1, 0)}})
          .status();
    }
    case 4:
    case 5: {
      if (u.runs.empty()) return absl::OkStatus();
      absl::StatusOr<std::vector<int64_t>> ids =
          tx.SendMessages("greet", Movable({Message(1, time())}), time());
      if (!ids.ok()) return ids.status();
      u.messages.push_back((*ids)[0]);
      TaskRecord task = MakeTask(any_run(), static_cast<int>(pick(3)),
                                 u.next_task++, (*ids)[0]);
      if (pick(2)) task = Started(task, time(), time());
      u.tasks.push_back(task.key);
      return tx.InsertTasks(Movable({task}));
    }
    case 6: {
      if (u.tasks.empty()) return absl::OkStatus();
      const TaskKey key = u.tasks[pick(u.tasks.size())];
      absl::StatusOr<std::vector<std::optional<TaskRecord>>> found =
          tx.GetTasks({{key}}, Fields::kAll);
      if (!found.ok()) return found.status();
      const TaskRecord before = *(*found)[0];
      TaskRecord after = pick(2) ? Started(before, time(), time()) : before;
      after.status = pick(2) ? after.status : TaskStatus::kCompleted;
      after.output = J("7");
      after.worker_id = StrCat("worker-", pick(3));
      TaskUpdate update = UpdateOf(before, after);
      if (pick(4) == 0) update.expected_attempts += 1;  // a lost race
      return tx.UpdateTasks(Movable({update})).status();
    }
    case 7:
      return tx
          .ReadMessages("greet", time(), static_cast<int>(pick(4)), time(),
                        pick(2) ? Fields::kAll : Fields::kNoPayloads)
          .status();
    case 8: {
      if (u.messages.empty()) return absl::OkStatus();
      return tx.SetVisibility(
          "greet", {{{.message_id = u.messages[pick(u.messages.size())],
                      .visible_at = time()}}});
    }
    case 9: {
      if (u.messages.empty()) return absl::OkStatus();
      return tx.ArchiveMessages(
          "greet", {{u.messages[pick(u.messages.size())]}}, time());
    }
    case 10: {
      if (u.runs.empty()) return absl::OkStatus();
      absl::StatusOr<std::vector<int64_t>> ids = tx.AppendReports(
          {{MakeReport(static_cast<int>(pick(9)), time(), any_run()),
            MakeReport(static_cast<int>(pick(9)), time(), any_run())}});
      if (!ids.ok()) return ids.status();
      u.reports.insert(u.reports.end(), ids->begin(), ids->end());
      return absl::OkStatus();
    }
    case 11: {
      if (u.reports.empty()) return absl::OkStatus();
      if (pick(2)) return tx.TakeStaleReports(time(), 2).status();
      return tx.TakeReports({{u.reports[pick(u.reports.size())]}}).status();
    }
    case 12:
      return tx.UpsertWorker({.worker_id = StrCat("w", pick(3)),
                              .queue_name = "greet",
                              .started_at = time(),
                              .last_heartbeat_at = time()});
    case 13: {
      if (u.runs.empty()) return absl::OkStatus();
      const uint64_t run = any_run();
      absl::StatusOr<int> deleted =
          tx.DeleteRuns({{RunNo(run), RunNo(u.next_run + 100)}});
      if (!deleted.ok()) return deleted.status();
      if (*deleted != 1) return absl::InternalError("DeleteRuns count");
      u.DeleteRun(run);
      return absl::OkStatus();
    }
    default: {
      absl::StatusOr<bool> exists = tx.QueueExists("other");
      if (!exists.ok() || *exists) return exists.status();
      return tx.CreateQueue({.name = "other", .created_at = time()});
    }
  }
}

TEST_P(BackendContractTest, Drop_AfterAnyMixOfChanges_RestoresEveryRecord) {
  CreateQueue("greet");
  std::mt19937 rng(20260129);
  Universe universe;
  for (int round = 0; round < 16; ++round) {
    // A dropped transaction changes nothing...
    const std::string before = Snapshot(*backend_, universe);
    Universe dropped = universe;
    {
      std::unique_ptr<Transaction> tx = Begin();
      for (int i = 0; i < 25; ++i) {
        ASSERT_OK(RandomChange(*tx, dropped, rng));
      }
    }
    ASSERT_EQ(Snapshot(*backend_, universe), before) << "round " << round;
    // What only the dropped transaction created is gone.
    std::unique_ptr<Transaction> tx = Begin();
    for (size_t i = universe.messages.size(); i < dropped.messages.size();
         ++i) {
      EXPECT_EQ(ValueOf(tx->LookupMessage("greet", dropped.messages[i])),
                std::nullopt);
    }
    for (uint64_t run = universe.next_run; run < dropped.next_run; ++run) {
      EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(run))), std::nullopt);
      EXPECT_THAT(ValueOf(GetSteps(*tx, RunNo(run))), IsEmpty());
      EXPECT_THAT(ValueOf(tx->ListTasks(RunNo(run))), IsEmpty());
    }
    tx.reset();
    // ...and a committed one moves the state on for the next round.
    Committed([&](Transaction& tx) {
      for (int i = 0; i < 25; ++i) ASSERT_OK(RandomChange(tx, universe, rng));
    });
  }
}

// --- Deleting runs
// --------------------------------------------------------------

// Runs 1 and 2 (ended) and 3 (started), each with step states, tasks whose
// messages are live or archived, and outbox reports. Run 1 also has a task on
// queue "other"; runs 1 and 3 have a started task.
struct DeletionSeed {
  Universe universe;
  std::vector<int64_t> greet;  // message ids; run 3's are the last three
  int64_t other = 0;
};

class DeleteRunsTest : public BackendContractTest {
 protected:
  DeletionSeed Seed() {
    DeletionSeed seed;
    CreateQueue("greet");
    CreateQueue("other");
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(
          Movable({Ended(1, RunStatus::kCompleted, At(5)),
                   Ended(2, RunStatus::kFailed, At(6)), MakeRun(3)})));
      ASSERT_OK(tx.InsertStepStates(
          Movable({MakeStep(1, 0), MakeStep(1, 1), MakeStep(2, 0),
                   MakeStep(3, 0), MakeStep(3, 1)})));
      ASSERT_OK_AND_ASSIGN(
          seed.greet,
          tx.SendMessages("greet",
                          Movable({Message(1), Message(2), Message(3),
                                   Message(4), Message(5), Message(6)}),
                          kT0));
      ASSERT_OK_AND_ASSIGN(
          std::vector<int64_t> other,
          tx.SendMessages("other", Movable({Message(7)}), kT0));
      seed.other = other[0];
      const std::vector<int64_t>& g = seed.greet;
      ASSERT_OK(tx.InsertTasks(
          Movable({MakeTask(1, 0, 0, g[0]), MakeTask(1, 0, 1, g[1]),
                   Started(MakeTask(1, 1, 0, seed.other, "other"), kT0, At(50)),
                   MakeTask(2, 0, 0, g[2]), MakeTask(3, 0, 0, g[3]),
                   MakeTask(3, 0, 1, g[4]),
                   Started(MakeTask(3, 1, 0, g[5]), kT0, At(60))})));
      ASSERT_OK(tx.ArchiveMessages("greet", {{g[1], g[4]}}, At(2)));
      ASSERT_OK_AND_ASSIGN(
          seed.universe.reports,
          tx.AppendReports(
              {{MakeReport(0, kT0, 1), MakeReport(0, kT0, 2),
                MakeReport(0, At(1), 3), MakeReport(1, At(1), 1)}}));
    });
    seed.universe.runs = {1, 2, 3};
    seed.universe.messages = seed.greet;
    seed.universe.next_run = 4;
    return seed;
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, DeleteRunsTest,
                         ::testing::Values("memory:", "sqlite:"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "memory:"
                                      ? std::string("Memory")
                                      : std::string("Sqlite");
                         });

TEST_P(DeleteRunsTest, DeleteRuns_DeletesTheRunsWithEverythingTheyOwn) {
  const DeletionSeed seed = Seed();
  const std::vector<int64_t>& g = seed.greet;
  Committed([](Transaction& tx) {
    // Unknown ids and repeats are skipped.
    EXPECT_EQ(
        ValueOf(tx.DeleteRuns({{RunNo(1), RunNo(9), RunNo(2), RunNo(1)}})), 2);
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<std::optional<RunRecord>> runs,
                       tx->GetRuns({{RunNo(1), RunNo(2), RunNo(3)}},
                                   LockMode::kNone, Fields::kAll));
  EXPECT_EQ(runs[0], std::nullopt);
  EXPECT_EQ(runs[1], std::nullopt);
  EXPECT_TRUE(runs[2].has_value());
  EXPECT_THAT(
      RunIdsOf(ValueOf(tx->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll))),
      ElementsAre(RunNo(3)));
  EXPECT_THAT(ValueOf(tx->FindFinishedRuns(absl::InfiniteFuture(), 10)),
              IsEmpty());
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::vector<StepStateRecord>> states,
      tx->GetStepStates({{RunNo(1), RunNo(2), RunNo(3)}}, Fields::kAll));
  EXPECT_THAT(states[0], IsEmpty());
  EXPECT_THAT(states[1], IsEmpty());
  EXPECT_EQ(states[2].size(), 2u);
  // Tasks, by every index.
  EXPECT_THAT(ValueOf(tx->ListTasks(RunNo(1))), IsEmpty());
  EXPECT_THAT(ValueOf(tx->ListTasks(RunNo(2))), IsEmpty());
  EXPECT_THAT(StepsAndTasksOf(ValueOf(tx->ListTasks(RunNo(3)))),
              ElementsAre(std::pair(0, 0), std::pair(0, 1), std::pair(1, 0)));
  EXPECT_EQ(GetTask(*tx, {RunNo(1), 0, 0}), std::nullopt);
  EXPECT_EQ(GetTask(*tx, {RunNo(2), 0, 0}), std::nullopt);
  EXPECT_THAT(
      ValueOf(tx->GetUnfinishedTasks(RunNo(1), std::nullopt, Fields::kAll)),
      IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<std::optional<TaskRecord>> by_message,
                       tx->GetTasksByMessage("greet", g, Fields::kNoPayloads));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(by_message[i], std::nullopt) << i;
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(by_message[i].has_value()) << i;
  EXPECT_THAT(
      ValueOf(tx->GetTasksByMessage("other", {{seed.other}}, Fields::kAll)),
      ElementsAre(::testing::Eq(std::nullopt)));
  EXPECT_THAT(TaskIndexesOf(ValueOf(tx->FindStalledTasks(absl::InfiniteFuture(),
                                                         10, Fields::kAll))),
              ElementsAre(0));  // run 3's
  // Messages, live and archived.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Lookup(*tx, g[i]), std::nullopt) << i;
  EXPECT_FALSE(Lookup(*tx, g[3])->archived);
  EXPECT_TRUE(Lookup(*tx, g[4])->archived);
  EXPECT_EQ(Lookup(*tx, seed.other, "other"), std::nullopt);
  // Reports.
  EXPECT_EQ(ValueOf(tx->CountReports()), 1);
  ASSERT_OK_AND_ASSIGN(std::vector<OutboxReport> reports,
                       tx->TakeStaleReports(absl::InfiniteFuture(), 10));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].task.run_id, RunNo(3));
  // Queues still work, and message ids are never reused.
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(100), 10, At(200),
                                             Fields::kAll))),
              ElementsAre(g[3], g[5]));
  EXPECT_THAT(
      ValueOf(tx->ReadMessages("other", At(100), 10, At(200), Fields::kAll)),
      IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> next,
                       tx->SendMessages("greet", Movable({Message(8)}), At(1)));
  EXPECT_GT(next[0], g[5]);
}

TEST_P(DeleteRunsTest, DeleteRuns_Dropped_RestoresEverything) {
  const DeletionSeed seed = Seed();
  const std::string before = Snapshot(*backend_, seed.universe);
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_EQ(ValueOf(tx->DeleteRuns({{RunNo(2), RunNo(1)}})), 2);
    // Fill what the deletion freed, reusing a deleted run's id.
    ASSERT_OK(tx->InsertRuns(Movable({MakeRun(1), MakeRun(4)})));
    ASSERT_OK(tx->InsertStepStates(Movable({MakeStep(1, 0)})));
    ASSERT_OK_AND_ASSIGN(
        std::vector<int64_t> ids,
        tx->SendMessages("greet", Movable({Message(8), Message(9)}), At(1)));
    ASSERT_OK(tx->InsertTasks(
        Movable({MakeTask(1, 0, 0, ids[0]),
                 Started(MakeTask(4, 0, 0, ids[1]), At(1), At(2))})));
    ASSERT_OK(tx->ArchiveMessages("greet", {{ids[1]}}, At(1)));
    ASSERT_OK(tx->AppendReports({{MakeReport(0, At(1), 1)}}));
    ASSERT_EQ(ValueOf(tx->DeleteRuns({{RunNo(4), RunNo(3)}})), 2);
  }
  EXPECT_EQ(Snapshot(*backend_, seed.universe), before);
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<MessageLocation> other = Lookup(*tx, seed.other, "other");
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->archived);
  EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(4))), std::nullopt);
  // The restored runs can be deleted for good.
  EXPECT_EQ(ValueOf(tx->DeleteRuns({{RunNo(1), RunNo(2), RunNo(3)}})), 3);
  ASSERT_OK(tx->Commit());
  EXPECT_EQ(ValueOf(Begin()->CountReports()), 0);
}

TEST_P(DeleteRunsTest, DeleteRuns_ThenTheSameIdsAgain_KeepsTheNewRecords) {
  const DeletionSeed seed = Seed();
  RunRecord again = MakeRun(1, "greet", At(9));
  Committed([&](Transaction& tx) {
    ASSERT_EQ(ValueOf(tx.DeleteRuns({{RunNo(1)}})), 1);
    ASSERT_OK(tx.InsertRuns(Movable({again})));
    ASSERT_OK(tx.InsertStepStates(Movable({MakeStep(1, 0)})));
    ASSERT_OK_AND_ASSIGN(
        std::vector<int64_t> ids,
        tx.SendMessages("greet", Movable({Message(8)}), At(9)));
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, ids[0])})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(again));
  EXPECT_THAT(ValueOf(GetSteps(*tx, RunNo(1))).size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> tasks, tx->ListTasks(RunNo(1)));
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_GT(tasks[0].message_id, seed.greet.back());
  EXPECT_EQ(Lookup(*tx, seed.greet[0]), std::nullopt);
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(100), 10))),
              ElementsAre(RunNo(2)));
  EXPECT_EQ(ValueOf(tx->CountReports()), 2);  // runs 2 and 3
}

// --- Payloads handed over
// --------------------------------------------------------

// Every payload a write takes lives in a memory resource that is destroyed
// and scribbled over after the commit: what the backend keeps must not point
// into it.
TEST_P(BackendContractTest, Writes_PayloadsInAShortLivedResource_AreKept) {
  CreateQueue("greet");
  const std::string big(100, 'x');  // longer than any small-string buffer
  auto text = [&](std::string_view name) {
    return StrCat(R"({")", name, R"(":")", big, R"("})");
  };
  std::vector<unsigned char> buffer(1 << 16);
  {
    boost::json::monotonic_resource arena(buffer.data(), buffer.size());
    auto in_arena = [&](std::string_view name) {
      return boost::json::parse(text(name), boost::json::storage_ptr(&arena));
    };
    RunRecord run{.run_id = RunNo(1),
                  .flow_slug = "greet",
                  .input = in_arena("run_in"),
                  .output = in_arena("run_out"),
                  .started_at = kT0};
    ASSERT_EQ(run.input.storage().get(), &arena);
    StepStateRecord state{.run_id = RunNo(1),
                          .step_index = 0,
                          .step_slug = "step0",
                          .output = in_arena("step_out")};
    TaskRecord task{.key = {RunNo(1), 0, 0},
                    .flow_slug = "greet",
                    .input = in_arena("task_in"),
                    .output = in_arena("task_out"),
                    .queue_name = "greet",
                    .queued_at = kT0};
    OutgoingMessage message{.body = in_arena("body"), .visible_at = kT0};
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(std::span(&run, 1)));
      ASSERT_OK(tx.InsertStepStates(std::span(&state, 1)));
      ASSERT_OK_AND_ASSIGN(
          std::vector<int64_t> ids,
          tx.SendMessages("greet", std::span(&message, 1), kT0));
      task.message_id = ids[0];
      ASSERT_OK(tx.InsertTasks(std::span(&task, 1)));
    });
    TaskUpdate update{.task = {.key = {RunNo(1), 0, 0},
                               .status = TaskStatus::kCompleted,
                               .output = in_arena("task_done")},
                      .expected_status = TaskStatus::kQueued,
                      .expected_attempts = 0};
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.UpdateTasks(std::span(&update, 1)));
    });
  }
  std::fill(buffer.begin(), buffer.end(), 0xA5);
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<RunRecord> run = ValueOf(GetRun(*tx, RunNo(1)));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(SerializeJson(run->input), text("run_in"));
  EXPECT_EQ(Text(run->output), text("run_out"));
  EXPECT_EQ(Text(ValueOf(GetSteps(*tx, RunNo(1)))[0].output), text("step_out"));
  std::optional<TaskRecord> task = GetTask(*tx, {RunNo(1), 0, 0});
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(SerializeJson(task->input), text("task_in"));
  EXPECT_EQ(Text(task->output), text("task_done"));
  EXPECT_EQ(SerializeJson(Lookup(*tx, task->message_id)->message.body),
            text("body"));
}

}  // namespace
}  // namespace sluice
