// The Transaction contract: a run or step state written together with the
// move of its counters (UpdateRunsAndCounters, UpdateStepStatesAndCounters;
// see backend_contract_fixture.h).
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST_P(BackendContractTest, UpdateRunsAndCounters_WritesBothAndReturnsCounts) {
  Committed([](Transaction& tx) {
    // remaining_steps = 2 each.
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)})));
  });
  RunRecord completed = MakeRun(1);
  completed.status = RunStatus::kCompleted;
  completed.output = J("[1]");
  completed.finished_at = At(7);
  completed.remaining_steps = 99;  // the delta moves it, not the record
  RunRecord cancelling = MakeRun(2);
  cancelling.cancel_requested = true;
  Committed([&](Transaction& tx) {
    EXPECT_THAT(
        ValueOf(tx.UpdateRunsAndCounters(Movable({completed, cancelling}),
                                         {{RunDelta(1, -2), RunDelta(2, 3)}})),
        ElementsAre(0, 5));
    EXPECT_THAT(ValueOf(tx.UpdateRunsAndCounters({}, {})), IsEmpty());
  });

  std::unique_ptr<Transaction> tx = Begin();
  RunRecord expected = completed;
  expected.remaining_steps = 0;
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(expected));
  RunRecord second = *ValueOf(GetRun(*tx, RunNo(2)));
  EXPECT_TRUE(second.cancel_requested);
  EXPECT_EQ(second.remaining_steps, 5);
}

TEST_P(BackendContractTest, UpdateRunsAndCounters_UnknownRun_ChangesNothing) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  RunRecord completed = MakeRun(1);
  completed.status = RunStatus::kCompleted;
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(
        CodeOf(tx->UpdateRunsAndCounters(Movable({completed, MakeRun(2)}),
                                         {{RunDelta(1, -1), RunDelta(2, -1)}})),
        absl::StatusCode::kNotFound);
  }
  RunRecord stored = *ValueOf(GetRun(*Begin(), RunNo(1)));
  EXPECT_EQ(stored.status, RunStatus::kStarted);
  EXPECT_EQ(stored.remaining_steps, 2);
}

TEST_P(BackendContractTest,
       UpdateRunsAndCounters_NotOneDeltaPerRun_IsInvalidArgument) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)}))); });
  RunRecord completed = MakeRun(1);
  completed.status = RunStatus::kCompleted;
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->UpdateRunsAndCounters(
                  Movable({completed}), {{RunDelta(1, -1), RunDelta(1, -1)}})),
              absl::StatusCode::kInvalidArgument);
  }
  RunRecord stored = *ValueOf(GetRun(*Begin(), RunNo(1)));
  EXPECT_EQ(stored.status, RunStatus::kStarted);
  EXPECT_EQ(stored.remaining_steps, 2);
}

TEST_P(BackendContractTest,
       UpdateStepStatesAndCounters_WritesBothAndReturnsCounters) {
  SeedRun();  // remaining_deps = 1 each, remaining_tasks unset
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AddStepCounters({{StepDelta(1, 1, 4, 0)}}));
  });
  StepStateRecord done = MakeStep(1, 1);
  done.status = StepStatus::kCompleted;
  done.initial_tasks = 4;
  done.remaining_tasks = 99;  // the delta moves the counters, not the record
  done.output = J("[1,2,3,4]");
  done.started_at = At(4);
  done.finished_at = At(5);
  StepStateRecord ready = MakeStep(1, 0);
  ready.status = StepStatus::kStarted;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<StepCounters> counters,
        tx.UpdateStepStatesAndCounters(
            Movable({done, ready}),
            {{StepDelta(1, 1, -4, 0), StepDelta(1, 0, 0, -1)}}));
    ASSERT_EQ(counters.size(), 2u);
    EXPECT_EQ(counters[0].remaining_tasks, 0);
    EXPECT_EQ(counters[0].remaining_deps, 1);
    // An unset remaining_tasks counts as 0, as in AddStepCounters.
    EXPECT_EQ(counters[1].remaining_tasks, 0);
    EXPECT_EQ(counters[1].remaining_deps, 0);
  });

  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  ASSERT_EQ(steps.size(), 2u);
  StepStateRecord expected = done;
  expected.remaining_tasks = 0;
  EXPECT_EQ(Describe(steps[1]), Describe(expected));
  EXPECT_EQ(steps[0].status, StepStatus::kStarted);
  EXPECT_EQ(steps[0].remaining_tasks, 0);
  EXPECT_EQ(steps[0].remaining_deps, 0);
}

TEST_P(BackendContractTest,
       UpdateStepStatesAndCounters_StepNamedTwice_LastRecordEachDelta) {
  SeedRun();  // remaining_deps = 1 each, remaining_tasks unset
  StepStateRecord started = MakeStep(1, 0);
  started.status = StepStatus::kStarted;
  StepStateRecord done = started;
  done.status = StepStatus::kCompleted;
  done.finished_at = At(5);
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<StepCounters> counters,
        tx.UpdateStepStatesAndCounters(
            Movable({started, done}),
            {{StepDelta(1, 0, 3, 0), StepDelta(1, 0, -1, -1)}}));
    ASSERT_EQ(counters.size(), 2u);
    EXPECT_EQ(counters[0].remaining_tasks, 3);
    EXPECT_EQ(counters[0].remaining_deps, 1);
    EXPECT_EQ(counters[1].remaining_tasks, 2);
    EXPECT_EQ(counters[1].remaining_deps, 0);
  });
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(steps[0].status, StepStatus::kCompleted);
  EXPECT_EQ(steps[0].finished_at, At(5));
  EXPECT_EQ(steps[0].remaining_tasks, 2);
  EXPECT_EQ(steps[0].remaining_deps, 0);
}

TEST_P(BackendContractTest,
       UpdateStepStatesAndCounters_UnknownStep_ChangesNothing) {
  SeedRun();
  StepStateRecord started = MakeStep(1, 0);
  started.status = StepStatus::kStarted;
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->UpdateStepStatesAndCounters(
                  Movable({started, MakeStep(1, 5)}),
                  {{StepDelta(1, 0, 1, -1), StepDelta(1, 5, 1, 0)}})),
              absl::StatusCode::kNotFound);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(Describe(steps[0]), Describe(MakeStep(1, 0)));
}

TEST_P(BackendContractTest,
       UpdateStepStatesAndCounters_NotOneDeltaPerStep_IsInvalidArgument) {
  SeedRun();
  StepStateRecord started = MakeStep(1, 0);
  started.status = StepStatus::kStarted;
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(CodeOf(tx->UpdateStepStatesAndCounters(Movable({started}), {})),
              absl::StatusCode::kInvalidArgument);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<StepStateRecord> steps,
                       GetSteps(*Begin(), RunNo(1)));
  EXPECT_EQ(Describe(steps[0]), Describe(MakeStep(1, 0)));
}

}  // namespace
}  // namespace sluice::contract
