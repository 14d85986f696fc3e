// The Transaction contract, v4: a dropped transaction or a failed call takes
// back every v4 write (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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

using ::testing::ElementsAre;

class RollbackV4ContractTest : public BackendContractV4Test {
 protected:
  // Queue "greet" (not paused) with messages of priorities 0, 0, 1; run 1
  // with external key "k1", a task of each message and one ledger entry;
  // dedupe entries "pending" (run 1) and "throttle" (run 1, until At(10)).
  void Seed() {
    CreateQueue("greet");
    Committed([&](Transaction& tx) {
      RunRecord run = MakeRun(1);
      run.external_key = "k1";
      run.metadata = J(R"({"tenant":"a"})");
      ASSERT_OK(tx.InsertRuns(Movable({run})));
      OutgoingMessage high = Message(3);
      high.priority = 1;
      ASSERT_OK_AND_ASSIGN(
          messages_,
          tx.SendMessages("greet", Movable({Message(1), Message(2), high}),
                          kT0));
      ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, messages_[0]),
                                        MakeTask(1, 0, 1, messages_[1]),
                                        MakeTask(1, 0, 2, messages_[2])})));
      ASSERT_OK(tx.AppendAttempts(
          {{AttemptRecord{.task = {RunNo(1), 0, 0},
                          .attempt = 1,
                          .finished_at = kT0,
                          .outcome = AttemptOutcome::kReleased}}}));
      ASSERT_OK(tx.PutDedupe(
          {.flow_slug = "greet", .key = "pending", .run_id = RunNo(1)}));
      ASSERT_OK(tx.PutDedupe({.flow_slug = "greet",
                              .key = "throttle",
                              .run_id = RunNo(1),
                              .expires_at = At(10)}));
    });
  }

  // What the v4 calls read, as text. Reading the queue takes its messages,
  // so it runs in a transaction that is dropped.
  std::string Snapshot() {
    std::unique_ptr<Transaction> tx = Begin();
    std::string out;
    for (const QueueRecord& q : ValueOf(tx->ListQueues())) {
      StrAppend(&out, "queue ", q.name, " paused=", q.paused, "\n");
    }
    for (const RunRecord& r : ValueOf(tx->ListRuns(RunQuery(), Fields::kAll))) {
      StrAppend(&out, "run ", Describe(r), "\n");
    }
    for (const std::optional<RunRecord>& r :
         ValueOf(tx->FindRunsByKey("greet", {{"k1", "k2"}}, Fields::kAll))) {
      StrAppend(&out, "key ", r ? r->run_id.ToString() : "none", "\n");
    }
    for (const TaskRecord& t : ValueOf(tx->ListTasks(RunNo(1)))) {
      StrAppend(&out, "task ", Describe(t), "\n");
    }
    for (const AttemptRecord& a : ValueOf(tx->ListAttempts(RunNo(1)))) {
      StrAppend(&out, "attempt ", a.task.task_index, "#", a.attempt, " ",
                ToString(a.outcome), "\n");
    }
    for (std::string_view key : {"pending", "throttle", "new"}) {
      std::optional<DedupeRecord> d = ValueOf(tx->GetDedupe("greet", key));
      StrAppend(
          &out, "dedupe ", key, " ",
          d ? StrCat(d->run_id.ToString(), " ", Text(d->expires_at)) : "none",
          "\n");
    }
    StrAppend(&out, "next ", Text(ValueOf(tx->NextVisibleAt("greet", kT0))),
              "\n");
    EXPECT_TRUE(tx->SetQueuePaused("greet", false).ok());
    for (const MessageRecord& m : ValueOf(
             tx->ReadMessages("greet", At(1), 100, At(1000), Fields::kAll))) {
      StrAppend(&out, "readable ", Describe(m), "\n");
    }
    return out;
  }

  std::vector<int64_t> messages_;
};
SLUICE_BACKEND_CONTRACT_SUITE(RollbackV4ContractTest);

