// SQLite-specific behaviour of batch calls and Fields: batches are bound as
// rows of one statement (sqlite_bound_rows.h), counters are merged per row
// before one UPDATE, run seqs are remembered per transaction, and
// kNoPayloads never touches the payload columns.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "sqlite_rows.h"
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
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Run ids in insertion order, 1, 2, ...
RunId NthRun(int n) { return RunId(0x0190000000007000ULL, n); }

// Inserts runs 1..count, each with steps 0..steps-1 (remaining_tasks unset,
// remaining_deps 1), and commits.
void SeedRuns(Backend& backend, int count, int steps) {
  absl::StatusOr<std::unique_ptr<Transaction>> txn = backend.Begin();
  ASSERT_TRUE(txn.ok()) << txn.status();
  std::vector<RunRecord> runs;
  std::vector<StepStateRecord> states;
  for (int n = 1; n <= count; ++n) {
    runs.push_back(MakeRun(NthRun(n), "flow", kT0));
    for (int s = 0; s < steps; ++s) {
      states.push_back(MakeStep(NthRun(n), s));
      states.back().remaining_deps = 1;
    }
  }
  ASSERT_TRUE((*txn)->InsertRuns(runs).ok());
  ASSERT_TRUE((*txn)->InsertStepStates(states).ok());
  ASSERT_TRUE((*txn)->Commit().ok());
}

// --- Batches ---------------------------------------------------------------

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

// Batches bind their ids as rows of sluice_rows; a repeated id counts once.
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

// Step states and tasks are keyed by their run's seq (sqlite_schema_parts.h).
TEST_F(SqliteBackendTest, InsertTasksAndStepStates_UnknownRun_NotFound) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = RunId::Random();
  TaskRecord task = MakeTask(run_id, 0, 1);
  StepStateRecord step = MakeStep(run_id, 0);

  EXPECT_EQ(Begin(*backend)->InsertTasks({&task, 1}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Begin(*backend)->InsertStepStates({&step, 1}).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SqliteBackendTest, CorruptStoredJson_IsUnreadableWithoutTheText) {
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
  std::vector<std::optional<RunRecord>> runs =
      ValueOf(txn->GetRuns({&run_id, 1}, LockMode::kNone, Fields::kAll));

  ASSERT_TRUE(runs[0].has_value());
  EXPECT_EQ(runs[0]->run_id, run_id);
  EXPECT_TRUE(runs[0]->input.is_null());
  EXPECT_THAT(runs[0]->unreadable,
              AllOf(HasSubstr("run input is not valid JSON"),
                    Not(HasSubstr("secret"))));
}

// Ties break by run id, not by insertion order: ListRuns pages by (time,
// run id).
TEST_F(SqliteBackendTest, ListRuns_SameStartTime_LargerRunIdIsNewer) {
  std::unique_ptr<SqliteBackend> backend = Open();
  // Ids that sort opposite to insertion order.
  const RunId first(1, 0);
  const RunId second(2, 0);
  std::vector<RunRecord> runs = {MakeRun(first, "flow", kT0),
                                 MakeRun(second, "flow", kT0)};
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->InsertRuns(runs).ok());

  absl::StatusOr<std::vector<RunRecord>> listed =
      txn->ListRuns(RunQuery::OfFlow("flow", 10), Fields::kAll);

  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].run_id, second);
  EXPECT_EQ((*listed)[1].run_id, first);
}

TEST_F(SqliteBackendTest, GetRuns_RepeatedAndMissingIds_OneEntryEach) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 2, 0);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  const std::vector<RunId> ids = {NthRun(2), NthRun(9), NthRun(1), NthRun(2)};

  std::vector<std::optional<RunRecord>> runs =
      ValueOf(txn->GetRuns(ids, LockMode::kForUpdate, Fields::kAll));

  ASSERT_EQ(runs.size(), 4u);
  ASSERT_TRUE(runs[0].has_value() && runs[2].has_value() && runs[3]);
  EXPECT_EQ(runs[0]->run_id, NthRun(2));
  EXPECT_FALSE(runs[1].has_value());
  EXPECT_EQ(runs[2]->run_id, NthRun(1));
  EXPECT_EQ(runs[3]->run_id, NthRun(2));
  EXPECT_EQ(runs[2]->input, J(R"({"n":1})"));
}

