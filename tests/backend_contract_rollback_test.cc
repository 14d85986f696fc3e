// The Transaction contract: rollback of any mix of changes, and deleting runs
// (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

// The fixture's overloads, next to this file's own.
using ::sluice::contract::Describe;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Rollback of arbitrary mixes of changes ---------------------------------

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
  for (const TaskRecord& t : ValueOf(tx->FindStalledTasks(
           StalledBefore(absl::InfiniteFuture(), 1000), Fields::kAll))) {
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

// --- Deleting runs ----------------------------------------------------------

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
      // The sixth is run 3's started task's, read by its claim: the others
      // are not visible yet when it is read.
      ASSERT_OK_AND_ASSIGN(
          seed.greet,
          tx.SendMessages(
              "greet",
              Movable({Message(1, At(1)), Message(2, At(1)), Message(3, At(1)),
                       Message(4, At(1)), Message(5, At(1)), Message(6)}),
              kT0));
      ASSERT_OK_AND_ASSIGN(
          std::vector<MessageRecord> read,
          tx.ReadMessages("greet", kT0, 10, At(60), Fields::kNoPayloads));
      ASSERT_THAT(IdsOf(read), ElementsAre(seed.greet[5]));
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

SLUICE_BACKEND_CONTRACT_SUITE(DeleteRunsTest);

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
  EXPECT_THAT(TaskIndexesOf(ValueOf(tx->FindStalledTasks(
                  StalledBefore(absl::InfiniteFuture(), 10), Fields::kAll))),
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

}  // namespace
}  // namespace sluice::contract
