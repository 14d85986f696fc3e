// internal::OneTripRunReads on Postgres: a run's view, and runs with their
// step states, read in one round trip are what the separate reads return;
// so are a finish's task updates and its runs' read (OneTripFinishes).
// Needs SLUICE_TEST_POSTGRES_URL; skips without it.
#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/engine.h"
#include "sluice/errors.h"
#include "sluice/flow.h"
#include "sluice/internal/one_trip_finishes.h"
#include "sluice/internal/one_trip_reads.h"
#include "sluice/job.h"
#include "sluice/postgres.h"
#include "support/drive_job.h"
#include "support/postgres_test_database.h"

namespace sluice::testing {
namespace {

using internal::OneTripFinishes;
using internal::OneTripRunReads;
using internal::RunsWithSteps;
using internal::RunWithParts;

class PostgresOneTripReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
    absl::StatusOr<std::unique_ptr<TestDatabase>> database =
        TestDatabase::Create();
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *std::move(database);
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        OpenPostgres(database_->url());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*backend_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // The view through the capability, in a transaction of its own.
  std::optional<RunWithParts> OneTrip(const RunId& run_id) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return std::nullopt;
    auto* reads = dynamic_cast<OneTripRunReads*>(tx->get());
    EXPECT_NE(reads, nullptr) << "Postgres transactions offer OneTripRunReads";
    if (reads == nullptr) return std::nullopt;
    absl::StatusOr<std::optional<RunWithParts>> parts =
        reads->ReadRunWithParts(run_id);
    EXPECT_TRUE(parts.ok()) << parts.status();
    return parts.ok() ? *std::move(parts) : std::nullopt;
  }

  // The same view through the four Transaction calls.
  RunWithParts Separately(const RunId& run_id) {
    RunWithParts parts;
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return parts;
    auto runs =
        (*tx)->GetRuns(std::span(&run_id, 1), LockMode::kNone, Fields::kAll);
    auto steps = (*tx)->GetStepStates(std::span(&run_id, 1), Fields::kAll);
    auto tasks = (*tx)->ListTasks(run_id);
    auto attempts = (*tx)->ListAttempts(run_id);
    EXPECT_TRUE(runs.ok() && steps.ok() && tasks.ok() && attempts.ok());
    if (!runs.ok() || !(*runs)[0] || !steps.ok() || !tasks.ok() ||
        !attempts.ok()) {
      return parts;
    }
    parts.run = *(*runs)[0];
    parts.steps = (*steps)[0];
    parts.tasks = *tasks;
    parts.attempts = *attempts;
    return parts;
  }

