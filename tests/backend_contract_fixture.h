// The fixture of the Transaction contract tests (sluice/backend.h): every
// test runs against every backend opened through OpenBackend(), starts from
// an empty backend and passes every time explicitly, so nothing depends on a
// clock. The tests live in backend_contract_*_test.cc, by topic.
//
// Backends: "memory", "sqlite" (a file in a temporary directory) and
// "postgres" (a fresh database per test on the cluster named by
// SLUICE_TEST_POSTGRES_URL, as the conformance harness makes them; skipped
// when the variable is unset).
//
// Interface v4 (jobs): a backend may not implement every v4 call yet (its
// stubs return kUnimplemented). The v4 fixture (BackendContractV4Test) skips
// such a backend in SetUp, and ASSERT_OK_OR_SKIP skips at a call that
// returns kUnimplemented, so the suite stays green while the backends catch
// up and runs in full once they have. Interface v5 (deployment) does the same
// with BackendContractV5Test.
#ifndef SLUICE_TESTS_BACKEND_CONTRACT_FIXTURE_H_
#define SLUICE_TESTS_BACKEND_CONTRACT_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/ids.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "support/postgres_test_database.h"

#define SLUICE_TEST_CONCAT_INNER(a, b) a##b
#define SLUICE_TEST_CONCAT(a, b) SLUICE_TEST_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                                              \
  do {                                                               \
    const absl::Status _status = ::sluice::contract::StatusOf(expr); \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status;           \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(SLUICE_TEST_CONCAT(_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, expr)              \
  auto statusor = (expr);                                           \
  ASSERT_TRUE(statusor.ok()) << #expr << ": " << statusor.status(); \
  lhs = std::move(*statusor)

// As ASSERT_OK, but a kUnimplemented result skips the test: for v4 calls
// made in a test's body (a skip inside a lambda would only leave the
// lambda).
#define ASSERT_OK_OR_SKIP(expr)                                      \
  do {                                                               \
    const absl::Status _status = ::sluice::contract::StatusOf(expr); \
    if (_status.code() == absl::StatusCode::kUnimplemented) {        \
      GTEST_SKIP() << #expr << ": " << _status;                      \
    }                                                                \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status;           \
  } while (0)

#define ASSERT_OK_AND_ASSIGN_OR_SKIP(lhs, expr)                               \
  ASSERT_OK_AND_ASSIGN_OR_SKIP_IMPL(SLUICE_TEST_CONCAT(_statusor_, __LINE__), \
                                    lhs, expr)
#define ASSERT_OK_AND_ASSIGN_OR_SKIP_IMPL(statusor, lhs, expr)        \
  auto statusor = (expr);                                             \
  if (statusor.status().code() == absl::StatusCode::kUnimplemented) { \
    GTEST_SKIP() << #expr << ": " << statusor.status();               \
  }                                                                   \
  ASSERT_TRUE(statusor.ok()) << #expr << ": " << statusor.status();   \
  lhs = std::move(*statusor)

namespace sluice::contract {

inline absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}
template <typename T>
absl::StatusCode CodeOf(const T& result) {
  return StatusOf(result).code();
}
// The code a write failed with. A backend may queue a write and report its
// failure, with the write's own code, at the next call that waits (Postgres
// pipelines writes: docs/decisions/0011-postgres-backend.md); so after a
// write that returned OK this makes such a call (a read) and returns its
// code. Either way the transaction is unusable after a failure.
inline absl::StatusCode WriteCode(Transaction& tx, const absl::Status& write) {
  if (!write.ok()) return write.code();
  return tx.CountReports().status().code();
}
// The same for a write made by `write(tx)` in a transaction of its own.
template <typename Write>
absl::StatusCode WriteCode(std::unique_ptr<Transaction> tx, Write write) {
  absl::Status status = write(*tx);
  return WriteCode(*tx, status);
}
// The value, or T() after failing the test. Returns by value, so a range-for
// over it does not dangle.
template <typename T>
T ValueOf(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? std::move(*result) : T();
}

inline const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
inline absl::Time At(int seconds) { return kT0 + absl::Seconds(seconds); }

inline Json J(std::string_view text) {
  absl::StatusOr<Json> value = ParseJson(text, "test JSON");
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Json();
}

inline RunId RunNo(uint64_t n) { return RunId(0x5eed'0000'0000'0000, n); }

// A span over a temporary array, for the calls that may move from their
// input: `tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)}))`. The array lives
// until the end of the full expression.
template <typename T, size_t N>
std::span<T> Movable(T (&&items)[N]) {
  return std::span<T>(items, N);
}
// As Movable, over a copy of `items` (the default argument is the copy's
// storage, which lives until the end of the full expression).
template <typename T>
std::span<T> Copied(const std::vector<T>& items, std::vector<T>&& copy = {}) {
  copy = items;
  return std::span<T>(copy);
}

// --- Single-record reads over the batch calls --------------------------------

inline absl::StatusOr<std::optional<RunRecord>> GetRun(
    Transaction& tx, const RunId& run_id, LockMode lock = LockMode::kNone,
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

inline absl::StatusOr<std::vector<StepStateRecord>> GetSteps(
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

inline RunCounterDelta RunDelta(uint64_t run, int remaining_steps) {
  return RunCounterDelta{.run_id = RunNo(run),
                         .remaining_steps = remaining_steps};
}

inline StepCounterDelta StepDelta(uint64_t run, int step_index,
                                  int remaining_tasks, int remaining_deps) {
  return StepCounterDelta{.step = {RunNo(run), step_index},
                          .remaining_tasks = remaining_tasks,
                          .remaining_deps = remaining_deps};
}

// --- Whole-record descriptions, so a mismatch shows every field --------------

inline std::string Text(const std::optional<Json>& v) {
  return v.has_value() ? SerializeJson(*v) : "<none>";
}
inline std::string Text(std::optional<absl::Time> t) {
  return t.has_value() ? absl::FormatTime(*t) : "<none>";
}
inline std::string Text(std::optional<int> n) {
  return n.has_value() ? std::to_string(*n) : "<none>";
}

inline std::string Describe(const RunRecord& r) {
  return StrCat(r.run_id.ToString(), " ", r.flow_slug, " ", ToString(r.status),
                " in=", SerializeJson(r.input), " out=", Text(r.output),
                " remaining=", r.remaining_steps, " err=", r.error,
                " started=", absl::FormatTime(r.started_at),
                " finished=", Text(r.finished_at), " priority=", r.priority,
                " key=", r.external_key, " meta=", SerializeJson(r.metadata),
                " options=", SerializeJson(r.options),
                " cancel=", r.cancel_requested);
}

inline std::string Describe(const StepStateRecord& s) {
  return StrCat(s.run_id.ToString(), "/", s.step_index, " ", s.step_slug, " ",
                ToString(s.status), " deps=", s.remaining_deps,
                " initial=", Text(s.initial_tasks),
                " remaining=", Text(s.remaining_tasks), " out=", Text(s.output),
                " err=", s.error, " skip=", ToString(s.skip_reason),
                " started=", Text(s.started_at),
                " finished=", Text(s.finished_at));
}

inline std::string Describe(const TaskRecord& t) {
  return StrCat(
      t.key.run_id.ToString(), "/", t.key.step_index, "/", t.key.task_index,
      " ", t.flow_slug, " ", ToString(t.status), " attempts=", t.attempts,
      " in=", SerializeJson(t.input), " out=", Text(t.output), " err=", t.error,
      " msg=", t.queue_name, "#", t.message_id,
      " queued=", absl::FormatTime(t.queued_at),
      " started=", Text(t.started_at), " finished=", Text(t.finished_at),
      " stall=", Text(t.stall_at), " requeued=", t.requeued_count,
      " worker=", t.worker_id, " budget=", t.budget_start,
      " cancel=", t.cancel_requested, " options=", SerializeJson(t.options));
}

inline std::string Describe(const MessageRecord& m) {
  return StrCat("#", m.message_id, " reads=", m.read_count,
                " enqueued=", absl::FormatTime(m.enqueued_at),
                " visible=", absl::FormatTime(m.visible_at),
                " priority=", m.priority, " body=", SerializeJson(m.body));
}

inline std::string Describe(const OutboxReport& r) {
  return StrCat("#", r.report_id, " ", r.task.run_id.ToString(), "/",
                r.task.step_index, "/", r.task.task_index, " ", r.flow_slug,
                " ", ToString(r.kind),
                " created=", absl::FormatTime(r.created_at));
}

inline std::string Describe(const WorkerRecord& w) {
  return StrCat(w.worker_id, " ", w.queue_name, " ", w.flow_slug,
                " started=", absl::FormatTime(w.started_at),
                " beat=", absl::FormatTime(w.last_heartbeat_at),
                " stopped=", Text(w.stopped_at));
}

// --- Records ---------------------------------------------------------------

inline RunRecord MakeRun(uint64_t n, std::string flow = "greet",
                         absl::Time started_at = kT0) {
  return RunRecord{.run_id = RunNo(n),
                   .flow_slug = std::move(flow),
                   .input = J(R"({"name":"ada"})"),
                   .remaining_steps = 2,
                   .started_at = started_at};
}

inline StepStateRecord MakeStep(uint64_t run, int step_index) {
  return StepStateRecord{.run_id = RunNo(run),
                         .step_index = step_index,
                         .step_slug = StrCat("step", step_index),
                         .remaining_deps = 1};
}

// A queued task whose message is (queue, message_id).
inline TaskRecord MakeTask(uint64_t run, int step_index, int task_index,
                           int64_t message_id, std::string queue = "greet") {
  return TaskRecord{.key = {RunNo(run), step_index, task_index},
                    .flow_slug = "greet",
                    .input = J(R"({"n":1})"),
                    .queue_name = std::move(queue),
                    .message_id = message_id,
                    .queued_at = kT0};
}

// `task` claimed by worker "w1" at `at`, stalling at `stall_at`.
inline TaskRecord Started(TaskRecord task, absl::Time at, absl::Time stall_at) {
  task.status = TaskStatus::kStarted;
  task.attempts += 1;
  task.started_at = at;
  task.stall_at = stall_at;
  task.worker_id = "w1";
  return task;
}

inline TaskUpdate UpdateOf(const TaskRecord& before, TaskRecord after) {
  return TaskUpdate{.task = std::move(after),
                    .expected_status = before.status,
                    .expected_attempts = before.attempts};
}

inline OutboxReport MakeReport(int task_index, absl::Time created_at,
                               uint64_t run = 1) {
  return OutboxReport{.task = {RunNo(run), 0, task_index},
                      .flow_slug = "greet",
                      .kind = ReportKind::kCompleted,
                      .created_at = created_at};
}

inline OutgoingMessage Message(int n, absl::Time visible_at = kT0) {
  return OutgoingMessage{.body = Json(boost::json::object{{"n", n}}),
                         .visible_at = visible_at};
}

// FindStalledTasks's query for tasks stalled before `now`, whose messages
// (GiveReadMessages) are visible by then too.
inline StalledQuery StalledBefore(absl::Time now, int limit) {
  return StalledQuery{.now = now, .messages_visible_by = now, .limit = limit};
}

inline std::vector<int64_t> IdsOf(const std::vector<MessageRecord>& messages) {
  std::vector<int64_t> ids;
  for (const MessageRecord& m : messages) ids.push_back(m.message_id);
  return ids;
}

inline std::vector<int> TaskIndexesOf(const std::vector<TaskRecord>& tasks) {
  std::vector<int> indexes;
  for (const TaskRecord& t : tasks) indexes.push_back(t.key.task_index);
  return indexes;
}

inline std::vector<std::pair<int, int>> StepsAndTasksOf(
    const std::vector<TaskRecord>& tasks) {
  std::vector<std::pair<int, int>> keys;
  for (const TaskRecord& t : tasks) {
    keys.emplace_back(t.key.step_index, t.key.task_index);
  }
  return keys;
}

inline std::vector<int64_t> ReportIdsOf(
    const std::vector<OutboxReport>& reports) {
  std::vector<int64_t> ids;
  for (const OutboxReport& r : reports) ids.push_back(r.report_id);
  return ids;
}

// Run `n` ended with `status` at `finished_at`, with an output.
inline RunRecord Ended(uint64_t n, RunStatus status, absl::Time finished_at) {
  RunRecord run = MakeRun(n);
  run.status = status;
  run.output = J(R"({"done":true})");
  run.remaining_steps = 0;
  run.finished_at = finished_at;
  return run;
}

// The code of a write that must fail. A backend reports it at once or, if it
// pipelines writes (Postgres, docs/decisions/0011-postgres-backend.md), at
// the next call that waits for the server: here CountReports(). Either way
// the transaction is unusable afterwards.
inline absl::StatusCode FailureOf(Transaction& tx, const absl::Status& write) {
  if (!write.ok()) return write.code();
  return tx.CountReports().status().code();
}

inline std::vector<RunId> RunIdsOf(const std::vector<RunRecord>& runs) {
  std::vector<RunId> ids;
  for (const RunRecord& r : runs) ids.push_back(r.run_id);
  return ids;
}

// --- Fixtures ----------------------------------------------------------------

// The test parameter is the backend: "memory", "sqlite" or "postgres".
class BackendContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // FailureOf(write(tx)) in a transaction of its own, then dropped.
  template <typename Write>
  absl::StatusCode FailureOfWrite(Write write) {
    std::unique_ptr<Transaction> tx = Begin();
    return FailureOf(*tx, write(*tx));
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

  // Gives each started task of `tasks` a message on its queue as a claim
  // leaves it (StalledQuery's promise): sent, read once, then visible again
  // at the task's stall_at. Other tasks keep theirs.
  void GiveReadMessages(Transaction& tx, std::vector<TaskRecord>& tasks) {
    for (TaskRecord& task : tasks) {
      if (task.status != TaskStatus::kStarted) continue;
      absl::StatusOr<std::vector<int64_t>> sent =
          tx.SendMessages(task.queue_name, Movable({Message(1)}), kT0);
      ASSERT_TRUE(sent.ok()) << sent.status();
      absl::StatusOr<std::vector<MessageRecord>> read = tx.ReadMessages(
          task.queue_name, kT0, 1, absl::InfiniteFuture(), Fields::kNoPayloads);
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_THAT(IdsOf(*read), ::testing::ElementsAre((*sent)[0]));
      task.message_id = (*sent)[0];
      ASSERT_OK(tx.SetVisibility(
          task.queue_name, {{{.message_id = task.message_id,
                              .visible_at = task.stall_at.value_or(kT0)}}}));
    }
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

 private:
  std::string temp_dir_;
  std::unique_ptr<testing::TestDatabase> postgres_database_;
};

// The v4 contract: skips, in SetUp, a backend that does not implement every
// v4 call yet.
class BackendContractV4Test : public BackendContractTest {
 protected:
  void SetUp() override;
};

// The v5 contract (aliases, flow generations and deletion, run counts, queue
// deletion, served steps): skips, in SetUp, a backend that does not
// implement every v5 call yet, as BackendContractV4Test does for v4.
class BackendContractV5Test : public BackendContractTest {
 protected:
  void SetUp() override;
};

// "Memory", "Sqlite" or "Postgres": the test name's suffix.
std::string BackendName(const ::testing::TestParamInfo<std::string>& info);

}  // namespace sluice::contract

// Registers every TEST_P of `fixture` (BackendContractTest or a class
// derived from it) for each backend.
#define SLUICE_BACKEND_CONTRACT_SUITE(fixture)                                \
  INSTANTIATE_TEST_SUITE_P(Backends, fixture,                                 \
                           ::testing::Values("memory", "sqlite", "postgres"), \
                           ::sluice::contract::BackendName)

#endif  // SLUICE_TESTS_BACKEND_CONTRACT_FIXTURE_H_
