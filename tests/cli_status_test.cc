// `sluice status`, `sluice prune`, `sluice migrate` and `sluice
// check-schema`, run as a real process on a store this test prepares: their
// output, --json, the prune progress bar on a terminal and plain lines
// otherwise, and their exit codes. On SQLite, and on Postgres when
// SLUICE_TEST_POSTGRES_URL is set.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/clock.h"
#include "sluice/engine.h"
#include "support/cli_runner.h"
#include "support/store_test.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliStatusTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    shop_.Step("pay", nullptr);
    ASSERT_TRUE(engine_->Deploy(shop_).ok());
    Flow mail("mail");
    mail.Step("send", nullptr);
    ASSERT_TRUE(engine_->Deploy(mail).ok());
  }

  void StartShop(int count, EnqueueOptions options = {}) {
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<EnqueueResult> run =
          engine_->StartRun("shop", Json(boost::json::object{}), options);
      ASSERT_TRUE(run.ok()) << run.status();
    }
  }

  // Claims one shop task and, unless `keep_started`, fails it for good.
  void ClaimShop(bool keep_started) {
    ClaimRequest claim{.queue = "shop", .worker_id = "w", .limit = 1};
    claim.served.Add("shop", 0);
    absl::StatusOr<std::vector<ClaimedTask>> tasks = engine_->Claim(claim);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    ASSERT_EQ(tasks->size(), 1u);
    if (keep_started) return;
    TaskResult result{(*tasks)[0].key, (*tasks)[0].attempt,
                      absl::InternalError("no")};
    absl::StatusOr<FinishOutcome> done =
        engine_->FinishTasks(std::span(&result, 1));
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_TRUE(engine_->ApplyReports(done->report_ids).ok());
  }

  void PutWorker(const std::string& id, const std::string& queue,
                 absl::Time heartbeat) {
    auto tx = backend_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    WorkerRecord w{id, queue, queue, heartbeat, heartbeat, std::nullopt};
    ASSERT_TRUE((*tx)->UpsertWorker(w).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  // `count` runs of shop that ended (cancelled) `age` ago, through an
  // engine whose clock says then.
  void EndedRunsAgo(int count, absl::Duration age) {
    ManualClock then(absl::Now() - age);
    absl::StatusOr<std::unique_ptr<Engine>> past =
        Engine::Create(*backend_, {.clock = &then});
    ASSERT_TRUE(past.ok()) << past.status();
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<RunId> run =
          (*past)->StartRun("shop", Json(boost::json::object{}));
      ASSERT_TRUE(run.ok()) << run.status();
      ASSERT_TRUE((*past)->CancelRun(*run, CancelMode::kImmediate).ok());
    }
  }

  int64_t RunCount() {
    absl::StatusOr<std::vector<RunRecord>> runs = engine_->ListRuns("", 1000);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? static_cast<int64_t>(runs->size()) : -1;
  }

  Flow shop_{"shop", {.max_attempts = 1}};
};

