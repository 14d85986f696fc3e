// internal::CheckedCounterMoves on Postgres (decision 0085): counter moves
// sent with the counters the engine expects, checked in SQL. As expected,
// they are written; a counter that differs or a row that is missing fails
// the transaction at COMMIT, and nothing is changed.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_jobs_fixture.h"
#include "sluice/engine.h"
#include "sluice/flow.h"
#include "sluice/internal/checked_counters.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using internal::CheckedCounterMoves;
using ::testing::HasSubstr;

class PostgresCheckedCountersTest : public PostgresJobsTest {
 protected:
  void SetUp() override {
    PostgresJobsTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    RunRecord run = MakeRun(1);
    run.remaining_steps = 5;
    ASSERT_TRUE(Insert({run}).ok());
    ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                  std::vector<StepStateRecord> steps = {StepOf(1)};
                  return tx.InsertStepStates(std::span(steps));
                }).ok());
  }

  static StepStateRecord StepOf(uint64_t run) {
    StepStateRecord step;
    step.run_id = RunNo(run);
    step.step_slug = "job";
    step.status = StepStatus::kStarted;
    step.remaining_tasks = 4;
    step.remaining_deps = 2;
    return step;
  }

  // Runs `moves` on the transaction's CheckedCounterMoves; returns the
  // commit's status.
  absl::Status Checked(
      const std::function<absl::Status(CheckedCounterMoves&)>& moves) {
    return InTransaction([&](Transaction& tx) {
      auto* checked = dynamic_cast<CheckedCounterMoves*>(&tx);
      if (checked == nullptr) return absl::InternalError("not offered");
      return moves(*checked);
    });
  }

  // "remaining_steps remaining_tasks remaining_deps" of run 1.
  std::string Counters() {
    SqlSession sql(db_->url());
    return sql
        .Value(
            "SELECT format('%s %s %s', r.remaining_steps, s.remaining_tasks, "
            "s.remaining_deps) FROM sluice.runs r JOIN sluice.step_states s "
            "USING (run_id)")
        .value_or("none");
  }
};

TEST_F(PostgresCheckedCountersTest, MovesAsExpected_AreWritten) {
  std::vector<RunCounterDelta> runs = {{RunNo(1), -1}, {RunNo(1), -2}};
  std::vector<StepCounterDelta> steps = {{{RunNo(1), 0}, -1, 0},
                                         {{RunNo(1), 0}, -1, -1}};
  // A row moved twice is checked at its last delta.
  EXPECT_TRUE(Checked([&](CheckedCounterMoves& tx) {
                SLUICE_RETURN_IF_ERROR(tx.AddRunRemainingStepsChecked(
                    runs, std::vector<int>{4, 2}));
                return tx.AddStepCountersChecked(
                    steps, std::vector<StepCounters>{{3, 2}, {2, 1}});
              }).ok());
  EXPECT_EQ(Counters(), "2 2 1");

  std::vector<RunRecord> records = {MakeRun(1)};
  records[0].status = RunStatus::kCompleted;
  std::vector<StepStateRecord> states = {StepOf(1)};
  states[0].status = StepStatus::kCompleted;
  EXPECT_TRUE(Checked([&](CheckedCounterMoves& tx) {
                SLUICE_RETURN_IF_ERROR(tx.UpdateRunsAndCheckCounters(
                    records, std::vector<RunCounterDelta>{{RunNo(1), -2}},
                    std::vector<int>{0}));
                return tx.UpdateStepStatesAndCheckCounters(
                    states,
                    std::vector<StepCounterDelta>{{{RunNo(1), 0}, -2, -1}},
                    std::vector<StepCounters>{{0, 0}});
              }).ok());
  EXPECT_EQ(Counters(), "0 0 0");
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT status FROM sluice.runs"), "completed");
  EXPECT_EQ(sql.Value("SELECT status FROM sluice.step_states"), "completed");
}

