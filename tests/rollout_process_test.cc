// A rollout through real worker processes: version 1 of the alias
// "rollout" runs with two workers; 500 runs are started by alias; while they
// are in flight version 2 (another slug, another shape) is deployed with two
// workers of its own and activated. Every run finishes on the version it
// started with, and runs started by alias afterwards go to version 2.
// (docs/operations.md, "Rolling out a new version".)
//
// On Postgres (SLUICE_TEST_POSTGRES_URL; skipped without it) and SQLite.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/backends.h"
#include "sluice/engine.h"
#include "support/child_process.h"
#include "support/postgres_test_database.h"
#include "support/store_test.h"
#include "support/test_flows.h"

namespace sluice::testing {
namespace {

constexpr int kRunsBefore = 500;  // started on version 1, then in flight
constexpr int kRunsAfter = 100;   // started once version 2 is active
constexpr absl::Duration kDeadline = absl::Seconds(60);

class RolloutProcessTest : public StoreTest {
 protected:
  void StartWorkers(int version, int count) {
    for (int i = 0; i < count; ++i) {
      std::string id = "v" + std::to_string(version) + "_" + std::to_string(i);
      children_.push_back(
          Spawn(SLUICE_TEST_WORKER,
                {"rollout", url_, "version=" + std::to_string(version),
                 "worker_id=" + id, "concurrency=4", "delay_ms=20",
                 "gate=" + Gate()}));
      std::string line;
      ASSERT_TRUE(
          ReadLine(children_.back().out, absl::Now() + kDeadline, &line))
          << id << " did not start";
      ASSERT_EQ(line, "ready") << id;
    }
  }

  // Starts `count` runs by alias, inputs {"n": first..first+count-1}.
  std::vector<RunId> StartByAlias(int first, int count) {
    std::vector<RunId> ids;
    for (int done = 0; done < count; done += 100) {
      std::vector<Json> inputs;
      for (int n = first + done; n < first + std::min(count, done + 100); ++n) {
        inputs.push_back(boost::json::object{{"n", n}});
      }
      absl::StatusOr<std::vector<RunId>> started =
          engine_->StartRuns("rollout", inputs);
      EXPECT_TRUE(started.ok()) << started.status();
      if (!started.ok()) break;
      ids.insert(ids.end(), started->begin(), started->end());
    }
    return ids;
  }

  // Version 1's handlers wait until this file exists.
  std::string Gate() const { return dir_ + "/activated"; }

  // The versions of "rollout" by slug.
  std::map<std::string, VersionInfo> Versions() {
    std::map<std::string, VersionInfo> by_slug;
    absl::StatusOr<std::vector<VersionInfo>> versions =
        engine_->ListVersions("rollout");
    EXPECT_TRUE(versions.ok()) << versions.status();
    if (!versions.ok()) return by_slug;
    for (const VersionInfo& v : *versions) by_slug[v.slug] = v;
    return by_slug;
  }
};

TEST_P(RolloutProcessTest, VersionTwoActivatedMidFlight_RunsKeepTheirVersion) {
  absl::StatusOr<DeployOutcome> v1 = engine_->Deploy(RolloutV1(nullptr));
  ASSERT_TRUE(v1.ok()) << v1.status();
  StartWorkers(1, 2);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<RunId> before = StartByAlias(0, kRunsBefore);
  ASSERT_EQ(before.size(), static_cast<size_t>(kRunsBefore));

  // Version 2 is deployed inactive, gets its workers, then is activated
  // while version 1's runs are still going.
  absl::StatusOr<DeployOutcome> v2 =
      engine_->Deploy(RolloutV2(nullptr, nullptr));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(*v2, DeployOutcome::kCompiled);
  StartWorkers(2, 2);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(engine_->Activate("rollout", "rollout_v2", "rollout_v1").ok());
  const int64_t in_flight = Versions()["rollout_v1"].runs.started;
  EXPECT_EQ(in_flight, kRunsBefore) << "version 1's handlers are held";
  std::ofstream(Gate()).put('\n');
  RecordProperty("v1_runs_in_flight_at_activation", std::to_string(in_flight));
  std::printf("version 1 runs in flight at activation: %lld of %d\n",
              static_cast<long long>(in_flight), kRunsBefore);
  absl::Status stale = engine_->Activate("rollout", "rollout_v1", "rollout_v1");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;

  std::vector<RunId> after = StartByAlias(kRunsBefore, kRunsAfter);
  ASSERT_EQ(after.size(), static_cast<size_t>(kRunsAfter));

  auto all_ended = [&] {
    std::map<std::string, VersionInfo> v = Versions();
    return v["rollout_v1"].runs.started == 0 &&
           v["rollout_v2"].runs.started == 0 &&
           v["rollout_v1"].runs.total() + v["rollout_v2"].runs.total() ==
               kRunsBefore + kRunsAfter;
  };
  ASSERT_TRUE(AwaitCondition(all_ended, kDeadline))
      << "not every run ended within " << kDeadline;

  std::map<std::string, VersionInfo> versions = Versions();
  EXPECT_TRUE(versions["rollout_v2"].active);
  EXPECT_FALSE(versions["rollout_v1"].active);
  EXPECT_EQ(versions["rollout_v1"].runs.completed, kRunsBefore);
  EXPECT_EQ(versions["rollout_v2"].runs.completed, kRunsAfter);
  auto check = [&](const std::vector<RunId>& runs, int first,
                   const std::string& slug, const std::string& leaf,
                   int version) {
    for (size_t i = 0; i < runs.size(); ++i) {
      absl::StatusOr<RunView> view = engine_->GetRun(runs[i]);
      ASSERT_TRUE(view.ok()) << view.status();
      const std::string text = runs[i].ToString();
      EXPECT_EQ(view->run.flow_slug, slug) << text;
      EXPECT_EQ(view->run.status, RunStatus::kCompleted) << text;
      ASSERT_TRUE(view->run.output.has_value()) << text;
      Json expected = boost::json::object{
          {leaf, boost::json::object{{"v", version},
                                     {"n", first + static_cast<int>(i)}}}};
      EXPECT_EQ(*view->run.output, expected) << text;
    }
  };
  check(before, 0, "rollout_v1", "work", 1);
  check(after, kRunsBefore, "rollout_v2", "finish", 2);

  for (Child& child : children_) {
    int status = KillAndReap(child, SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RolloutProcessTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
