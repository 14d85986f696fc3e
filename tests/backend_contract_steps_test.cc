// The Transaction contract: step states and the outbox (see
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
#include "sluice/internal/writes_keep_outputs.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Step states ------------------------------------------------------------

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
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.InsertStepStates(Movable({MakeStep(1, 1)}));
                      }),
            absl::StatusCode::kAlreadyExists);
}

TEST_P(BackendContractTest, InsertStepStates_UnknownRun_FailsWithNotFound) {
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.InsertStepStates(Movable({MakeStep(1, 0)}));
                      }),
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

// internal::WritesKeepOutputs promises that record writes leave outputs in
// place, so the engine can lend one output to two records (decision 0053).
TEST_P(BackendContractTest, WritesKeepOutputs_LeavesEveryWrittenOutputInPlace) {
  std::unique_ptr<Transaction> probe = Begin();
  if (dynamic_cast<internal::WritesKeepOutputs*>(probe.get()) == nullptr) {
    GTEST_SKIP() << GetParam() << " may move outputs (it has no marker)";
  }
  probe.reset();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(tx.InsertStepStates(Movable({MakeStep(1, 0)})));
  });
  const Json output = J(R"({"kept":["a","b"]})");
  RunRecord run = MakeRun(1);
  run.status = RunStatus::kCompleted;
  run.output = output;
  StepStateRecord step = MakeStep(1, 0);
  step.status = StepStatus::kCompleted;
  step.output = output;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpdateRuns(std::span(&run, 1)));
    ASSERT_OK(tx.UpdateStepStates(std::span(&step, 1)));
    RunCounterDelta run_delta = RunDelta(1, 0);
    ASSERT_OK(
        tx.UpdateRunsAndCounters(std::span(&run, 1), std::span(&run_delta, 1))
            .status());
    StepCounterDelta step_delta = StepDelta(1, 0, 0, 0);
    ASSERT_OK(tx.UpdateStepStatesAndCounters(std::span(&step, 1),
                                             std::span(&step_delta, 1))
                  .status());
  });
  EXPECT_EQ(run.output, output);
  EXPECT_EQ(step.output, output);
}

TEST_P(BackendContractTest, UpdateStepStates_UnknownStep_FailsWithNotFound) {
  SeedRun();
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.UpdateStepStates(Movable({MakeStep(1, 5)}));
                      }),
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

// --- Outbox -----------------------------------------------------------------

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

}  // namespace
}  // namespace sluice::contract
