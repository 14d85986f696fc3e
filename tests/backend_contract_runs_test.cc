// The Transaction contract: runs, finished runs (see
// backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Runs -------------------------------------------------------------------

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
  EXPECT_EQ(WriteCode(*tx, tx->InsertRuns(Movable({MakeRun(2), MakeRun(1)}))),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertRuns_SameIdTwiceInOneBatch_FailsAndAddsNone) {
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(WriteCode(*tx, tx->InsertRuns(Movable({MakeRun(1), MakeRun(1)}))),
              absl::StatusCode::kAlreadyExists);
  }
  ASSERT_OK_AND_ASSIGN(
      std::vector<RunRecord> runs,
      Begin()->ListRuns(RunQuery::OfFlow("", 10), Fields::kAll));
  EXPECT_THAT(runs, IsEmpty());
}

TEST_P(BackendContractTest,
       InsertRuns_LentInputs_StoresEachInPlaceOfTheRecords) {
  const Json lent = J(R"([1,{"a":[2,3]},"x"])");
  RunRecord borrower = MakeRun(1);
  borrower.input = Json();  // the engine leaves it null when it lends one
  RunRecord owner = MakeRun(2);
  owner.input = J(R"({"own":true})");
  const std::vector<const Json*> inputs = {&lent, nullptr};
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({borrower, owner}), inputs));
  });
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::optional<RunRecord>> got,
      Begin()->GetRuns({{RunNo(1), RunNo(2)}}, LockMode::kNone, Fields::kAll));
  ASSERT_TRUE(got[0].has_value() && got[1].has_value());
  EXPECT_EQ(Text(got[0]->input), R"([1,{"a":[2,3]},"x"])");
  EXPECT_EQ(Text(got[1]->input), R"({"own":true})");
}

TEST_P(BackendContractTest, InsertRuns_InputsNotOnePerRun_FailsAndAddsNone) {
  const Json lent = J("[1]");
  const std::vector<const Json*> inputs = {&lent};
  {
    std::unique_ptr<Transaction> tx = Begin();
    absl::Status inserted =
        tx->InsertRuns(Movable({MakeRun(1), MakeRun(2)}), inputs);
    EXPECT_EQ(inserted.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(inserted.message(), HasSubstr("1 inputs for 2 runs"));
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
    EXPECT_EQ(WriteCode(*tx, tx->UpdateRuns(Movable({completed, MakeRun(2)}))),
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

// --- Finished runs and deletion ---------------------------------------------

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

// Several flows' ended runs come out in one order, by finish time and then
// insertion, even where a run of one flow ties another inserted before it.
TEST_P(BackendContractTest, FindFinishedRuns_AcrossFlows_OneOrderWithTies) {
  auto ended = [](uint64_t n, std::string flow, int finished) {
    RunRecord run = Ended(n, RunStatus::kCompleted, At(finished));
    run.flow_slug = std::move(flow);
    return run;
  };
  RunRecord not_ended = MakeRun(20, "c");
  not_ended.finished_at = At(5);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({ended(12, "a", 20), ended(14, "b", 30), ended(11, "a", 10),
                 ended(10, "a", 20), ended(13, "b", 25), not_ended})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(50), 2))),
              ElementsAre(RunNo(11), RunNo(12)));
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(50), 3))),
              ElementsAre(RunNo(11), RunNo(12), RunNo(10)));
  EXPECT_THAT(
      RunIdsOf(ValueOf(tx->FindFinishedRuns(At(50), 10))),
      ElementsAre(RunNo(11), RunNo(12), RunNo(10), RunNo(13), RunNo(14)));
  EXPECT_THAT(RunIdsOf(ValueOf(tx->FindFinishedRuns(At(30), 10))),
              ElementsAre(RunNo(11), RunNo(12), RunNo(10), RunNo(13)));
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

}  // namespace
}  // namespace sluice::contract