TEST_P(RollbackV4ContractTest, Drop_WithoutCommit_RollsBackEveryV4Write) {
  Seed();
  const std::string before = Snapshot();
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->SetQueuePaused("greet", true));
    RunRecord run = MakeRun(2);
    run.external_key = "k2";
    run.priority = 5;
    ASSERT_OK(tx->InsertRuns(Movable({run})));
    RunRecord cancel = MakeRun(1);
    cancel.cancel_requested = true;
    ASSERT_OK(tx->UpdateRuns(Movable({cancel})));
    const TaskRecord queued = MakeTask(1, 0, 0, messages_[0]);
    TaskRecord started = Started(queued, At(1), At(60));
    started.budget_start = 1;
    started.cancel_requested = true;
    ASSERT_OK(tx->UpdateTasks(Movable({UpdateOf(queued, started)})));
    ASSERT_OK(tx->AppendAttempts(
        {{AttemptRecord{.task = {RunNo(1), 0, 0}, .attempt = 2},
          AttemptRecord{.task = {RunNo(1), 0, 1}, .attempt = 1}}}));
    ASSERT_OK(tx->PutDedupe(
        {.flow_slug = "greet", .key = "pending", .run_id = RunNo(2)}));
    ASSERT_OK(tx->PutDedupe(
        {.flow_slug = "greet", .key = "new", .run_id = RunNo(2)}));
    ASSERT_EQ(ValueOf(tx->DeleteExpiredDedupe(At(10), 10)), 1);
    OutgoingMessage urgent = Message(4);
    urgent.priority = 9;
    ASSERT_OK(tx->SendMessages("greet", Movable({urgent}), kT0));
    ASSERT_OK(tx->SetVisibility(
        "greet",
        {{{.message_id = messages_[0], .visible_at = At(50), .to_tail = true},
          {.message_id = messages_[2], .visible_at = kT0, .to_tail = true}}}));
    ASSERT_EQ(ValueOf(tx->DeleteDedupe("greet", "new", RunNo(2))), true);
  }
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(RollbackV4ContractTest, Drop_DeleteRuns_RestoresTheLedgerAndTheKey) {
  Seed();
  const std::string before = Snapshot();
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_EQ(ValueOf(tx->DeleteRuns({{RunNo(1)}})), 1);
    RunRecord again = MakeRun(3);
    again.external_key = "k1";
    ASSERT_OK(tx->InsertRuns(Movable({again})));
  }
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(RollbackV4ContractTest, Drop_AfterMovesToTheTail_RestoresClaimOrder) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->SetVisibility(
        "greet",
        {{{.message_id = ids[0], .visible_at = kT0, .to_tail = true}}}));
    ASSERT_OK(tx->SendMessages("greet", Movable({Message(4)}), kT0));
  }
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SetVisibility(
        "greet",
        {{{.message_id = ids[1], .visible_at = kT0, .to_tail = true}}}));
  });
  const std::vector<int64_t> later = Send({Message(5)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(1), 10, At(30), Fields::kAll))),
              ElementsAre(ids[0], ids[2], ids[1], later[0]));
}

TEST_P(RollbackV4ContractTest, FailedCall_RollsBackEarlierV4Writes) {
  Seed();
  const std::string before = Snapshot();
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->PutDedupe(
        {.flow_slug = "greet", .key = "new", .run_id = RunNo(1)}));
    ASSERT_OK(tx->SetQueuePaused("greet", true));
    ASSERT_OK(tx->AppendAttempts(
        {{AttemptRecord{.task = {RunNo(1), 0, 1}, .attempt = 1}}}));
    RunRecord duplicate = MakeRun(2);
    duplicate.external_key = "k1";
    EXPECT_EQ(FailureOf(*tx, tx->InsertRuns(Movable({duplicate}))),
              absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace sluice::contract
