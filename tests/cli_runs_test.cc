// `sluice runs`, `show`, `start`, `cancel`, `retry` and `delete`, run as a
// real process on a store this test prepares (driving the engine's task
// path itself, so no worker runs): their text, their --json output and
// their exit codes. On SQLite, and on Postgres when SLUICE_TEST_POSTGRES_URL
// is set.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/engine.h"
#include "support/cli_runner.h"
#include "support/store_test.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class CliRunsTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    Flow shop("shop", {.max_attempts = 1});
    shop.Step("pay", nullptr).Step("ship", {.depends_on = {"pay"}});
    ASSERT_TRUE(engine_->Deploy(shop).ok());
  }

  RunId Start() {
    absl::StatusOr<RunId> run =
        engine_->StartRun("shop", Json(boost::json::object{{"order", 7}}));
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : RunId();
  }

  // Claims the next task of `step_index` and finishes it with `outcome`,
  // then applies the report (a worker's work, without a worker).
  void FinishNext(int step_index, absl::StatusOr<Json> outcome) {
    ClaimRequest claim{.queue = "shop", .worker_id = "cli-test", .limit = 1};
    claim.served.Add("shop", step_index);
    absl::StatusOr<std::vector<ClaimedTask>> tasks = engine_->Claim(claim);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    ASSERT_EQ(tasks->size(), 1u);
    TaskResult result{(*tasks)[0].key, (*tasks)[0].attempt, outcome};
    absl::StatusOr<FinishOutcome> finished =
        engine_->FinishTasks(std::span(&result, 1));
    ASSERT_TRUE(finished.ok()) << finished.status();
    ASSERT_TRUE(engine_->ApplyReports(finished->report_ids).ok());
  }

  void Complete() {
    FinishNext(0, Json(boost::json::object{{"paid", true}}));
    FinishNext(1, Json("shipped"));
  }
  void Fail() { FinishNext(0, absl::InternalError("card declined")); }

  RunStatus StatusOf(const RunId& run) {
    absl::StatusOr<RunView> view = engine_->GetRun(run);
    EXPECT_TRUE(view.ok()) << view.status();
    return view.ok() ? view->run.status : RunStatus::kStarted;
  }
};

