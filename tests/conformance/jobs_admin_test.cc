// Jobs: pausing and resuming a queue, counts by state, removing runs.
#include "jobs_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

class JobsAdmin : public JobsConformance {
 protected:
  void SetUp() override {
    JobsConformance::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;  // no backend
    DeployJob(job_);
  }
  Job job_ = EchoJob();
};

TEST_P(JobsAdmin, APausedQueueIsNotClaimed_UntilResumed) {
  RunId run = Enqueue(job_, J("1")).run_id;
  ASSERT_TRUE(engine().PauseQueue("work").ok());
  absl::StatusOr<QueueState> state = engine().Counts("work");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->paused);
  EXPECT_EQ(state->counts.waiting, 1);
  EXPECT_TRUE(ClaimRuns(job_).empty());
  Enqueue(job_, J("2"));  // enqueueing into a paused queue is fine
  ASSERT_TRUE(engine().PauseQueue("work").ok());  // idempotent
  ASSERT_TRUE(engine().ResumeQueue("work").ok());
  EXPECT_FALSE(engine().Counts("work")->paused);
  std::vector<RunId> claimed = ClaimRuns(job_);
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_EQ(claimed[0], run);
}

TEST_P(JobsAdmin, PauseOfAnUnknownQueue_IsNotFound) {
  EXPECT_EQ(engine().PauseQueue("nowhere").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().ResumeQueue("nowhere").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().Counts("nowhere").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().PauseQueue("Bad Name").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(JobsAdmin, Counts_ShowEveryState) {
  // waiting 2, delayed 1, active 1, completed 1, failed 1, cancelled 1
  Job failing("failing", {.queue = "work", .max_attempts = 1},
              [](const Json&, TaskContext&) -> absl::StatusOr<Json> {
                return absl::InternalError("boom");
              });
  DeployJob(failing);
  Enqueue(failing, J("0"));
  Drive(failing.flow());  // fails it
  RunId done = Enqueue(job_, J("1")).run_id;
  EXPECT_EQ(DriveJob(job_), 1);
  EXPECT_EQ(View(done).run.status, RunStatus::kCompleted);
  RunId cancelled = Enqueue(job_, J("2")).run_id;
  ASSERT_TRUE(engine().CancelRun(cancelled, CancelMode::kImmediate).ok());
  Enqueue(job_, J("3"));
  ASSERT_EQ(ClaimRuns(job_).size(), 1u);  // active
  Enqueue(job_, J("4"));
  Enqueue(job_, J("5"));
  Enqueue(job_, J("6"), {.delay = absl::Minutes(1)});
  QueueCounts counts = CountsOf("work");
  EXPECT_EQ(counts.waiting, 2);
  EXPECT_EQ(counts.delayed, 1);
  EXPECT_EQ(counts.active, 1);
  EXPECT_EQ(counts.completed, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.cancelled, 1);
}

TEST_P(JobsAdmin, RemoveRun_DeletesAQueuedRunAndItsMessage) {
  RunId run = Enqueue(job_, J("1"), {.delay = absl::Minutes(1)}).run_id;
  RunId kept = Enqueue(job_, J("2")).run_id;
  ASSERT_TRUE(engine().RemoveRun(run).ok());
  EXPECT_EQ(engine().GetRun(run).status().code(), absl::StatusCode::kNotFound);
  QueueCounts counts = CountsOf("work");
  EXPECT_EQ(counts.delayed, 0);
  EXPECT_EQ(counts.waiting, 1);
  clock().Advance(absl::Minutes(2));
  EXPECT_EQ(ClaimRuns(job_), std::vector<RunId>{kept});
}

TEST_P(JobsAdmin, RemoveRun_DeletesAnEndedRun) {
  RunId run = Enqueue(job_, J("1")).run_id;
  EXPECT_EQ(DriveJob(job_), 1);
  ASSERT_TRUE(engine().RemoveRun(run).ok());
  EXPECT_TRUE(AllRuns().empty());
  EXPECT_EQ(CountsOf("work").completed, 0);
}

TEST_P(JobsAdmin, RemoveRunOfAStartedTask_IsRefusedAndChangesNothing) {
  RunId run = Enqueue(job_, J("1")).run_id;
  ASSERT_EQ(ClaimRuns(job_).size(), 1u);
  absl::Status removed = engine().RemoveRun(run);
  EXPECT_EQ(removed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(removed.message()), HasSubstr("started task"));
  EXPECT_EQ(View(run).run.status, RunStatus::kStarted);
  EXPECT_EQ(CountsOf("work").active, 1);
}

TEST_P(JobsAdmin, RemoveRunOfAnUnknownRun_IsNotFound) {
  EXPECT_EQ(engine().RemoveRun(RunId::Random()).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(JobsAdmin, RemoveRun_OfAFlowBetweenSteps) {
  Flow flow("pair", {.queue = "work"});
  flow.Step("a", Echo()).Step("b", {.depends_on = {"a"}}, Echo());
  Deploy(flow);
  absl::StatusOr<RunId> run = engine().StartRun("pair", J("{}"));
  ASSERT_TRUE(run.ok());
  std::vector<ClaimedTask> a = Claim(flow);
  ASSERT_EQ(a.size(), 1u);
  Complete(a[0], J("1"));  // "b" is queued now, nothing is started
  ASSERT_TRUE(engine().RemoveRun(*run).ok());
  EXPECT_TRUE(Claim(flow).empty());
  EXPECT_EQ(CountsOf("work").waiting, 0);
}

SLUICE_CONFORMANCE_SUITE(JobsAdmin);

}  // namespace
}  // namespace sluice::testing
