// The `sluice` program's rollout commands, run as a real process against a
// database this test prepares: `versions`, `activate --expect` and
// `coverage`, their output and their exit codes (tools/cli.h). On SQLite,
// and on Postgres when SLUICE_TEST_POSTGRES_URL is set. The older
// `--backend URL` spelling is used here; the other CLI tests use the
// positional URL.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/cli_runner.h"
#include "support/postgres_test_database.h"
#include "support/store_test.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Flow ShopV1() {
  Flow flow("shop_v1");
  flow.Alias("shop").Step("pay", nullptr).Step("ship", {.depends_on = {"pay"}});
  return flow;
}

Flow ShopV2() {
  Flow flow("shop_v2");
  flow.Alias("shop").Step("pay", nullptr);
  return flow;
}

class CliTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(engine_->Deploy(ShopV1()).ok());
    ASSERT_TRUE(engine_->Deploy(ShopV2()).ok());  // inactive
  }

  // Registers a live worker serving `steps` of `flow` on `queue`.
  void PutWorker(const std::string& id, const std::string& queue,
                 const std::string& flow, std::vector<std::string> steps) {
    auto tx = backend_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    absl::Time now = absl::Now();
    WorkerRecord w{id, queue, flow, now, now, std::nullopt};
    w.served = {{flow, std::move(steps)}};
    ASSERT_TRUE((*tx)->UpsertWorker(w).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
  }

  std::string ActiveSlug() {
    absl::StatusOr<std::vector<VersionInfo>> versions =
        engine_->ListVersions("shop");
    EXPECT_TRUE(versions.ok()) << versions.status();
    if (!versions.ok()) return "";
    for (const VersionInfo& v : *versions) {
      if (v.active) return v.slug;
    }
    return "";
  }
};

TEST_P(CliTest, Versions_ListsEachVersionWithActiveMarkerAndRunCounts) {
  std::vector<Json> inputs(3, Json(boost::json::object{}));
  ASSERT_TRUE(engine_->StartRuns("shop", inputs).ok());
  CliResult r = RunCli({"versions", "--backend", url_, "shop"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("alias shop: 2 versions"));
  std::string v1 = LineWith(r.output, "shop_v1");
  std::string v2 = LineWith(r.output, "shop_v2");
  EXPECT_THAT(v1, ::testing::StartsWith("  *")) << r.output;
  EXPECT_THAT(v2, Not(HasSubstr("*"))) << r.output;
  EXPECT_THAT(v1, ::testing::MatchesRegex(".*shop_v1 .* 3 +0 +0 +0"))
      << "three started, none ended";
  EXPECT_THAT(v2, ::testing::MatchesRegex(".*shop_v2 .* 0 +0 +0 +0"));
  EXPECT_LT(r.output.find("shop_v1"), r.output.find("shop_v2"))
      << "oldest first";
}

TEST_P(CliTest, Versions_UnknownAlias_FailsNamingIt) {
  CliResult r = RunCli({"versions", "--backend", url_, "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("\"nope\""));
}

TEST_P(CliTest, Activate_WithTheCurrentExpectation_SwitchesTheVersion) {
  CliResult r = RunCli({"activate", "--backend", url_, "shop", "shop_v2",
                        "--expect", "shop_v1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("alias shop: shop_v2 is active (was shop_v1)"));
  EXPECT_EQ(ActiveSlug(), "shop_v2");
  r = RunCli({"versions", "--backend", url_, "shop"});
  EXPECT_THAT(LineWith(r.output, "shop_v2"), ::testing::StartsWith("  *"));
}

TEST_P(CliTest, Activate_StaleExpectation_FailsAndChangesNothing) {
  CliResult r = RunCli({"activate", "--backend", url_, "shop", "shop_v2",
                        "--expect", "shop_v2"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the active version is \"shop_v1\""));
  EXPECT_THAT(r.output, HasSubstr("sluice versions shop"));
  EXPECT_EQ(ActiveSlug(), "shop_v1");
}

TEST_P(CliTest, Activate_WithoutExpect_IsAUsageError) {
  CliResult r = RunCli({"activate", "--backend", url_, "shop", "shop_v2"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--expect is required"));
  EXPECT_EQ(ActiveSlug(), "shop_v1");
}

TEST_P(CliTest, Coverage_StepsNobodyServes_PrintUnservedAndExitThree) {
  PutWorker("payer", "shop_v1", "shop_v1", {"pay"});
  PutWorker("v2_worker", "shop_v2", "shop_v2", {"pay"});  // inactive version
  CliResult r = RunCli({"coverage", "--backend", url_});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("queue shop_v1  live_workers=1"));
  EXPECT_THAT(LineWith(r.output, "shop_v1.pay"), HasSubstr("served"));
  EXPECT_THAT(
      LineWith(r.output, "shop_v1.ship"),
      ::testing::AllOf(HasSubstr("UNSERVED"), HasSubstr("live_workers=0")));
  EXPECT_THAT(r.output, HasSubstr("UNSERVED: 1 of 2 steps"));
  EXPECT_THAT(r.output, Not(HasSubstr("shop_v2"))) << "only active versions";
}

TEST_P(CliTest, Coverage_EveryStepServed_ExitsZero) {
  PutWorker("all", "shop_v1", "shop_v1", {"pay", "ship"});
  CliResult r = RunCli({"coverage", "--backend", url_});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("all 2 steps on 1 queue is served"));
  EXPECT_THAT(r.output, Not(HasSubstr("UNSERVED")));
}

TEST_P(CliTest, Coverage_BadLiveness_IsAUsageError) {
  CliResult r = RunCli({"coverage", "--backend", url_, "--liveness", "soon"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.err, HasSubstr("--liveness"));
  EXPECT_THAT(r.err, HasSubstr("\"soon\" is not a positive age"));
}

TEST_P(CliTest, Coverage_Json_ListsQueuesStepsAndUnservedCount) {
  PutWorker("payer", "shop_v1", "shop_v1", {"pay"});
  CliResult r = RunCli({"coverage", url_, "--json"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("steps"), 2);
  EXPECT_EQ(json.at("unserved"), 1);
  const boost::json::array& queues = json.at("queues").as_array();
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0].at("queue"), "shop_v1");
  EXPECT_EQ(queues[0].at("live_workers"), 1);
  EXPECT_EQ(queues[0].at("steps").at(1).at("step"), "ship");
  EXPECT_EQ(queues[0].at("steps").at(1).at("live_workers"), 0);
}

TEST_P(CliTest, Versions_Json_MarksTheActiveVersion) {
  CliResult r = RunCli({"versions", url_, "shop", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  boost::json::value json = ParseCliJson(r);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json.at("alias"), "shop");
  const boost::json::array& versions = json.at("versions").as_array();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].at("slug"), "shop_v1");
  EXPECT_EQ(versions[0].at("active"), true);
  EXPECT_EQ(versions[1].at("active"), false);
  EXPECT_EQ(versions[1].at("runs").at("started"), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, CliTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
