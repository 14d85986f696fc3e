// Versions and aliases: listing versions with run counts, and deleting one.
#include "versions_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class VersionsDelete : public Versions {};

TEST_P(VersionsDelete, ListVersions_CountsEachVersionsRunsByStatus) {
  Flow v1 = Version("greet_v1", "greet");
  Deploy(v1);
  Deploy(Version("greet_v2", "greet", "hello"));
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
  ASSERT_TRUE(engine().StartRunBySlug("greet_v2", J("{}")).ok());
  EXPECT_EQ(Drive(v1, 1), 2);  // both v1 runs complete
  ASSERT_TRUE(engine().StartRun("greet", J("{}")).ok());
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].slug, "greet_v1");
  EXPECT_EQ(versions[0].runs.completed, 2);
  EXPECT_EQ(versions[0].runs.started, 1);
  EXPECT_EQ(versions[0].runs.total(), 3);
  EXPECT_EQ(versions[0].created_at, clock().Now());
  EXPECT_EQ(versions[1].slug, "greet_v2");
  EXPECT_EQ(versions[1].runs.started, 1);
  EXPECT_EQ(versions[1].runs.total(), 1);
}

TEST_P(VersionsDelete, ListVersions_OldestFirst_UnknownAliasNotFound) {
  Deploy(Version("greet_b", "greet"));
  clock().Advance(absl::Seconds(1));
  Deploy(Version("greet_a", "greet", "hello"));
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].slug, "greet_b");
  EXPECT_EQ(versions[1].slug, "greet_a");
  EXPECT_LT(versions[0].created_at, versions[1].created_at);
  EXPECT_EQ(engine().ListVersions("nobody").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(VersionsDelete, DeleteVersion_WhileActive_IsRefused) {
  Deploy(Version("greet_v1", "greet"));
  absl::Status status = engine().DeleteVersion("greet_v1");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("active version of alias \"greet\""));
  EXPECT_TRUE(HasFlow("greet_v1"));
  EXPECT_TRUE(StoredQueue("greet_v1").has_value());
}

TEST_P(VersionsDelete, DeleteVersion_WithRuns_IsRefused) {
  Flow v2 = Version("greet_v2", "greet", "hello");
  Deploy(Version("greet_v1", "greet"));
  Deploy(v2);
  ASSERT_TRUE(engine().StartRunBySlug("greet_v2", J("{}")).ok());
  EXPECT_EQ(Drive(v2), 1);  // an ended run still counts
  absl::Status status = engine().DeleteVersion("greet_v2");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("has 1 runs"));
  EXPECT_TRUE(HasFlow("greet_v2"));
  EXPECT_EQ(VersionsOf("greet").size(), 2u);
}

TEST_P(VersionsDelete, DeleteVersion_InactiveWithoutRuns_DropsItAndItsQueue) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(StoredQueue("greet_v2").has_value());
  ASSERT_TRUE(engine().DeleteVersion("greet_v2").ok());
  EXPECT_FALSE(HasFlow("greet_v2"));
  EXPECT_FALSE(StoredQueue("greet_v2").has_value());
  auto tx = backend().Begin();
  ASSERT_TRUE(tx.ok());
  auto exists = (*tx)->QueueExists("greet_v2");
  ASSERT_TRUE(exists.ok());
  EXPECT_FALSE(*exists);
  tx->reset();
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].slug, "greet_v1");
  EXPECT_EQ(engine().StartRunBySlug("greet_v2", J("{}")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
  // The slug is free again, with any shape.
  absl::StatusOr<DeployOutcome> again =
      engine().Deploy(Version("greet_v2", "greet", "renamed"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kCompiled);
}

TEST_P(VersionsDelete, DeleteVersion_KeepsASharedQueue) {
  Deploy(Version("greet_v1", "greet"));
  Flow shared("greet_v2", {.queue = "common"});
  shared.Alias("greet").Step("hello", Echo());
  Deploy(shared);
  Flow other("other", {.queue = "common"});
  other.Step("work", Echo());
  Deploy(other);
  ASSERT_TRUE(engine().DeleteVersion("greet_v2").ok());
  EXPECT_TRUE(StoredQueue("common").has_value());
  EXPECT_EQ(StartAndPin("other"), "other");
}

TEST_P(VersionsDelete, DeleteVersion_UnknownSlug_IsNotFound) {
  EXPECT_EQ(engine().DeleteVersion("ghost").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().DeleteVersion("not valid").code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, VersionsDelete,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
