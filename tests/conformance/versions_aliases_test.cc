// Versions and aliases: membership, activation and starting by alias.
#include "versions_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

TEST_P(Versions, FirstMember_ActivatesTheAlias) {
  absl::StatusOr<DeployOutcome> outcome =
      engine().Deploy(Version("greet_v1", "greet"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, DeployOutcome::kCompiled);
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].slug, "greet_v1");
  EXPECT_TRUE(versions[0].active);
  EXPECT_EQ(StoredFlow("greet_v1").alias, "greet");
  EXPECT_EQ(StoredFlow("greet_v1").generation, 1);
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
}

TEST_P(Versions, LaterMember_CompilesInactive) {
  Deploy(Version("greet_v1", "greet"));
  absl::StatusOr<DeployOutcome> outcome =
      engine().Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, DeployOutcome::kCompiled);
  std::vector<VersionInfo> versions = VersionsOf("greet");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].slug, "greet_v1");
  EXPECT_TRUE(versions[0].active);
  EXPECT_EQ(versions[1].slug, "greet_v2");
  EXPECT_FALSE(versions[1].active);
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
}

TEST_P(Versions, FlowWithoutAlias_IsItsOwnAlias) {
  Flow plain("plain");
  plain.Step("only", Echo());
  Deploy(plain);
  EXPECT_EQ(ActiveOf("plain"), "plain");
  EXPECT_EQ(StoredFlow("plain").alias, "plain");
  EXPECT_EQ(StartAndPin("plain"), "plain");
  // Redeploying the same definition verifies it and changes nothing.
  absl::StatusOr<DeployOutcome> again = engine().Deploy(plain);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
}

TEST_P(Versions, Activate_WithTheCurrentExpectation_Switches) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(engine().Activate("greet", "greet_v2", "greet_v1").ok());
  EXPECT_EQ(ActiveOf("greet"), "greet_v2");
  EXPECT_EQ(StartAndPin("greet"), "greet_v2");
}

TEST_P(Versions, Activate_StaleExpectation_FailsNamingTheActualVersion) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  Deploy(Version("greet_v3", "greet", "hi"));
  ASSERT_TRUE(engine().Activate("greet", "greet_v2", "greet_v1").ok());
  absl::Status stale = engine().Activate("greet", "greet_v3", "greet_v1");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stale.message()),
              HasSubstr("the active version is \"greet_v2\""));
  EXPECT_EQ(ActiveOf("greet"), "greet_v2");
}

TEST_P(Versions, Activate_UnknownAlias_IsNotFound) {
  Deploy(Version("greet_v1", "greet"));
  absl::Status status = engine().Activate("nobody", "greet_v1", "greet_v1");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("\"nobody\""));
}

TEST_P(Versions, Activate_SlugOfAnotherAlias_FailsAndChangesNothing) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("bye_v1", "bye"));
  absl::Status other = engine().Activate("greet", "bye_v1", "greet_v1");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.message()),
              HasSubstr("is a version of alias \"bye\""));
  absl::Status missing = engine().Activate("greet", "greet_v9", "greet_v1");
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("not deployed"));
  EXPECT_EQ(ActiveOf("greet"), "greet_v1");
  EXPECT_EQ(ActiveOf("bye"), "bye_v1");
}

