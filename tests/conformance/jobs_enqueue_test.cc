// Jobs: definitions, Enqueue and EnqueueMany, and every bad input refused
// with a clear error that changes nothing.
#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class JobsEnqueue : public JobsConformance {
 protected:
  // Enqueues with `options`, expects kInvalidArgument naming `part`, and
  // checks nothing was stored.
  void ExpectRefused(const EnqueueOptions& options, std::string_view part) {
    Job job = EchoJob();
    DeployJob(job);
    absl::StatusOr<EnqueueResult> result =
        engine().Enqueue(job, J(R"({"n":1})"), options);
    EXPECT_INVALID(result.status(), part);
    EXPECT_TRUE(AllRuns().empty());
    QueueCounts counts = CountsOf("work");
    EXPECT_EQ(counts.waiting + counts.delayed, 0);
  }
};

TEST_P(JobsEnqueue, Handler_GetsThePayloadItself) {
  Job job = EchoJob();
  DeployJob(job);
  EnqueueResult result = Enqueue(job, J(R"({"to":"a@b.c"})"));
  EXPECT_FALSE(result.duplicate);
  EXPECT_EQ(DriveJob(job), 1);
  RunView view = View(result.run_id);
  EXPECT_EQ(view.run.status, RunStatus::kCompleted);
  EXPECT_EQ(view.run.output, J(R"({"job":{"got":{"to":"a@b.c"}}})"));
  EXPECT_EQ(view.run.flow_slug, "echo");
  EXPECT_EQ(TaskOf(result.run_id, "job").queue_name, "work");
}