TEST_F(SqliteBackendTest, GetStepStates_ManyRuns_AlignedWithTheIds) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 3, 2);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  const std::vector<RunId> ids = {NthRun(3), NthRun(7), NthRun(1), NthRun(3)};

  std::vector<std::vector<StepStateRecord>> states =
      ValueOf(txn->GetStepStates(ids, Fields::kNoPayloads));

  ASSERT_EQ(states.size(), 4u);
  EXPECT_THAT(states[1], IsEmpty());
  for (int i : {0, 2, 3}) {
    ASSERT_EQ(states[i].size(), 2u) << i;
    EXPECT_EQ(states[i][0].run_id, ids[i]);
    EXPECT_EQ(states[i][0].step_index, 0);
    EXPECT_EQ(states[i][1].step_index, 1);
  }
}

TEST_F(SqliteBackendTest, UpdateRuns_SameRunTwice_LastWriteWins) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 2, 0);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  RunRecord failed = MakeRun(NthRun(1), "flow", kT0);
  failed.status = RunStatus::kFailed;
  failed.error = "first";
  RunRecord completed = failed;
  completed.status = RunStatus::kCompleted;
  completed.error = "";
  completed.output = J("[7]");
  completed.finished_at = kT0 + absl::Seconds(1);
  completed.remaining_steps = 99;  // not written by UpdateRuns

  std::vector<RunRecord> updates = {failed, completed};
  ASSERT_TRUE(txn->UpdateRuns(updates).ok());

  std::optional<RunRecord> stored = GetRun(*txn, NthRun(1));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->status, RunStatus::kCompleted);
  EXPECT_EQ(stored->output, J("[7]"));
  EXPECT_EQ(stored->finished_at, kT0 + absl::Seconds(1));
  EXPECT_EQ(stored->remaining_steps, 1);
  EXPECT_EQ(GetRun(*txn, NthRun(2))->status, RunStatus::kStarted);
}

TEST_F(SqliteBackendTest, UpdateRuns_UnknownRunInBatch_NotFound) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 1, 0);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  std::vector<RunRecord> runs = {MakeRun(NthRun(1), "flow", kT0),
                                 MakeRun(NthRun(5), "flow", kT0)};

  absl::Status status = txn->UpdateRuns(runs);

  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(NthRun(5).ToString()));
}

TEST_F(SqliteBackendTest, AddRunRemainingSteps_SameRunTwice_EachSeesTheLast) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 2, 0);  // remaining_steps 1 each
  std::unique_ptr<Transaction> txn = Begin(*backend);
  const std::vector<RunCounterDelta> deltas = {
      {NthRun(1), -1}, {NthRun(2), 4}, {NthRun(1), 3}, {NthRun(1), 0}};

  EXPECT_THAT(ValueOf(txn->AddRunRemainingSteps(deltas)),
              ElementsAre(0, 5, 3, 3));
  EXPECT_EQ(GetRun(*txn, NthRun(1))->remaining_steps, 3);
}

TEST_F(SqliteBackendTest, AddStepCounters_SameStepTwice_EachSeesTheLast) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 2, 2);  // remaining_deps 1, remaining_tasks unset
  std::unique_ptr<Transaction> txn = Begin(*backend);
  const std::vector<StepCounterDelta> deltas = {
      {{NthRun(1), 1}, 3, -1},
      {{NthRun(2), 0}, 0, 2},
      {{NthRun(1), 1}, -1, 0},
  };

  std::vector<StepCounters> counters = ValueOf(txn->AddStepCounters(deltas));

  ASSERT_EQ(counters.size(), 3u);
  EXPECT_EQ(counters[0].remaining_tasks, 3);
  EXPECT_EQ(counters[0].remaining_deps, 0);
  EXPECT_EQ(counters[1].remaining_tasks, 0);  // unset counts as 0
  EXPECT_EQ(counters[1].remaining_deps, 3);
  EXPECT_EQ(counters[2].remaining_tasks, 2);
  EXPECT_EQ(counters[2].remaining_deps, 0);
  std::vector<std::vector<StepStateRecord>> states = ValueOf(txn->GetStepStates(
      std::vector<RunId>{NthRun(1), NthRun(2)}, Fields::kAll));
  EXPECT_EQ(states[0][1].remaining_tasks, 2);
  // Any delta sets an unset remaining_tasks, counting from 0.
  EXPECT_EQ(states[1][0].remaining_tasks, 0);
  EXPECT_EQ(states[1][0].remaining_deps, 3);
  EXPECT_EQ(states[1][1].remaining_tasks, std::nullopt);  // untouched
}