TEST_P(CliRunsTest, Runs_ListsEachRunNewestFirstWithItsStatus) {
  RunId first = Start();
  Complete();
  RunId second = Start();
  CliResult r = RunCli({"runs", url_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(LineWith(r.out, first.ToString()), HasSubstr("completed"));
  EXPECT_THAT(LineWith(r.out, second.ToString()), HasSubstr("started"));
  EXPECT_LT(r.out.find(second.ToString()), r.out.find(first.ToString()));
}

TEST_P(CliRunsTest, Runs_Json_FiltersByStatusAndPagesWithTheCursor) {
  RunId completed = Start();
  Complete();
  RunId failed = Start();
  Fail();
  RunId started = Start();

  CliResult r = RunCli({"runs", url_, "--status", "failed", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  const boost::json::array& only_failed = json.at("runs").as_array();
  ASSERT_EQ(only_failed.size(), 1u) << r.out;
  EXPECT_EQ(only_failed[0].at("run_id"), Json(failed.ToString()));
  EXPECT_EQ(only_failed[0].at("status"), "failed");
  EXPECT_EQ(only_failed[0].at("flow"), "shop");
  EXPECT_THAT(std::string(only_failed[0].at("error").as_string()),
              HasSubstr("card declined"));
  EXPECT_TRUE(json.at("next_cursor").is_null());

  r = RunCli({"runs", url_, "--flow", "shop", "--limit", "2", "--json"});
  json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  ASSERT_EQ(json.at("runs").as_array().size(), 2u);
  EXPECT_EQ(json.at("runs").at(0).at("run_id"), Json(started.ToString()));
  ASSERT_TRUE(json.at("next_cursor").is_string()) << r.out;
  std::string cursor(json.at("next_cursor").as_string());
  r = RunCli({"runs", url_, "--limit", "2", "--flow", "shop", "--cursor",
              cursor, "--json"});
  json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.output;
  ASSERT_EQ(json.at("runs").as_array().size(), 1u);
  EXPECT_EQ(json.at("runs").at(0).at("run_id"), Json(completed.ToString()));
}

TEST_P(CliRunsTest, Runs_UnknownStatus_IsAUsageError) {
  CliResult r = RunCli({"runs", url_, "--status", "lost"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--status"));
  EXPECT_THAT(r.err, HasSubstr("lost"));
}

TEST_P(CliRunsTest, Show_PrintsStepsTasksAndTheAttemptsLedger) {
  RunId run = Start();
  Fail();
  CliResult r = RunCli({"show", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.out, HasSubstr("run " + run.ToString() + " (shop): failed"));
  EXPECT_THAT(r.out, HasSubstr("card declined"));
  EXPECT_THAT(LineWith(r.out, "step pay"), HasSubstr("failed"));
  EXPECT_THAT(LineWith(r.out, "task 0/0"), HasSubstr("attempts=1"));
  EXPECT_THAT(LineWith(r.out, "attempt 1"),
              ::testing::AllOf(HasSubstr("failed"), HasSubstr("cli-test")));
}

TEST_P(CliRunsTest, Show_Json_HoldsStepsTasksAndAttempts) {
  RunId run = Start();
  Complete();
  CliResult r = RunCli({"show", url_, run.ToString(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("status"), "completed");
  EXPECT_EQ(json.at("input").at("order"), 7);
  EXPECT_EQ(json.at("output").at("ship"), "shipped");
  ASSERT_EQ(json.at("steps").as_array().size(), 2u);
  EXPECT_EQ(json.at("steps").at(1).at("step"), "ship");
  ASSERT_EQ(json.at("tasks").as_array().size(), 2u);
  EXPECT_EQ(json.at("tasks").at(0).at("output").at("paid"), true);
  ASSERT_EQ(json.at("attempts").as_array().size(), 2u);
  EXPECT_EQ(json.at("attempts").at(1).at("outcome"), "completed");
  EXPECT_EQ(json.at("attempts").at(1).at("worker_id"), "cli-test");
}

TEST_P(CliRunsTest, Show_UnknownRun_ExitsOneNamingIt) {
  RunId missing = RunId::Random();
  CliResult r = RunCli({"show", url_, missing.ToString()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.err, HasSubstr(missing.ToString()));
}

TEST_P(CliRunsTest, Show_MalformedRunId_IsAUsageError) {
  CliResult r = RunCli({"show", url_, "not-a-run"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("RUN"));
}

TEST_P(CliRunsTest, Cancel_QueuedRun_EndsItCancelled) {
  RunId run = Start();
  CliResult r = RunCli({"cancel", url_, run.ToString(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("status"), "cancelled");
  EXPECT_EQ(StatusOf(run), RunStatus::kCancelled);
}

TEST_P(CliRunsTest, Cancel_EndedRun_ExitsOneAndChangesNothing) {
  RunId run = Start();
  Complete();
  CliResult r = RunCli({"cancel", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.err, HasSubstr(run.ToString()));
  EXPECT_EQ(StatusOf(run), RunStatus::kCompleted);
}

TEST_P(CliRunsTest, Retry_FailedRun_ResumesIt) {
  RunId run = Start();
  Fail();
  CliResult r = RunCli({"retry", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.out, HasSubstr("retrying (status: started)"));
  EXPECT_EQ(StatusOf(run), RunStatus::kStarted);
  Complete();
  EXPECT_EQ(StatusOf(run), RunStatus::kCompleted);
}

TEST_P(CliRunsTest, Retry_StartedRun_ExitsOne) {
  RunId run = Start();
  CliResult r = RunCli({"retry", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(StatusOf(run), RunStatus::kStarted);
}

TEST_P(CliRunsTest, Delete_EndedRun_RemovesIt) {
  RunId run = Start();
  Complete();
  CliResult r = RunCli({"delete", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.out, HasSubstr("deleted"));
  EXPECT_EQ(engine_->GetRun(run).status().code(), absl::StatusCode::kNotFound);
  r = RunCli({"delete", url_, run.ToString()});
  EXPECT_EQ(r.exit_code, 1) << "already gone: " << r.output;
}

TEST_P(CliRunsTest, Start_PrintsTheNewRunsId) {
  CliResult r = RunCli({"start", url_, "shop", R"({"order": 9})", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  absl::StatusOr<RunId> run =
      RunId::Parse(std::string(json.at("run_id").as_string()));
  ASSERT_TRUE(run.ok()) << r.out;
  EXPECT_EQ(StatusOf(*run), RunStatus::kStarted);
}

TEST_P(CliRunsTest, Start_BadJson_ExitsOneAndStartsNothing) {
  CliResult r = RunCli({"start", url_, "shop", "{order"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.err, HasSubstr("run input"));
  absl::StatusOr<std::vector<RunRecord>> runs = engine_->ListRuns("", 10);
  ASSERT_TRUE(runs.ok());
  EXPECT_THAT(*runs, ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Backends, CliRunsTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
