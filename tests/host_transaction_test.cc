// Enqueuing in the host's own transaction (sluice/host_transaction.h), on a
// real SQLite file and a real Postgres database: the host commits and the
// run exists and is worked; the host rolls back and nothing of it exists;
// a failed call leaves the host's transaction usable; bad input is refused
// and changes nothing.
#include "sluice/host_transaction.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "host_transaction_fixture.h"
#include "sluice/backends.h"
#include "sluice/engine.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

TEST_P(HostTransactionTest, Commit_RunExistsAndAWorkerCompletesIt) {
  // A worker already idle on the queue, polling rarely: on SQLite only
  // Committed() wakes it in time, on Postgres the NOTIFY delivered at the
  // host's commit does.
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      engine_->StartWorker(WorkerSpec().Serve(OrderJob(false, db_.get())),
                           {.poll_interval = absl::Seconds(60),
                            .sweep_interval = absl::ZeroDuration()});
  ASSERT_TRUE(worker.ok()) << worker.status();

  absl::StatusOr<HostTransaction> host = BeginHost();
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(db_->Exec("INSERT INTO orders (id) VALUES ('o1')").ok());
  absl::StatusOr<EnqueueResult> job = host->Enqueue("order_job", Order("o1"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->duplicate);
  // Not committed yet: nobody else sees the run or the host's row.
  EXPECT_EQ(Snapshot(), Totals{});

  ASSERT_TRUE(db_->Exec("COMMIT").ok());
  if (db_->kind() == "sqlite") host->Committed();
  EXPECT_EQ(db_->CommittedRows(db_->SluiceTable("runs")), 1);
  EXPECT_EQ(db_->CommittedRows("orders"), 1);

  ASSERT_TRUE(AwaitRunEnded(job->run_id, absl::Seconds(20)));
  absl::StatusOr<RunView> view = engine_->GetRun(job->run_id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->run.status, RunStatus::kCompleted);
  boost::json::object output;  // a run's output holds its leaf step's
  output["job"] = "o1";
  EXPECT_EQ(view->run.output, Json(std::move(output)));
  EXPECT_TRUE((*worker)->Stop().ok());
}

TEST_P(HostTransactionTest, Rollback_NothingOfTheRunExists) {
  Totals before = Snapshot();
  absl::StatusOr<HostTransaction> host = BeginHost();
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(db_->Exec("INSERT INTO orders (id) VALUES ('o1')").ok());
  ASSERT_TRUE(host->Enqueue("order_job", Order("o1")).ok());
  ASSERT_TRUE(
      host->Enqueue("order_job", Order("o2"), {.dedupe = Dedupe{.key = "o2"}})
          .ok());
  ASSERT_TRUE(db_->Exec("ROLLBACK").ok());
  host->RolledBack();

  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(db_->CommittedRows(db_->SluiceTable("dedupe")), 0);
  absl::StatusOr<std::vector<RunRecord>> runs = engine_->ListRuns("", 10);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_TRUE(runs->empty());
  absl::StatusOr<QueueState> counts = engine_->Counts("orders_q");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->counts.waiting, 0);
  // The dedupe key was never taken: enqueuing it again makes a new run.
  absl::StatusOr<EnqueueResult> again = engine_->Enqueue(
      "order_job", Order("o2"), {.dedupe = Dedupe{.key = "o2"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->duplicate);
}

TEST_P(HostTransactionTest, FailedCall_LeavesTheHostTransactionUsable) {
  absl::StatusOr<HostTransaction> host = BeginHost();
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(db_->Exec("INSERT INTO orders (id) VALUES ('o1')").ok());
  // Refused in the database (no such job): its savepoint is rolled back.
  absl::StatusOr<EnqueueResult> missing =
      host->Enqueue("no_such_job", Order("x"));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  // Refused before any database access.
  absl::StatusOr<EnqueueResult> bad =
      host->Enqueue("order_job", Order("x"), {.priority = 100'000});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  ASSERT_TRUE(db_->Exec("INSERT INTO orders (id) VALUES ('o2')").ok());
  absl::StatusOr<EnqueueResult> job = host->Enqueue("order_job", Order("o2"));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(db_->Exec("COMMIT").ok());
  host->Committed();
  EXPECT_EQ(db_->CommittedRows("orders"), 2);
  EXPECT_EQ(db_->CommittedRows(db_->SluiceTable("runs")), 1);
}

TEST_P(HostTransactionTest, StartRunAndEnqueueMany_CommitWithTheHost) {
  absl::StatusOr<HostTransaction> host = BeginHost();
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(host->StartRun("order_job", Order("a")).ok());
  std::vector<Engine::EnqueueItem> items = {{Order("b"), {}}, {Order("c"), {}}};
  absl::StatusOr<std::vector<EnqueueResult>> many =
      host->EnqueueMany("order_job", items);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_TRUE(host->Enqueue(OrderJob(false, db_.get()), Order("d")).ok());
  ASSERT_TRUE(db_->Exec("COMMIT").ok());
  host->Committed();
  EXPECT_EQ(db_->CommittedRows(db_->SluiceTable("runs")), 4);
  EXPECT_EQ(db_->CommittedRows(db_->MessagesTable("orders_q", false)), 4);
}

TEST_P(HostTransactionTest, BadInput_IsAClearErrorThatChangesNothing) {
  Totals before = Snapshot();
  absl::StatusOr<std::unique_ptr<Backend>> null = db_->BorrowNull();
  EXPECT_TRUE(absl::IsInvalidArgument(null.status())) << null.status();
  EXPECT_THAT(null.status().message(), HasSubstr("null"));

  // No transaction open on the host's connection.
  absl::StatusOr<std::unique_ptr<Backend>> idle = db_->Borrow();
  EXPECT_TRUE(absl::IsFailedPrecondition(idle.status())) << idle.status();
  EXPECT_THAT(idle.status().message(), HasSubstr("no open transaction"));

  // Borrowed inside a transaction that then ended: each call checks again.
  ASSERT_TRUE(db_->Exec(db_->begin_sql()).ok());
  absl::StatusOr<std::unique_ptr<Backend>> borrowed = db_->Borrow();
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  ASSERT_TRUE(db_->Exec("COMMIT").ok());
  HostTransaction host = engine_->WithHostTransaction(**borrowed);
  absl::StatusOr<EnqueueResult> late = host.Enqueue("order_job", Order("x"));
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("no open transaction"));

  // A database without Sluice's schema.
  absl::StatusOr<std::unique_ptr<Backend>> plain = db_->BorrowWithoutSchema();
  EXPECT_TRUE(absl::IsFailedPrecondition(plain.status())) << plain.status();
  EXPECT_THAT(plain.status().message(), HasSubstr("no Sluice schema"));

  // A borrowed backend of another kind than the engine's.
  absl::StatusOr<std::unique_ptr<Backend>> memory = OpenBackend("memory:");
  ASSERT_TRUE(memory.ok()) << memory.status();
  HostTransaction mismatched = engine_->WithHostTransaction(**memory);
  absl::StatusOr<EnqueueResult> wrong =
      mismatched.Enqueue("order_job", Order("x"));
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status())) << wrong.status();

  EXPECT_EQ(Snapshot(), before);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostTransactionTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sluice::testing