  // Runs of a two-step flow, started and not yet claimed: each has two
  // stored step states.
  std::vector<RunId> StartTwoStepRuns(int count) {
    Flow flow("two_steps");
    auto echo = [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
      return in;
    };
    flow.Step("first", echo).Step("second", {.depends_on = {"first"}}, echo);
    EXPECT_TRUE(engine_->Deploy(flow).ok());
    std::vector<RunId> ids;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<RunId> id = engine_->StartRun("two_steps", Json(i));
      EXPECT_TRUE(id.ok()) << id.status();
      if (id.ok()) ids.push_back(*id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  // A transaction that holds `run`'s lock until it ends.
  std::unique_ptr<Transaction> Hold(const RunId& run) {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return nullptr;
    absl::Status locked =
        (*tx)
            ->GetRuns(std::span(&run, 1), LockMode::kForUpdate,
                      Fields::kNoPayloads)
            .status();
    EXPECT_TRUE(locked.ok()) << locked;
    return locked.ok() ? *std::move(tx) : nullptr;
  }

  static RunsWithSteps ReadBoth(Transaction& tx, std::span<const RunId> ids,
                                LockMode lock) {
    auto* reads = dynamic_cast<OneTripRunReads*>(&tx);
    EXPECT_NE(reads, nullptr) << "Postgres transactions offer OneTripRunReads";
    if (reads == nullptr) return {};
    absl::StatusOr<RunsWithSteps> both =
        reads->ReadRunsWithSteps(ids, lock, Fields::kNoPayloads);
    EXPECT_TRUE(both.ok()) << both.status();
    return both.ok() ? *std::move(both) : RunsWithSteps{};
  }

  std::unique_ptr<TestDatabase> database_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(PostgresOneTripReadsTest, RunsWithSteps_AreWhatTheSeparateReadsReturn) {
  std::vector<RunId> ids = StartTwoStepRuns(2);
  ASSERT_EQ(ids.size(), 2u);
  ids.push_back(RunId(0x0190'0000'0000'7000, 0x8000'0000'0000'0002));

  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  RunsWithSteps both = ReadBoth(**tx, ids, LockMode::kForUpdate);
  auto runs = (*tx)->GetRuns(ids, LockMode::kNone, Fields::kNoPayloads);
  auto steps = (*tx)->GetStepStates(ids, Fields::kNoPayloads);
  ASSERT_TRUE(runs.ok() && steps.ok());
  ASSERT_EQ(both.runs.size(), 3u);
  ASSERT_EQ(both.steps.size(), 3u);
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(both.runs[i].has_value(), (*runs)[i].has_value()) << i;
    ASSERT_EQ(both.steps[i].size(), (*steps)[i].size()) << i;
    for (size_t s = 0; s < both.steps[i].size(); ++s) {
      EXPECT_EQ(both.steps[i][s].step_index, (*steps)[i][s].step_index);
      EXPECT_EQ(both.steps[i][s].status, (*steps)[i][s].status);
      EXPECT_EQ(both.steps[i][s].remaining_tasks,
                (*steps)[i][s].remaining_tasks);
    }
    if (!both.runs[i]) continue;
    EXPECT_EQ(both.runs[i]->run_id, ids[i]);
    EXPECT_EQ(both.runs[i]->status, (*runs)[i]->status);
    EXPECT_EQ(both.runs[i]->remaining_steps, (*runs)[i]->remaining_steps);
  }
  EXPECT_TRUE(both.runs[0].has_value());
  EXPECT_EQ(both.steps[0].size(), 2u);
  EXPECT_FALSE(both.runs[2].has_value());  // no such run
  EXPECT_TRUE(both.steps[2].empty());
  ASSERT_TRUE((*tx)->Commit().ok());
}

TEST_F(PostgresOneTripReadsTest, RunsWithSteps_SkipLocked_LeavesOutAHeldRun) {
  const std::vector<RunId> ids = StartTwoStepRuns(2);
  ASSERT_EQ(ids.size(), 2u);
  std::unique_ptr<Transaction> holder = Hold(ids[0]);
  ASSERT_NE(holder, nullptr);

  // Another thread: one open transaction per thread.
  RunsWithSteps both;
  std::thread reader([&] {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    both = ReadBoth(**tx, ids, LockMode::kSkipLocked);
    EXPECT_TRUE((*tx)->Commit().ok());
  });
  reader.join();
  ASSERT_TRUE(holder->Commit().ok());
  ASSERT_EQ(both.runs.size(), 2u);
  EXPECT_FALSE(both.runs[0].has_value());  // held by the other transaction
  ASSERT_TRUE(both.runs[1].has_value());
  EXPECT_EQ(both.runs[1]->run_id, ids[1]);
  EXPECT_EQ(both.steps[1].size(), 2u);
}

// internal::OneTripFinishes: a finish's task updates, then its runs' read,
// in one call.
class PostgresOneTripFinishesTest : public PostgresOneTripReadsTest {
 protected:
  // Starts the first task of each run in `ids` (those of StartTwoStepRuns)
  // in `tx`, the one of run `stale` expecting a status it does not have;
  // then reads `ids` with `lock`.
  static OneTripFinishes::Updated StartFirstTasks(Transaction& tx,
                                                  std::span<const RunId> ids,
                                                  size_t stale, LockMode lock) {
    std::vector<TaskKey> keys;
    for (const RunId& id : ids) keys.push_back({id, 0, 0});
    auto tasks = tx.GetTasks(keys, Fields::kAll);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    std::vector<TaskUpdate> updates;
    for (size_t i = 0; tasks.ok() && i < tasks->size(); ++i) {
      if (!(*tasks)[i]) continue;
      TaskUpdate update{.task = *(*tasks)[i], .expected_attempts = 0};
      update.task.status = TaskStatus::kStarted;
      update.task.attempts = 1;
      if (i == stale) update.expected_status = TaskStatus::kStarted;
      updates.push_back(std::move(update));
    }
    auto* finishes = dynamic_cast<OneTripFinishes*>(&tx);
    EXPECT_NE(finishes, nullptr) << "Postgres transactions offer it";
    if (finishes == nullptr) return {};
    absl::StatusOr<OneTripFinishes::Updated> updated =
        finishes->UpdateTasksThenReadRuns(updates, ids, lock,
                                          Fields::kNoPayloads);
    EXPECT_TRUE(updated.ok()) << updated.status();
    return updated.ok() ? *std::move(updated) : OneTripFinishes::Updated{};
  }
};

TEST_F(PostgresOneTripFinishesTest, UpdatesThenRuns_AreTheSeparateCalls) {
  std::vector<RunId> ids = StartTwoStepRuns(2);
  ASSERT_EQ(ids.size(), 2u);
  ids.push_back(RunId(0x0190'0000'0000'7000, 0x8000'0000'0000'0002));
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  OneTripFinishes::Updated updated =
      StartFirstTasks(**tx, ids, /*stale=*/1, LockMode::kSkipLocked);
  EXPECT_EQ(updated.applied, (std::vector<bool>{true, false}));
  ASSERT_EQ(updated.runs.runs.size(), 3u);
  ASSERT_EQ(updated.runs.steps.size(), 3u);
  auto runs = (*tx)->GetRuns(ids, LockMode::kNone, Fields::kNoPayloads);
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(updated.runs.runs[i].has_value(), (*runs)[i].has_value()) << i;
    if (!(*runs)[i]) continue;
    EXPECT_EQ(updated.runs.runs[i]->run_id, ids[i]);
    EXPECT_EQ(updated.runs.steps[i].size(), 2u);
  }
  EXPECT_FALSE(updated.runs.runs[2].has_value());  // no such run
  std::vector<TaskKey> keys = {{ids[0], 0, 0}, {ids[1], 0, 0}};
  auto tasks = (*tx)->GetTasks(keys, Fields::kNoPayloads);
  ASSERT_TRUE(tasks.ok() && (*tasks)[0] && (*tasks)[1]);
  EXPECT_EQ((*tasks)[0]->status, TaskStatus::kStarted);
  EXPECT_EQ((*tasks)[1]->status, TaskStatus::kQueued);  // the stale update
  ASSERT_TRUE((*tx)->Commit().ok());
}

TEST_F(PostgresOneTripFinishesTest, SkipLocked_LeavesOutAHeldRun) {
  const std::vector<RunId> ids = StartTwoStepRuns(2);
  ASSERT_EQ(ids.size(), 2u);
  std::unique_ptr<Transaction> holder = Hold(ids[0]);
  ASSERT_NE(holder, nullptr);
  OneTripFinishes::Updated updated;
  std::thread finisher([&] {  // one open transaction per thread
    absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    updated = StartFirstTasks(**tx, ids, /*stale=*/2, LockMode::kSkipLocked);
    EXPECT_TRUE((*tx)->Commit().ok());
  });
  finisher.join();
  ASSERT_TRUE(holder->Commit().ok());
  EXPECT_EQ(updated.applied, (std::vector<bool>{true, true}));
  ASSERT_EQ(updated.runs.runs.size(), 2u);
  EXPECT_FALSE(updated.runs.runs[0].has_value());  // held by the other one
  ASSERT_TRUE(updated.runs.runs[1].has_value());
  EXPECT_EQ(updated.runs.steps[1].size(), 2u);
}

TEST_F(PostgresOneTripReadsTest, ARunsView_IsWhatTheSeparateReadsReturn) {
  Job job("echo", {.queue = "echo"},
          [](const Json& payload, TaskContext&) -> absl::StatusOr<Json> {
            if (payload.as_int64() == 2) return NonRetryable("refused");
            return payload;
          });
  ASSERT_TRUE(engine_->Deploy(job).ok());
  absl::StatusOr<EnqueueResult> done = engine_->Enqueue("echo", Json(1));
  absl::StatusOr<EnqueueResult> failed = engine_->Enqueue("echo", Json(2));
  ASSERT_TRUE(done.ok() && failed.ok());
  EXPECT_EQ(DriveJob(*engine_, job), 2);

  for (const RunId& id : {done->run_id, failed->run_id}) {
    std::optional<RunWithParts> one_trip = OneTrip(id);
    ASSERT_TRUE(one_trip.has_value());
    RunWithParts separate = Separately(id);
    EXPECT_EQ(one_trip->run.run_id, separate.run.run_id);
    EXPECT_EQ(one_trip->run.status, separate.run.status);
    EXPECT_EQ(one_trip->run.output, separate.run.output);
    EXPECT_EQ(one_trip->run.error, separate.run.error);
    // A one-step run's completed step state is not stored (decision
    // 0069); the failed run's is.
    const size_t steps = id == failed->run_id ? 1 : 0;
    ASSERT_EQ(one_trip->steps.size(), separate.steps.size());
    ASSERT_EQ(one_trip->steps.size(), steps);
    for (size_t i = 0; i < steps; ++i) {
      EXPECT_EQ(one_trip->steps[i].status, separate.steps[i].status);
    }
    ASSERT_EQ(one_trip->tasks.size(), 1u);
    ASSERT_EQ(separate.tasks.size(), 1u);
    EXPECT_EQ(one_trip->tasks[0].status, separate.tasks[0].status);
    EXPECT_EQ(one_trip->tasks[0].output, separate.tasks[0].output);
    // A completed attempt is not stored (decision 0067): the failed run's
    // ledger holds one entry, the completed run's none.
    const size_t stored = id == failed->run_id ? 1 : 0;
    ASSERT_EQ(one_trip->attempts.size(), stored);
    ASSERT_EQ(separate.attempts.size(), stored);
    for (size_t i = 0; i < stored; ++i) {
      EXPECT_EQ(one_trip->attempts[i].outcome, separate.attempts[i].outcome);
      EXPECT_EQ(one_trip->attempts[i].error, separate.attempts[i].error);
    }
  }
  EXPECT_EQ(OneTrip(done->run_id)->run.status, RunStatus::kCompleted);
  EXPECT_EQ(OneTrip(failed->run_id)->run.status, RunStatus::kFailed);

  // Engine::GetRun reads through it, and derives the completed attempt.
  absl::StatusOr<RunView> view = engine_->GetRun(failed->run_id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->run.status, RunStatus::kFailed);
  EXPECT_EQ(view->attempts.size(), 1u);
  view = engine_->GetRun(done->run_id);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->attempts.size(), 1u);
  EXPECT_EQ(view->attempts[0].outcome, AttemptOutcome::kCompleted);
  EXPECT_EQ(view->attempts[0].finished_at, view->tasks[0].finished_at);
  // ... and the completed step state.
  ASSERT_EQ(view->steps.size(), 1u);
  EXPECT_EQ(view->steps[0].status, StepStatus::kCompleted);
  EXPECT_EQ(view->steps[0].output, Json(1));
}

TEST_F(PostgresOneTripReadsTest, AMissingRun_IsNoneAndTheEngineSaysNotFound) {
  const RunId missing(0x0190'0000'0000'7000, 0x8000'0000'0000'0001);
  absl::StatusOr<std::unique_ptr<Transaction>> tx = backend_->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  auto* reads = dynamic_cast<OneTripRunReads*>(tx->get());
  ASSERT_NE(reads, nullptr);
  absl::StatusOr<std::optional<RunWithParts>> parts =
      reads->ReadRunWithParts(missing);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_FALSE(parts->has_value());
  tx->reset();  // one transaction per thread
  EXPECT_EQ(engine_->GetRun(missing).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice::testing
