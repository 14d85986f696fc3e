// The Transaction contract: transactions and the flow and queue registries (see
// backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Transactions -----------------------------------------------------------

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
  EXPECT_THAT(
      ValueOf(tx->FindStalledTasks(StalledBefore(At(1000), 10), Fields::kAll)),
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
    EXPECT_EQ(WriteCode(*tx, tx->InsertRuns(Movable({MakeRun(3), MakeRun(1)}))),
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
  ASSERT_EQ(WriteCode(*tx, tx->UpdateRuns(Movable({MakeRun(1)}))),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(GetRun(*tx, RunNo(1), LockMode::kNone)),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeOf(tx->Commit()), absl::StatusCode::kFailedPrecondition);
}

// A transaction begun while another is open either waits for it (memory,
// SQLite: one writer) or runs beside it (Postgres). Either way it starts,
// and a read it makes once the first has committed sees that commit. (The
// read waits for the commit itself: on Postgres it could otherwise run
// first, and rightly miss the run.)
TEST_P(BackendContractTest, Begin_WhileAnotherIsOpen_ReadsItsCommitAfterward) {
  std::unique_ptr<Transaction> first = Begin();
  ASSERT_OK(first->InsertRuns(Movable({MakeRun(1)})));
  absl::Notification committed;
  bool began = false;
  std::optional<RunRecord> seen;
  std::thread second([&] {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return;
    began = true;
    if (!committed.WaitForNotificationWithTimeout(absl::Seconds(60))) return;
    absl::StatusOr<std::optional<RunRecord>> run =
        GetRun(*tx, RunNo(1), LockMode::kNone);
    if (run.ok()) seen = *run;
  });
  const absl::Status commit = first->Commit();
  committed.Notify();
  second.join();
  ASSERT_OK(commit);
  EXPECT_TRUE(began);
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
    EXPECT_EQ(
        WriteCode(*tx, tx->InsertFlow({.slug = "greet", .definition = J("2")})),
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
    EXPECT_EQ(WriteCode(*tx, tx->CreateQueue({.name = "shared",
                                              .owner_flow = "greet",
                                              .created_at = kT0})),
              absl::StatusCode::kAlreadyExists);
  }
  ASSERT_OK_AND_ASSIGN(std::optional<QueueRecord> queue,
                       Begin()->GetQueue("shared"));
  EXPECT_EQ(queue->owner_flow, "");
}

}  // namespace
}  // namespace sluice::contract