TEST_P(Versions, Activate_BadNames_AreInvalidArguments) {
  Deploy(Version("greet_v1", "greet"));
  EXPECT_EQ(engine().Activate("9greet", "greet_v1", "greet_v1").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().Activate("greet", "greet_v1", "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ActiveOf("greet"), "greet_v1");
}

TEST_P(Versions, Rollback_IsActivatingThePreviousVersion) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(engine().Activate("greet", "greet_v2", "greet_v1").ok());
  std::string on_v2 = StartAndPin("greet");
  ASSERT_TRUE(engine().Activate("greet", "greet_v1", "greet_v2").ok());
  EXPECT_EQ(on_v2, "greet_v2");
  EXPECT_EQ(StartAndPin("greet"), "greet_v1");
  EXPECT_EQ(ActiveOf("greet"), "greet_v1");
}

TEST_P(Versions, StartRun_AfterAnotherEngineActivated_PinsTheNewVersion) {
  // Two engines on one store, as two processes: the one that did not
  // activate last saw v1 active, checks that in its StartRun's transaction,
  // and must start v2 without writing anything for v1.
  absl::StatusOr<std::unique_ptr<Engine>> other =
      Engine::Create(backend(), DefaultOptions());
  ASSERT_TRUE(other.ok()) << other.status();
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  absl::StatusOr<RunId> first = (*other)->StartRun("greet", J("{}"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(engine().Activate("greet", "greet_v2", "greet_v1").ok());
  absl::StatusOr<RunId> second = (*other)->StartRun("greet", J("{}"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(View(*first).run.flow_slug, "greet_v1");
  EXPECT_EQ(View(*second).run.flow_slug, "greet_v2");
  // StartRun with options takes the enqueue path, which pins the same way.
  ASSERT_TRUE(engine().Activate("greet", "greet_v1", "greet_v2").ok());
  absl::StatusOr<EnqueueResult> third =
      (*other)->StartRun("greet", J("{}"), EnqueueOptions{});
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(View(third->run_id).run.flow_slug, "greet_v1");
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->size(), 3u);
}

TEST_P(Versions, MissingAlias_FailsAndNeverFallsBackToASlug) {
  Deploy(Version("greet_v1", "greet"));
  absl::StatusOr<RunId> by_slug = engine().StartRun("greet_v1", J("{}"));
  EXPECT_EQ(by_slug.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(by_slug.status().message()),
              HasSubstr("version of alias \"greet\""));
  absl::StatusOr<RunId> unknown = engine().StartRun("nothing", J("{}"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      engine().StartRuns("greet_v1", std::vector<Json>{J("1")}).status().code(),
      absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<RunRecord>> runs = engine().ListRuns("", 10);
  ASSERT_TRUE(runs.ok());
  EXPECT_TRUE(runs->empty());
}

TEST_P(Versions, StartRunBySlug_PinsAnInactiveVersion) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  absl::StatusOr<EnqueueResult> pinned =
      engine().StartRunBySlug("greet_v2", J("{\"n\": 1}"));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(View(pinned->run_id).run.flow_slug, "greet_v2");
  absl::StatusOr<EnqueueResult> active =
      engine().StartRunBySlug("greet_v1", J("{}"));
  ASSERT_TRUE(active.ok()) << active.status();
  EXPECT_EQ(View(active->run_id).run.flow_slug, "greet_v1");
  EXPECT_EQ(engine().StartRunBySlug("greet", J("{}")).status().code(),
            absl::StatusCode::kNotFound);
  // The pinned run runs the inactive version's step.
  Flow v2 = Version("greet_v2", "greet", "hello");
  EXPECT_EQ(Drive(v2), 1);
  EXPECT_EQ(View(pinned->run_id).run.status, RunStatus::kCompleted);
}

TEST_P(Versions, Membership_IsImmutable) {
  Deploy(Version("greet_v1", "greet"));
  absl::StatusOr<DeployOutcome> moved =
      engine().Deploy(Version("greet_v1", "other"));
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(moved.status().message()),
              HasSubstr("is a version of alias \"greet\""));
  EXPECT_EQ(engine().ListVersions("other").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(StoredFlow("greet_v1").alias, "greet");
  EXPECT_EQ(ActiveOf("greet"), "greet_v1");
}

TEST_P(Versions, NamesThatWouldConfuseStartByAlias_AreRefused) {
  Deploy(Version("greet_v1", "greet"));
  // An alias named like another alias's version.
  absl::StatusOr<DeployOutcome> alias_like_slug =
      engine().Deploy(Version("bye_v1", "greet_v1"));
  EXPECT_EQ(alias_like_slug.status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A version named like another alias.
  absl::StatusOr<DeployOutcome> slug_like_alias =
      engine().Deploy(Version("greet", "bye"));
  EXPECT_EQ(slug_like_alias.status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(HasFlow("bye_v1"));
  EXPECT_FALSE(HasFlow("greet"));
}

TEST_P(Versions, InvalidAlias_IsRejectedBeforeAnyWrite) {
  absl::StatusOr<DeployOutcome> outcome =
      engine().Deploy(Version("greet_v1", "bad alias"));
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("alias"));
  EXPECT_FALSE(HasFlow("greet_v1"));
}

TEST_P(Versions, EventsAndTasks_CarryTheConcreteSlug) {
  Deploy(Version("greet_v1", "greet"));
  Deploy(Version("greet_v2", "greet", "hello"));
  ASSERT_TRUE(engine().Activate("greet", "greet_v2", "greet_v1").ok());
  std::vector<std::string> slugs;
  engine().Subscribe([&](const Event& e) { slugs.push_back(e.flow_slug); });
  absl::StatusOr<RunId> run = engine().StartRun("greet", J("{}"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Drive(Version("greet_v2", "greet", "hello")), 1);
  RunView view = View(*run);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  ASSERT_EQ(view.tasks.size(), 1u);
  EXPECT_EQ(view.tasks[0].flow_slug, "greet_v2");
  EXPECT_EQ(view.tasks[0].queue_name, "greet_v2");
  ASSERT_FALSE(slugs.empty());
  for (const std::string& slug : slugs) EXPECT_EQ(slug, "greet_v2");
}

TEST_P(Versions, EnqueueByJobName_ResolvesTheAlias_EnqueueJob_PinsItsSlug) {
  Job mail("mail", Echo());
  ASSERT_TRUE(engine().Deploy(mail).ok());
  // A job-shaped version (one single step named "job") of alias "mail".
  Deploy(Version("mail_v2", "mail", "job"));
  ASSERT_TRUE(engine().Activate("mail", "mail_v2", "mail").ok());
  absl::StatusOr<EnqueueResult> by_name = engine().Enqueue("mail", J("1"));
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(View(by_name->run_id).run.flow_slug, "mail_v2");
  absl::StatusOr<EnqueueResult> by_job = engine().Enqueue(mail, J("2"));
  ASSERT_TRUE(by_job.ok()) << by_job.status();
  EXPECT_EQ(View(by_job->run_id).run.flow_slug, "mail");
}

SLUICE_CONFORMANCE_SUITE(Versions);

}  // namespace
}  // namespace sluice::testing