TEST_F(PostgresCheckedCountersTest, ACounterThatDiffers_FailsTheCommit) {
  std::vector<RunRecord> records = {MakeRun(1)};
  std::vector<StepStateRecord> states = {StepOf(1)};
  const std::vector<RunCounterDelta> run = {{RunNo(1), -1}};
  const std::vector<StepCounterDelta> step = {{{RunNo(1), 0}, -1, 0}};
  const std::vector<int> steps_wrong = {3};                   // 5 - 1 is 4
  const std::vector<StepCounters> counters_wrong = {{3, 1}};  // (3, 2)
  const std::string run_differs =
      "remaining_steps is 4 but the engine expected 3; nothing was changed";
  const std::string step_differs =
      "step 0: counters are (tasks 3, deps 2) but the engine expected (3, 1)";
  struct Case {
    std::string name;
    std::function<absl::Status(CheckedCounterMoves&)> moves;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"AddRunRemainingStepsChecked",
       [&](CheckedCounterMoves& tx) {
         return tx.AddRunRemainingStepsChecked(run, steps_wrong);
       },
       run_differs},
      {"UpdateRunsAndCheckCounters",
       [&](CheckedCounterMoves& tx) {
         return tx.UpdateRunsAndCheckCounters(records, run, steps_wrong);
       },
       run_differs},
      {"AddStepCountersChecked",
       [&](CheckedCounterMoves& tx) {
         return tx.AddStepCountersChecked(step, counters_wrong);
       },
       step_differs},
      {"UpdateStepStatesAndCheckCounters",
       [&](CheckedCounterMoves& tx) {
         return tx.UpdateStepStatesAndCheckCounters(states, step,
                                                    counters_wrong);
       },
       step_differs},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::Status committed = Checked(c.moves);
    EXPECT_EQ(committed.code(), absl::StatusCode::kInternal) << committed;
    EXPECT_THAT(committed.message(), HasSubstr(c.message));
    EXPECT_EQ(Counters(), "5 4 2");
  }
}

TEST_F(PostgresCheckedCountersTest, AMissingRow_FailsTheCommit_NotFound) {
  RunRecord missing = MakeRun(2);
  std::vector<RunRecord> records = {MakeRun(1), missing};
  const std::vector<RunCounterDelta> runs = {{RunNo(1), -1}, {RunNo(2), -1}};
  absl::Status committed = Checked([&](CheckedCounterMoves& tx) {
    return tx.UpdateRunsAndCheckCounters(records, runs, std::vector<int>{4, 0});
  });
  EXPECT_EQ(committed.code(), absl::StatusCode::kNotFound) << committed;
  EXPECT_THAT(committed.message(), HasSubstr(StrCat("run ", RunNo(2).ToString(),
                                                    " does not exist")));
  committed = Checked([&](CheckedCounterMoves& tx) {
    return tx.AddStepCountersChecked(
        std::vector<StepCounterDelta>{{{RunNo(1), 1}, -1, 0}},
        std::vector<StepCounters>{{0, 0}});
  });
  EXPECT_EQ(committed.code(), absl::StatusCode::kNotFound) << committed;
  EXPECT_THAT(committed.message(), HasSubstr("step 1 of run"));
  EXPECT_EQ(Counters(), "5 4 2");
}

TEST_F(PostgresCheckedCountersTest,
       ExpectedCountersOfAnotherLength_AreRefused) {
  absl::Status refused = Checked([&](CheckedCounterMoves& tx) {
    return tx.AddRunRemainingStepsChecked(
        std::vector<RunCounterDelta>{{RunNo(1), -1}}, std::vector<int>{});
  });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("1 counter deltas but 0 expected"));
  EXPECT_EQ(Counters(), "5 4 2");
}

// A finish that applies its completions and finds a run's counter moved
// behind the engine's back (a trigger here) fails at COMMIT; as for an
// apply that fails earlier, the results are recorded again without it and
// their reports wait in the outbox (decision 0048).
TEST_F(PostgresCheckedCountersTest,
       ACounterThatDrifts_LeavesTheResultRecorded) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*backend_);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Flow flow("drift");
  auto echo = [](const Json& in, TaskContext&) -> absl::StatusOr<Json> {
    return in;
  };
  flow.Step("a", echo).Step("b", {.depends_on = {"a"}}, echo);
  ASSERT_TRUE((*engine)->Deploy(flow).ok());
  absl::StatusOr<RunId> run = (*engine)->StartRun("drift", J("{}"));
  ASSERT_TRUE(run.ok()) << run.status();
  ClaimRequest request;
  request.queue = "drift";
  request.worker_id = "w";
  request.served.AddFlow(flow.shape());
  absl::StatusOr<std::vector<ClaimedTask>> claimed = (*engine)->Claim(request);
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1u) << claimed.status();
  SqlSession sql(db_->url());
  sql.Script(
      "CREATE FUNCTION drift() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "NEW.remaining_steps := NEW.remaining_steps + 1; RETURN NEW; END $$; "
      "CREATE TRIGGER drift BEFORE UPDATE OF remaining_steps ON sluice.runs "
      "FOR EACH ROW EXECUTE FUNCTION drift()");

  TaskResult result{(*claimed)[0].key, (*claimed)[0].attempt, J("1")};
  absl::StatusOr<FinishOutcome> outcome = (*engine)->FinishTasks(
      std::span(&result, 1), {.apply_completions = true});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->dispositions[0], ResultDisposition::kCompleted);
  EXPECT_EQ(outcome->report_ids.size(), 1u);
  EXPECT_EQ(sql.Value("SELECT status FROM sluice.tasks WHERE step_index = 0"),
            "completed");
  EXPECT_EQ(sql.Value("SELECT count(*) FROM sluice.tasks"), "1");  // no b
}

}  // namespace
}  // namespace sluice::testing