TEST_F(SqliteBackendTest, AddStepCounters_UnknownStep_NotFound) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 1, 1);
  const std::vector<StepCounterDelta> deltas = {{{NthRun(1), 0}, 1, 0},
                                                {{NthRun(1), 4}, 1, 0}};
  const std::vector<StepCounterDelta> no_run = {{{NthRun(8), 0}, 1, 0}};

  absl::Status no_step = Begin(*backend)->AddStepCounters(deltas).status();
  absl::Status missing_run = Begin(*backend)->AddStepCounters(no_run).status();

  EXPECT_EQ(no_step.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_step.message(), HasSubstr("step 4 of run"));
  EXPECT_EQ(missing_run.code(), absl::StatusCode::kNotFound);
}

TEST_F(SqliteBackendTest, GetTaskOutputs_SeveralSteps_ByTaskIndex) {
  std::unique_ptr<SqliteBackend> backend = Open();
  SeedRuns(*backend, 2, 0);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  std::vector<TaskRecord> tasks;
  for (int i : {2, 0, 1}) {  // inserted out of order
    tasks.push_back(MakeTask(NthRun(1), i, 10 + i));
    if (i != 1) tasks.back().output = J(StrCat(i));
  }
  tasks.push_back(MakeTask(NthRun(2), 0, 20));
  tasks.back().output = J("\"b\"");
  ASSERT_TRUE(txn->InsertTasks(tasks).ok());
  const std::vector<StepRef> steps = {
      {NthRun(2), 0}, {NthRun(1), 5}, {NthRun(9), 0}, {NthRun(1), 0}};

  std::vector<StepOutputs> outputs = ValueOf(txn->GetTaskOutputs(steps));

  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_THAT(outputs[0].outputs, ElementsAre(J("\"b\"")));
  EXPECT_THAT(outputs[1].outputs, IsEmpty());
  EXPECT_THAT(outputs[2].outputs, IsEmpty());
  EXPECT_THAT(outputs[3].outputs, ElementsAre(J("0"), std::nullopt, J("2")));
}

// GetTaskOutputs places each output as it is read; a step read out of task
// order (another plan) is put back in it.
TEST_F(SqliteBackendTest, SortByTaskIndex_OutOfOrder_PutsOutputsInTaskOrder) {
  std::vector<std::optional<Json>> outputs = {J("\"c\""), std::nullopt,
                                              J("\"a\"")};
  sqlite_internal::SortByTaskIndex({2, 1, 0}, outputs);
  EXPECT_THAT(outputs, ElementsAre(J("\"a\""), std::nullopt, J("\"c\"")));
  sqlite_internal::SortByTaskIndex({0, 1, 2}, outputs);  // in order: kept
  EXPECT_THAT(outputs, ElementsAre(J("\"a\""), std::nullopt, J("\"c\"")));
}

