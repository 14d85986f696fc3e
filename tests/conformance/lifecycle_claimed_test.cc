// A finish planned from the claim's record of its task
// (TaskResult::claimed, docs/decisions/0078): it reads no task, and
// whatever changed the task since the claim sends it back to a read, so it
// ends as a finish that read the task would.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fail_nth_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lifecycle_fixture.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

// A backend whose transactions fail every GetTasks.
class NoTaskReads : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    return std::make_unique<FailEveryCallOf>(std::move(tx), &method_);
  }

 private:
  const std::string method_ = "GetTasks";
};

class LifecycleClaimed : public Lifecycle {};

TEST_P(LifecycleClaimed, TheClaimsRecord_IsTheStartedTask) {
  Flow flow = OneStep("claimed_record");
  Deploy(flow);
  RunId run = Start(flow, J(R"({"n":1})"));
  ClaimedTask task = One(flow);
  ASSERT_NE(task.record, nullptr);
  const TaskRecord& record = *task.record;
  const TaskRecord stored = TaskOf(run, "work");
  EXPECT_EQ(record.key, stored.key);
  EXPECT_EQ(record.flow_slug, stored.flow_slug);
  EXPECT_EQ(record.status, TaskStatus::kStarted);
  EXPECT_EQ(record.status, stored.status);
  EXPECT_EQ(record.attempts, stored.attempts);
  EXPECT_EQ(record.error, stored.error);
  EXPECT_EQ(record.queue_name, stored.queue_name);
  EXPECT_EQ(record.message_id, stored.message_id);
  EXPECT_EQ(record.queued_at, stored.queued_at);
  EXPECT_EQ(record.started_at, stored.started_at);
  EXPECT_EQ(record.finished_at, stored.finished_at);
  EXPECT_EQ(record.stall_at, stored.stall_at);
  EXPECT_EQ(record.requeued_count, stored.requeued_count);
  EXPECT_EQ(record.worker_id, stored.worker_id);
  EXPECT_EQ(record.budget_start, stored.budget_start);
  EXPECT_EQ(record.cancel_requested, stored.cancel_requested);
  EXPECT_EQ(record.options, stored.options);
  EXPECT_EQ(record.output, stored.output);
  // The input went to the handler.
  EXPECT_TRUE(record.input.is_null());
  EXPECT_EQ(task.input, stored.input);
}

TEST_P(LifecycleClaimed, AFinishWithTheRecord_ReadsNoTask) {
  Flow flow = OneStep("claimed_no_read");
  Deploy(flow);
  RunId run = Start(flow, J("{}"));
  ClaimedTask task = One(flow);
  NoTaskReads reads_fail(backend());
  UseEngine(reads_fail, DefaultOptions());
  FinishOutcome got = FinishOnly({WithRecord(task, J(R"({"ok":true})"))});
  UseEngine(backend(), DefaultOptions());
  EXPECT_THAT(got.dispositions, ElementsAre(ResultDisposition::kCompleted));
  TaskRecord stored = TaskOf(run, "work");
  EXPECT_EQ(stored.status, TaskStatus::kCompleted);
  EXPECT_EQ(stored.output, J(R"({"ok":true})"));
  EXPECT_EQ(stored.attempts, 1);
  EXPECT_FALSE(stored.stall_at.has_value());
  ASSERT_TRUE(engine().ApplyReports(got.report_ids).ok());
  EXPECT_EQ(View(run).run.output, J(R"({"work":{"ok":true}})"));
}

// The attempt is the last of its budget: a failure for good, not a retry
// (whose write compares the cancel request however it was planned).
TEST_P(LifecycleClaimed, ACancelRequestSinceTheClaim_CancelsAFinalFailure) {
  Flow flow = OneStep("claimed_cancel", /*max_attempts=*/1);
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  ExpectCancelledByRequest(
      FinishOnly({WithRecord(task, absl::UnavailableError("flaky"))}), run);
}

TEST_P(LifecycleClaimed, ACancelRequestSinceTheClaim_KeepsACompletion) {
  Flow flow = OneStep("claimed_cancel_completes");
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask task = One(flow);
  ASSERT_TRUE(engine().CancelRun(run, CancelMode::kRequest).ok());
  FinishOutcome got = FinishOnly({WithRecord(task, J("2"))});
  EXPECT_THAT(got.dispositions, ElementsAre(ResultDisposition::kCompleted));
  TaskRecord stored = TaskOf(run, "work");
  EXPECT_EQ(stored.status, TaskStatus::kCompleted);
  // The request stays on the task, as a finish that read it would leave it.
  EXPECT_TRUE(stored.cancel_requested);
}

TEST_P(LifecycleClaimed, ATaskTakenBackAndClaimedAgain_IsStale) {
  Flow flow = OneStep("claimed_taken_back");
  Deploy(flow);
  RunId run = Start(flow, J("1"));
  ClaimedTask first = One(flow);
  ASSERT_EQ(RecoverAfterLeases(), 1);
  ClaimedTask second = One(flow);
  ASSERT_EQ(second.attempt, 2);
  FinishOutcome got = FinishOnly({WithRecord(first, J("1"))});
  EXPECT_THAT(got.dispositions, ElementsAre(ResultDisposition::kStale));
  TaskRecord stored = TaskOf(run, "work");
  EXPECT_EQ(stored.status, TaskStatus::kStarted);
  EXPECT_EQ(stored.attempts, 2);
  EXPECT_THAT(FinishOnly({WithRecord(second, J("2"))}).dispositions,
              ElementsAre(ResultDisposition::kCompleted));
}

// Ends as Completion.LateResultOnAFailedRun_OnlyArchives does with a read.
TEST_P(LifecycleClaimed, ALateResultOnAFailedRun_IsStale) {
  Flow flow("claimed_late");
  flow.Map("each", {.max_attempts = 1}, Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 2u);
  Fail(claimed[0], absl::InternalError("x"));
  FinishOutcome late =
      FinishOnly({WithRecord(claimed[1], absl::InternalError("y"))});
  EXPECT_THAT(late.dispositions, ElementsAre(ResultDisposition::kStale));
  EXPECT_TRUE(late.report_ids.empty());
  TaskRecord sibling = TaskOf(run, "each", 1);
  EXPECT_EQ(sibling.status, TaskStatus::kCancelled);
  EXPECT_TRUE(MessageOf(sibling)->archived);
}

TEST_P(LifecycleClaimed, ARecordOfAnotherTask_IsIgnored) {
  Flow flow("claimed_mismatch");
  flow.Map("each", Echo());
  Deploy(flow);
  RunId run = Start(flow, J("[1,2]"));
  std::vector<ClaimedTask> claimed = Claim(flow);
  ASSERT_EQ(claimed.size(), 2u);
  TaskResult crossed = WithRecord(claimed[1], J("20"));
  crossed.claimed = claimed[0].record;
  EXPECT_THAT(FinishOnly({std::move(crossed)}).dispositions,
              ElementsAre(ResultDisposition::kCompleted));
  EXPECT_EQ(TaskOf(run, "each", 1).output, J("20"));
  EXPECT_EQ(TaskOf(run, "each", 0).status, TaskStatus::kStarted);
}

SLUICE_CONFORMANCE_SUITE(LifecycleClaimed);

}  // namespace
}  // namespace sluice::testing
