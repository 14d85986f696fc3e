// A handler's own write committed with its task's completion
// (TaskContext::WriteOnCompletion), on a real SQLite file and a real
// Postgres database: committed together, and absent when the attempt is
// fenced, the write fails, or the completion transaction fails.
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "host_transaction_fixture.h"
#include "sluice/engine.h"
#include "sluice/forwarding_backend.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

ClaimRequest OrdersClaim(int limit = 1) {
  ClaimRequest request{
      .queue = "orders_q", .worker_id = "test", .limit = limit};
  request.served.Add("order_job", 0);
  return request;
}

using HostCompletionTest = HostTransactionTest;

TEST_P(HostCompletionTest, Worker_CommitsTheHandlersWriteWithTheCompletion) {
  absl::StatusOr<EnqueueResult> job =
      engine_->Enqueue("order_job", Order("c1"));
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::unique_ptr<Worker>> worker = engine_->StartWorker(
      WorkerSpec().Serve(OrderJob(/*write_order=*/true, db_.get())),
      {.poll_interval = absl::Milliseconds(50)});
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_TRUE(AwaitRunEnded(job->run_id, absl::Seconds(20)));
  EXPECT_TRUE((*worker)->Stop().ok());
  absl::StatusOr<RunView> view = engine_->GetRun(job->run_id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->run.status, RunStatus::kCompleted);
  EXPECT_EQ(db_->CommittedRows("orders"), 1);
}

TEST_P(HostCompletionTest, FencedAttempt_LeavesNoTraceOfItsWrite) {
  ASSERT_TRUE(engine_->Enqueue("order_job", Order("c1")).ok());
  absl::StatusOr<std::vector<ClaimedTask>> first =
      engine_->Claim(OrdersClaim());
  ASSERT_TRUE(first.ok() && first->size() == 1) << first.status();
  const ClaimedTask& task = first->front();
  // The lease goes back (as at shutdown): attempt 1 no longer owns the task.
  Lease lease{task.key, task.attempt};
  ASSERT_TRUE(engine_->ReleaseTasks(std::span(&lease, 1)).ok());
  TaskResult stale{task.key, task.attempt, Json("c1"), db_->InsertOrder("c1")};
  absl::StatusOr<FinishOutcome> fenced =
      engine_->FinishTasks(std::span(&stale, 1));
  ASSERT_TRUE(fenced.ok()) << fenced.status();
  EXPECT_EQ(fenced->dispositions[0], ResultDisposition::kStale);
  EXPECT_EQ(db_->CommittedRows("orders"), 0);

  absl::StatusOr<std::vector<ClaimedTask>> second =
      engine_->Claim(OrdersClaim());
  ASSERT_TRUE(second.ok() && second->size() == 1) << second.status();
  TaskResult owned{second->front().key, second->front().attempt, Json("c1"),
                   db_->InsertOrder("c1")};
  absl::StatusOr<FinishOutcome> done =
      engine_->FinishTasks(std::span(&owned, 1));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->dispositions[0], ResultDisposition::kCompleted);
  EXPECT_EQ(db_->CommittedRows("orders"), 1);
}

TEST_P(HostCompletionTest, FailingWrite_RollsBackAndFailsOnlyItsAttempt) {
  ASSERT_TRUE(engine_->Enqueue("order_job", Order("a")).ok());
  ASSERT_TRUE(engine_->Enqueue("order_job", Order("b")).ok());
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      engine_->Claim(OrdersClaim(2));
  ASSERT_TRUE(claimed.ok() && claimed->size() == 2) << claimed.status();
  std::vector<TaskResult> results = {
      {(*claimed)[0].key, (*claimed)[0].attempt, Json("a"),
       db_->InsertOrder("a")},
      {(*claimed)[1].key, (*claimed)[1].attempt, Json("b"),
       db_->FailingWrite()},
  };
  absl::StatusOr<FinishOutcome> outcome = engine_->FinishTasks(results);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->dispositions[0], ResultDisposition::kCompleted);
  EXPECT_EQ(outcome->dispositions[1], ResultDisposition::kRetrying);
  EXPECT_EQ(db_->CommittedRows("orders"), 1);
  absl::StatusOr<RunView> failed = engine_->GetRun((*claimed)[1].key.run_id);
  ASSERT_TRUE(failed.ok()) << failed.status();
  ASSERT_EQ(failed->attempts.size(), 1u);
  EXPECT_THAT(failed->attempts[0].error,
              HasSubstr("the handler's completion write failed"));
}

// Fails AppendReports, the last write of a completion transaction, while on.
class FailingReports : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool fail = true;

 protected:
  std::unique_ptr<Transaction> Wrap(std::unique_ptr<Transaction> tx) override {
    class Tx : public ForwardingTransaction {
     public:
      Tx(std::unique_ptr<Transaction> t, const bool* fail)
          : ForwardingTransaction(std::move(t)), fail_(fail) {}

     protected:
      absl::Status BeforeCall(std::string_view method) override {
        if (*fail_ && method == "AppendReports") {
          return absl::UnavailableError("injected: the database went away");
        }
        return absl::OkStatus();
      }

     private:
      const bool* fail_;
    };
    return std::make_unique<Tx>(std::move(tx), &fail);
  }
};

TEST_P(HostCompletionTest, FailedCompletionTransaction_RollsBackTheWrite) {
  FailingReports faulty(db_->backend());
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(faulty);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Enqueue("order_job", Order("c1")).ok());
  absl::StatusOr<std::vector<ClaimedTask>> claimed =
      (*engine)->Claim(OrdersClaim());
  ASSERT_TRUE(claimed.ok() && claimed->size() == 1) << claimed.status();
  TaskResult result{claimed->front().key, claimed->front().attempt, Json("c1"),
                    db_->InsertOrder("c1")};
  absl::StatusOr<FinishOutcome> outcome =
      (*engine)->FinishTasks(std::span(&result, 1));
  EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  EXPECT_EQ(db_->CommittedRows("orders"), 0);
  // Still the attempt's: stored again once the database is back.
  faulty.fail = false;
  outcome = (*engine)->FinishTasks(std::span(&result, 1));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->dispositions[0], ResultDisposition::kCompleted);
  EXPECT_EQ(db_->CommittedRows("orders"), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostCompletionTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
