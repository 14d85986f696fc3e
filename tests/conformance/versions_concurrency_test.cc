// Versions and aliases under concurrency: compare-and-swap activation, and
// runs started by alias while an activation commits.
#include <atomic>
#include <thread>

#include "versions_fixture.h"

namespace sluice::testing {
namespace {

class VersionsConcurrency : public Versions {
 protected:
  // Retries what Abseil says to retry (a lost race, a busy store).
  template <typename F>
  static auto Retrying(F call) {
    auto result = call();
    for (int i = 0; i < 200; ++i) {
      absl::StatusCode code = StatusOf(result).code();
      if (code != absl::StatusCode::kAborted &&
          code != absl::StatusCode::kUnavailable) {
        break;
      }
      result = call();
    }
    return result;
  }
  static absl::Status StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static absl::Status StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }
};

TEST_P(VersionsConcurrency, ActivateWithTheSameExpectation_ExactlyOneWins) {
  constexpr int kContenders = 4;
  Deploy(Version("greet_v0", "greet"));
  std::vector<Flow> versions;
  for (int i = 1; i <= kContenders; ++i) {
    versions.push_back(Version("greet_v" + std::to_string(i), "greet",
                               "step" + std::to_string(i)));
  }
  for (const Flow& v : versions) Deploy(v);
  std::vector<absl::Status> results(kContenders);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kContenders; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      results[i] = Retrying([&] {
        return engine().Activate("greet", versions[i].slug(), "greet_v0");
      });
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  int wins = 0;
  std::string winner;
  for (int i = 0; i < kContenders; ++i) {
    if (results[i].ok()) {
      ++wins;
      winner = versions[i].slug();
    } else {
      EXPECT_EQ(results[i].code(), absl::StatusCode::kFailedPrecondition)
          << results[i];
      EXPECT_THAT(std::string(results[i].message()),
                  ::testing::HasSubstr("the active version is"));
    }
  }
  EXPECT_EQ(wins, 1);
  EXPECT_EQ(ActiveOf("greet"), winner);
}

TEST_P(VersionsConcurrency,
       StartByAliasDuringActivation_EveryRunPinsOneVersion) {
  constexpr int kRuns = 40;
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  std::vector<RunId> runs;
  std::atomic<int> started{0};
  std::atomic<bool> activated{false};
  std::atomic<bool> done{false};
  int started_after_activation = -1;
  std::thread starter([&] {
    for (int i = 0; i < kRuns; ++i) {
      bool after = activated.load();
      absl::StatusOr<RunId> run =
          Retrying([&] { return engine().StartRun("greet", J("{}")); });
      if (!run.ok()) {
        ADD_FAILURE() << run.status();
        break;
      }
      if (after && started_after_activation < 0) started_after_activation = i;
      runs.push_back(*run);
      started.fetch_add(1);
    }
    done = true;
  });
  // Activate once some runs exist, while the rest are being started.
  while (started.load() < kRuns / 4 && !done.load()) {
    std::this_thread::yield();
  }
  absl::Status activation = Retrying(
      [&] { return engine().Activate("greet", "greet_v2", "greet_v1"); });
  activated = true;
  starter.join();
  ASSERT_TRUE(activation.ok()) << activation;
  ASSERT_EQ(runs.size(), static_cast<size_t>(kRuns));
  // Each run names one concrete version; once v2 shows up, v1 never again;
  // and a run started after Activate returned is on v2.
  bool seen_v2 = false;
  int v1 = 0;
  for (int i = 0; i < kRuns; ++i) {
    RunView view = View(runs[i]);
    const std::string& slug = view.run.flow_slug;
    ASSERT_TRUE(slug == "greet_v1" || slug == "greet_v2") << slug;
    for (const TaskRecord& task : view.tasks) EXPECT_EQ(task.flow_slug, slug);
    if (slug == "greet_v2") seen_v2 = true;
    if (slug == "greet_v1") {
      ++v1;
      EXPECT_FALSE(seen_v2) << "run " << i << " went back to v1";
    }
    if (started_after_activation >= 0 && i >= started_after_activation) {
      EXPECT_EQ(slug, "greet_v2") << "run " << i;
    }
  }
  EXPECT_GE(v1, kRuns / 4);
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].runs.total() + versions[1].runs.total(), kRuns);
  EXPECT_EQ(versions[0].runs.total(), v1);
}

INSTANTIATE_TEST_SUITE_P(Backends, VersionsConcurrency,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
