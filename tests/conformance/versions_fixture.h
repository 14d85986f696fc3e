// Helpers for the versions and aliases scenarios (versions_*_test.cc).
#ifndef SLUICE_TESTS_CONFORMANCE_VERSIONS_FIXTURE_H_
#define SLUICE_TESTS_CONFORMANCE_VERSIONS_FIXTURE_H_

#include <string>
#include <vector>

#include "harness.h"

namespace sluice::testing {

// A one-step flow `slug` in alias `alias` whose step echoes its input.
inline Flow Version(std::string slug, std::string alias,
                    std::string step = "greet") {
  Flow flow(std::move(slug));
  flow.Alias(std::move(alias)).Step(std::move(step), Echo());
  return flow;
}

class Versions : public Conformance {
 protected:
  std::vector<VersionInfo> VersionsOf(std::string_view alias) {
    absl::StatusOr<std::vector<VersionInfo>> versions =
        engine().ListVersions(alias);
    EXPECT_TRUE(versions.ok()) << versions.status();
    return versions.ok() ? *versions : std::vector<VersionInfo>();
  }

  // The active slug of `alias` by ListVersions ("" if none is active).
  std::string ActiveOf(std::string_view alias) {
    for (const VersionInfo& v : VersionsOf(alias)) {
      if (v.active) return v.slug;
    }
    return "";
  }

  // Starts a run by alias and returns its concrete flow slug.
  std::string StartAndPin(std::string_view alias) {
    absl::StatusOr<RunId> run = engine().StartRun(alias, J("{}"));
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return "";
    return View(*run).run.flow_slug;
  }

  std::optional<FlowRecord> FindFlow(std::string_view slug) {
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return std::nullopt;
    auto flow = (*tx)->GetFlow(slug);
    EXPECT_TRUE(flow.ok()) << flow.status();
    return flow.ok() ? *flow : std::nullopt;
  }
  bool HasFlow(std::string_view slug) { return FindFlow(slug).has_value(); }
  // The stored flow; the test fails (and gets an empty record) if absent.
  FlowRecord StoredFlow(std::string_view slug) {
    std::optional<FlowRecord> flow = FindFlow(slug);
    EXPECT_TRUE(flow.has_value()) << "flow " << slug << " is not stored";
    FlowRecord none;
    none.generation = 0;
    return flow ? *flow : none;
  }

  std::optional<QueueRecord> StoredQueue(std::string_view name) {
    auto tx = backend().Begin();
    EXPECT_TRUE(tx.ok()) << tx.status();
    if (!tx.ok()) return std::nullopt;
    auto queue = (*tx)->GetQueue(name);
    EXPECT_TRUE(queue.ok()) << queue.status();
    return queue.ok() ? *queue : std::nullopt;
  }
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_CONFORMANCE_VERSIONS_FIXTURE_H_