TEST_P(JobsEnqueue, ByName_EnqueuesTheDeployedJob) {
  Job job = EchoJob();
  DeployJob(job);
  absl::StatusOr<EnqueueResult> result = engine().Enqueue("echo", J("7"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(DriveJob(job), 1);
  EXPECT_EQ(View(result->run_id).run.output, J(R"({"job":{"got":7}})"));
}

TEST_P(JobsEnqueue, UnknownJob_IsNotFound) {
  absl::StatusOr<EnqueueResult> result = engine().Enqueue("nobody", J("{}"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("job \"nobody\" is not deployed"));
}

TEST_P(JobsEnqueue, AFlowThatIsNotAJob_IsNotFoundAsAJob) {
  Flow flow("two_steps");
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<EnqueueResult> result = engine().Enqueue("two_steps", J("{}"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("StartRun"));
  EXPECT_TRUE(AllRuns().empty());
}

TEST_P(JobsEnqueue, NegativeDelay_IsRefused) {
  ExpectRefused({.delay = absl::Seconds(-1)}, "delay -1s is out of range");
}

TEST_P(JobsEnqueue, DelayWithRunAt_IsRefused) {
  ExpectRefused({.delay = absl::Seconds(1), .run_at = clock().Now()},
                "delay and run_at are both set");
}

TEST_P(JobsEnqueue, PriorityAboveRange_IsRefused) {
  ExpectRefused({.priority = kMaxPriority + 1},
                "priority 1001 is out of range");
}

TEST_P(JobsEnqueue, PriorityBelowRange_IsRefused) {
  ExpectRefused({.priority = kMinPriority - 1},
                "priority -1001 is out of range");
}

TEST_P(JobsEnqueue, MaxAttemptsBelowOne_IsRefused) {
  ExpectRefused({.max_attempts = 0}, "max_attempts 0 is out of range");
}

TEST_P(JobsEnqueue, NegativeTimeout_IsRefused) {
  ExpectRefused({.timeout = absl::Seconds(-5)}, "timeout -5s is out of range");
}

TEST_P(JobsEnqueue, NegativeBackoff_IsRefused) {
  ExpectRefused({.backoff = Backoff{BackoffKind::kFixed, absl::Seconds(-1)}},
                "backoff delay -1s is out of range");
}

TEST_P(JobsEnqueue, MetadataNotAnObject_IsRefused) {
  ExpectRefused({.metadata = J("[1,2]")},
                "metadata must be a JSON object or null, not array");
}

TEST_P(JobsEnqueue, EmptyId_IsRefused) {
  ExpectRefused({.id = ""}, "id is empty");
}

TEST_P(JobsEnqueue, IdOverTheSizeLimit_IsRefused) {
  ExpectRefused({.id = std::string(kMaxKeyBytes + 1, 'x')},
                "id is 513 bytes; the limit is 512");
}

TEST_P(JobsEnqueue, EmptyDedupeKey_IsRefused) {
  ExpectRefused({.dedupe = Dedupe{.key = ""}}, "dedupe key is empty");
}

TEST_P(JobsEnqueue, DedupeKeyOverTheSizeLimit_IsRefused) {
  ExpectRefused({.dedupe = Dedupe{.key = std::string(kMaxKeyBytes + 1, 'k')}},
                "dedupe key is 513 bytes; the limit is 512");
}

TEST_P(JobsEnqueue, DedupeExtendWithoutTtl_IsRefused) {
  ExpectRefused({.dedupe = Dedupe{.key = "k", .extend = true}},
                "dedupe extend needs a ttl");
}

TEST_P(JobsEnqueue, NegativeKeepCount_IsRefused) {
  ExpectRefused({.keep = Keep{.completed = {.count = -1}}},
                "keep.completed.count -1 is negative");
}

TEST_P(JobsEnqueue, InvalidDefinitions_AreRefusedAtDeploy) {
  auto refused = [&](const Job& job, std::string_view part) {
    absl::StatusOr<DeployOutcome> outcome = engine().Deploy(job);
    EXPECT_INVALID(outcome.status(), part);
  };
  refused(Job("bad name", EchoJob().options(), Returns(J("1"))),
          "job slug \"bad name\" is invalid");
  refused(EchoJob("j", {.queue = "Has-Caps"}), "may hold only a-z, 0-9 and _");
  refused(EchoJob("j", {.priority = 5000}), "priority 5000 is out of range");
  refused(EchoJob("j", {.max_attempts = 0}), "max_attempts 0");
  refused(EchoJob("j", {.backoff = {BackoffKind::kFixed, absl::Seconds(-2)}}),
          "backoff delay -2s is negative");
  refused(EchoJob("j", {.timeout = absl::ZeroDuration()}),
          "timeout 0 must be positive");
  refused(EchoJob("j", {.keep = {.failed = {.count = -3}}}),
          "keep.failed.count -3 is negative");
  absl::StatusOr<std::vector<QueueCoverage>> coverage = engine().Coverage();
  ASSERT_TRUE(coverage.ok()) << coverage.status();
  EXPECT_TRUE(coverage->empty());
}

TEST_P(JobsEnqueue, EnqueueManyOfNothing_ReturnsNothing) {
  Job job = EchoJob();
  DeployJob(job);
  absl::StatusOr<std::vector<EnqueueResult>> results =
      engine().EnqueueMany("echo", {});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_TRUE(results->empty());
  absl::StatusOr<std::vector<RunId>> runs = engine().StartRuns("echo", {});
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_TRUE(runs->empty());
}

TEST_P(JobsEnqueue, EnqueueMany_GivesOneResultPerItemInOrder) {
  Job job = EchoJob();
  DeployJob(job);
  std::vector<Engine::EnqueueItem> items = {
      {J("1"), {}},
      {J("2"), {.id = "second"}},
      {J("3"), {}},
      {J("4"), {.id = "second"}},  // the same id again: a duplicate
  };
  absl::StatusOr<std::vector<EnqueueResult>> results =
      engine().EnqueueMany("echo", items);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  EXPECT_FALSE((*results)[0].duplicate);
  EXPECT_FALSE((*results)[1].duplicate);
  EXPECT_FALSE((*results)[2].duplicate);
  EXPECT_TRUE((*results)[3].duplicate);
  EXPECT_EQ((*results)[3].run_id, (*results)[1].run_id);
  EXPECT_EQ(AllRuns().size(), 3u);
  EXPECT_EQ(View((*results)[1].run_id).run.input, J("2"));
  EXPECT_EQ(View((*results)[1].run_id).run.external_key, "second");
  // Claimed in enqueue order (one priority).
  std::vector<RunId> claimed = ClaimRuns(job);
  EXPECT_EQ(claimed,
            (std::vector<RunId>{(*results)[0].run_id, (*results)[1].run_id,
                                (*results)[2].run_id}));
}

TEST_P(JobsEnqueue, EnqueueManyWithOneBadItem_StoresNothing) {
  Job job = EchoJob();
  DeployJob(job);
  std::vector<Engine::EnqueueItem> items = {{J("1"), {}},
                                            {J("2"), {.priority = 99999}}};
  absl::StatusOr<std::vector<EnqueueResult>> results =
      engine().EnqueueMany("echo", items);
  EXPECT_INVALID(results.status(), "item 1: priority 99999");
  EXPECT_TRUE(AllRuns().empty());
}

TEST_P(JobsEnqueue, JobsShareAQueue_AndOneCountCoversThem) {
  Job a = EchoJob("job_a", {.queue = "mail"});
  Job b = EchoJob("job_b", {.queue = "mail"});
  DeployJob(a);
  DeployJob(b);
  Enqueue(a, J("1"));
  Enqueue(b, J("2"));
  Enqueue(b, J("3"));
  EXPECT_EQ(CountsOf("mail").waiting, 3);
  // A flow-mode flow whose own queue would be "mail" can't take it.
  Flow mail("Mail");
  mail.Step("s", Echo());
  absl::StatusOr<DeployOutcome> outcome = engine().Deploy(mail);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()),
              HasSubstr("owned by no flow (it is shared)"));
  // A flow can share the queue too.
  Flow digest("digest", {.queue = "mail"});
  digest.Step("s", Echo());
  Deploy(digest);
  EXPECT_TRUE(engine().StartRun("digest", J("{}")).ok());
  EXPECT_EQ(CountsOf("mail").waiting, 4);
}

TEST_P(JobsEnqueue, RedeployingAJob_VerifiesAndAChangeIsRefused) {
  DeployJob(EchoJob("j", {.priority = 3, .keep = {.completed = {.count = 5}}}));
  absl::StatusOr<DeployOutcome> again = engine().Deploy(
      EchoJob("j", {.priority = 3, .keep = {.completed = {.count = 5}}}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, DeployOutcome::kVerified);
  absl::StatusOr<DeployOutcome> changed = engine().Deploy(
      EchoJob("j", {.priority = 4, .keep = {.completed = {.count = 5}}}));
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(changed.status().message()),
              HasSubstr("flow option priority is 4 here but 3"));
}

SLUICE_CONFORMANCE_SUITE(JobsEnqueue);

}  // namespace
}  // namespace sluice::testing