TEST_P(CliStatusTest, Status_Json_CountsEachQueueWithOldestWaitAndWorkers) {
  StartShop(2);
  StartShop(1, {.delay = absl::Hours(1)});
  StartShop(2);
  ClaimShop(/*keep_started=*/true);
  ClaimShop(/*keep_started=*/false);
  ASSERT_TRUE(engine_->PauseQueue("mail").ok());
  PutWorker("live", "shop", absl::Now());
  PutWorker("gone", "shop", absl::Now() - absl::Hours(2));

  CliResult r = RunCli({"status", url_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  const boost::json::array& queues = json.at("queues").as_array();
  ASSERT_EQ(queues.size(), 2u) << r.out;
  const boost::json::value& mail = queues[0];
  const boost::json::value& shop = queues[1];
  EXPECT_EQ(mail.at("queue"), "mail");
  EXPECT_EQ(mail.at("paused"), true);
  EXPECT_EQ(mail.at("waiting"), 0);
  EXPECT_TRUE(mail.at("oldest_waiting_seconds").is_null());
  EXPECT_EQ(shop.at("queue"), "shop");
  EXPECT_EQ(shop.at("paused"), false);
  EXPECT_EQ(shop.at("waiting"), 2);
  EXPECT_EQ(shop.at("delayed"), 1);
  EXPECT_EQ(shop.at("active"), 1);
  EXPECT_EQ(shop.at("failed"), 1);
  EXPECT_EQ(shop.at("live_workers"), 1) << "the stale worker is not live";
  ASSERT_TRUE(shop.at("oldest_waiting_seconds").is_number()) << r.out;
  double oldest = shop.at("oldest_waiting_seconds").to_number<double>();
  EXPECT_GE(oldest, 0);
  EXPECT_LT(oldest, 600);
  EXPECT_TRUE(shop.at("oldest_waiting_since").is_string());
}

TEST_P(CliStatusTest, Status_Text_HasALinePerQueue) {
  StartShop(3);
  ASSERT_TRUE(engine_->PauseQueue("mail").ok());
  CliResult r = RunCli({"status", url_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.out, HasSubstr("WAITING"));
  EXPECT_THAT(LineWith(r.out, "shop"),
              ::testing::MatchesRegex("shop +3 +0 +0 +0 +[0-9]+s +no +0"));
  EXPECT_THAT(LineWith(r.out, "mail"),
              ::testing::MatchesRegex("mail +0 +0 +0 +0 +- +paused +0"));
}

TEST_P(CliStatusTest, Prune_DeletesOnlyRunsEndedBeforeTheAge) {
  EndedRunsAgo(3, absl::Hours(24 * 40));
  EndedRunsAgo(1, absl::Hours(24 * 10));
  StartShop(1);  // started: never pruned
  CliResult r = RunCli({"prune", url_, "--older-than", "30d", "--batch", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Not a terminal: a plain line per batch, then the total.
  EXPECT_THAT(r.out, HasSubstr("pruned 2 of 3 runs\n"));
  EXPECT_THAT(r.out, HasSubstr("pruned 3 of 3 runs\n"));
  EXPECT_THAT(r.out, HasSubstr("pruned 3 runs that finished before"));
  EXPECT_THAT(r.out, Not(HasSubstr("\r")));
  EXPECT_EQ(RunCount(), 2);
}

TEST_P(CliStatusTest, Prune_OnATerminal_DrawsAProgressBar) {
  EndedRunsAgo(4, absl::Hours(24 * 40));
  CliResult r =
      RunCliOnTerminal({"prune", url_, "--older-than", "4w", "--batch", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\r[---"));
  EXPECT_THAT(r.output, HasSubstr("]  50% 2/4 runs"));
  EXPECT_THAT(r.output, HasSubstr("] 100% 4/4 runs"));
  EXPECT_THAT(r.output, HasSubstr("pruned 4 runs that finished before"));
  EXPECT_EQ(RunCount(), 0);
}

TEST_P(CliStatusTest, Prune_DryRunJson_CountsAndDeletesNothing) {
  EndedRunsAgo(2, absl::Hours(24 * 40));
  CliResult r =
      RunCli({"prune", url_, "--older-than", "30d", "--dry-run", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("would_prune"), 2);
  EXPECT_EQ(json.at("pruned"), 0);
  EXPECT_EQ(RunCount(), 2);

  r = RunCli({"prune", url_, "--older-than", "30d", "--json"});
  json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("pruned"), 2);
  EXPECT_TRUE(json.at("finished_before").is_string());
  EXPECT_EQ(RunCount(), 0);
}

TEST_P(CliStatusTest, Prune_BadAge_IsAUsageErrorAndDeletesNothing) {
  EndedRunsAgo(1, absl::Hours(24 * 40));
  for (const char* age : {"soon", "-3d", "0s", "30"}) {
    CliResult r = RunCli({"prune", url_, "--older-than", age});
    EXPECT_EQ(r.exit_code, 2) << age << ": " << r.output;
    EXPECT_THAT(r.err, HasSubstr("is not a positive age")) << age;
  }
  CliResult r = RunCli({"prune", url_});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--older-than is required"));
  EXPECT_EQ(RunCount(), 1);
}

TEST_P(CliStatusTest, Migrate_OnAMigratedStore_SucceedsAndSaysSo) {
  CliResult r = RunCli({"migrate", url_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("ok"), true);
}

TEST_P(CliStatusTest, CheckSchema_MigratedPostgres_ExitsZero) {
  if (GetParam() != "postgres") {
    CliResult r = RunCli({"check-schema", url_});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.err, HasSubstr("Postgres"));
    return;
  }
  CliResult r = RunCli({"check-schema", url_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("ok"), true);
  EXPECT_EQ(json.at("installed_version"), json.at("latest_version"));
  EXPECT_TRUE(json.at("missing_tables").as_array().empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, CliStatusTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