// 500 runs in each call: one statement per call, whatever the batch size.
TEST_F(SqliteBackendTest, LargeBatches_RoundTripEveryRow) {
  std::unique_ptr<SqliteBackend> backend = Open();
  constexpr int kRuns = 500;
  SeedRuns(*backend, kRuns, 1);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  std::vector<RunId> ids;
  std::vector<StepCounterDelta> deltas;
  std::vector<TaskRecord> tasks;
  for (int n = 1; n <= kRuns; ++n) {
    ids.push_back(NthRun(n));
    deltas.push_back({{NthRun(n), 0}, n, 0});
    tasks.push_back(MakeTask(NthRun(n), 0, n));
  }
  ASSERT_TRUE(txn->InsertTasks(tasks).ok());

  std::vector<std::optional<RunRecord>> runs =
      ValueOf(txn->GetRuns(ids, LockMode::kNone, Fields::kNoPayloads));
  std::vector<std::vector<StepStateRecord>> states =
      ValueOf(txn->GetStepStates(ids, Fields::kNoPayloads));
  std::vector<StepCounters> counters = ValueOf(txn->AddStepCounters(deltas));
  std::vector<int64_t> message_ids;
  for (int n = kRuns; n >= 1; --n) message_ids.push_back(n);
  std::vector<std::optional<TaskRecord>> by_message =
      ValueOf(txn->GetTasksByMessage("flow", message_ids, Fields::kNoPayloads));

  ASSERT_EQ(runs.size(), static_cast<size_t>(kRuns));
  ASSERT_EQ(states.size(), static_cast<size_t>(kRuns));
  ASSERT_EQ(counters.size(), static_cast<size_t>(kRuns));
  ASSERT_EQ(by_message.size(), static_cast<size_t>(kRuns));
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(runs[i].has_value()) << i;
    EXPECT_EQ(runs[i]->run_id, ids[i]);
    ASSERT_EQ(states[i].size(), 1u) << i;
    EXPECT_EQ(states[i][0].run_id, ids[i]);
    EXPECT_EQ(counters[i].remaining_tasks, i + 1);
    ASSERT_TRUE(by_message[i].has_value()) << i;
    EXPECT_EQ(by_message[i]->key.run_id, NthRun(kRuns - i));
  }
}

TEST_F(SqliteBackendTest, InsertRuns_DuplicateInBatch_NamesNoRowAndAddsNone) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::vector<RunRecord> runs = {MakeRun(NthRun(1), "flow", kT0),
                                 MakeRun(NthRun(2), "flow", kT0),
                                 MakeRun(NthRun(1), "flow", kT0)};
  std::unique_ptr<Transaction> txn = Begin(*backend);

  absl::Status status = txn->InsertRuns(runs);
  txn.reset();

  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("runs.run_id"));
  EXPECT_EQ(RawDatabase(path()).Value("SELECT count(*) FROM runs"), "0");
}

TEST_F(SqliteBackendTest, AppendReports_AfterTakingTheLast_NeverReusesAnId) {
  std::unique_ptr<SqliteBackend> backend = Open();
  std::unique_ptr<Transaction> txn = Begin(*backend);
  std::vector<OutboxReport> reports(
      3, OutboxReport{0, TaskKey{NthRun(1), 0, 0}, "flow",
                      ReportKind::kCompleted, kT0});

  std::vector<int64_t> first = ValueOf(txn->AppendReports(reports));
  ASSERT_EQ(ValueOf(txn->TakeReports(first)).size(), 3u);
  std::vector<int64_t> second = ValueOf(txn->AppendReports(reports));

  EXPECT_THAT(first, ElementsAre(1, 2, 3));
  EXPECT_THAT(second, ElementsAre(4, 5, 6));
}

// --- Fields ----------------------------------------------------------------

// Payloads that would fail to parse prove that kNoPayloads never parses
// them, while kAll reports each record as unreadable (and still reads it).
TEST_F(SqliteBackendTest, NoPayloads_NeverParsesTheStoredPayloads) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = NthRun(1);
  TaskRecord task = MakeTask(run_id, 0, 1);
  task.status = TaskStatus::kStarted;
  task.stall_at = kT0;
  {
    std::unique_ptr<Transaction> txn = Begin(*backend);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    RunRecord run = MakeRun(run_id, "flow", kT0);
    run.status = RunStatus::kCompleted;
    run.finished_at = kT0;
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    StepStateRecord step = MakeStep(run_id, 0);
    ASSERT_TRUE(txn->InsertStepStates({&step, 1}).ok());
    ASSERT_TRUE(txn->InsertTasks({&task, 1}).ok());
    OutgoingMessage message{J("{}"), kT0};
    ASSERT_TRUE(txn->SendMessages("flow", {&message, 1}, kT0).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }
  RawDatabase raw(path());
  raw.Exec("UPDATE runs SET input = '[', output = '{'");
  raw.Exec("UPDATE step_states SET output = '['");
  raw.Exec("UPDATE tasks SET input = '[', output = '{'");
  // Read, as a claim leaves a started task's message, so that stall
  // recovery finds the task through it.
  raw.Exec("UPDATE messages SET body = '[', read_count = 1");
  const absl::Time later = kT0 + absl::Seconds(1);
  // Each read, with the Fields to use: the `unreadable` text of its record.
  using Read = std::function<absl::StatusOr<std::string>(Transaction&, Fields)>;
  auto first = [](auto got) -> absl::StatusOr<std::string> {
    if (!got.ok()) return got.status();
    if (got->empty()) return absl::NotFoundError("no record");
    const auto& record = got->front();
    if constexpr (requires { record.has_value(); }) {
      if (!record.has_value()) return absl::NotFoundError("no record");
      return record->unreadable;
    } else if constexpr (requires { record.front(); }) {
      return record.front().unreadable;
    } else {
      return record.unreadable;
    }
  };
  const std::vector<Read> reads = {
      [&](Transaction& t, Fields f) {
        return first(t.GetRuns({&run_id, 1}, LockMode::kNone, f));
      },
      [&](Transaction& t, Fields f) {
        return first(t.GetStepStates({&run_id, 1}, f));
      },
      [&](Transaction& t, Fields f) {
        return first(t.GetTasks({&task.key, 1}, f));
      },
      [&](Transaction& t, Fields f) {
        const int64_t id = 1;
        return first(t.GetTasksByMessage("flow", {&id, 1}, f));
      },
      [&](Transaction& t, Fields f) {
        return first(t.GetUnfinishedTasks(run_id, 0, f));
      },
      [&](Transaction& t, Fields f) {
        return first(t.FindStalledTasks(
            {.now = later, .messages_visible_by = later, .limit = 10}, f));
      },
      [&](Transaction& t, Fields f) {
        return first(t.ReadMessages("flow", later, 10, later, f));
      },
  };

  for (size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(ValueOf(reads[i](*Begin(*backend), Fields::kNoPayloads)), "")
        << i;
    EXPECT_THAT(ValueOf(reads[i](*Begin(*backend), Fields::kAll)),
                HasSubstr("is not valid JSON"))
        << i;
  }
  std::unique_ptr<Transaction> txn = Begin(*backend);
  EXPECT_THAT(ValueOf(txn->FindFinishedRuns(later, 10)), testing::SizeIs(1));
}

TEST_F(SqliteBackendTest, NoPayloads_LeavesPayloadsEmpty) {
  std::unique_ptr<SqliteBackend> backend = Open();
  const RunId run_id = NthRun(1);
  std::unique_ptr<Transaction> txn = Begin(*backend);
  ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
  RunRecord run = MakeRun(run_id, "flow", kT0);
  run.output = J("1");
  ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
  StepStateRecord step = MakeStep(run_id, 0);
  step.output = J("2");
  ASSERT_TRUE(txn->InsertStepStates({&step, 1}).ok());
  OutgoingMessage message{J("[3]"), kT0};
  ASSERT_TRUE(txn->SendMessages("flow", {&message, 1}, kT0).ok());

  std::optional<RunRecord> got_run = GetRun(*txn, run_id, Fields::kNoPayloads);
  std::vector<std::vector<StepStateRecord>> states =
      ValueOf(txn->GetStepStates({&run_id, 1}, Fields::kNoPayloads));
  std::vector<MessageRecord> messages =
      ValueOf(txn->ReadMessages("flow", kT0, 1, kT0, Fields::kNoPayloads));

  ASSERT_TRUE(got_run.has_value());
  EXPECT_TRUE(got_run->input.is_null());
  EXPECT_EQ(got_run->output, std::nullopt);
  EXPECT_EQ(got_run->remaining_steps, 1);
  ASSERT_EQ(states[0].size(), 1u);
  EXPECT_EQ(states[0][0].output, std::nullopt);
  EXPECT_EQ(states[0][0].step_slug, "step0");
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(messages[0].body.is_null());
  EXPECT_EQ(messages[0].read_count, 1);
}

}  // namespace
}  // namespace sluice
