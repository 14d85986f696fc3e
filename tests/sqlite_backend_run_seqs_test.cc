// A connection remembers the seqs of runs across its transactions (decision
// 0088). A seq can be given to a new run once its run is deleted, so a seq
// remembered for a run that is gone must never find the new run's rows:
// not after this connection deleted it, not after a rollback undid its
// insert, and not after another connection deleted it.
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sqlite_backend.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeQueue;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::MakeTask;
using ::sluice::sqlite_testing::SqliteBackendTest;

class SqliteRunSeqsTest : public SqliteBackendTest {
 protected:
  // Writes run `run_id` with one task (step 0, task 0) and commits unless
  // `commit` is false (the transaction is then dropped: rolled back).
  void AddRun(Backend& backend, const RunId& run_id, bool commit = true) {
    std::unique_ptr<Transaction> txn = Begin(backend);
    ASSERT_NE(txn, nullptr);
    RunRecord run = MakeRun(run_id, "flow", kT0);
    ASSERT_TRUE(txn->InsertRuns({&run, 1}).ok());
    TaskRecord task = MakeTask(run_id, 0, next_message_++);
    ASSERT_TRUE(txn->InsertTasks({&task, 1}).ok());
    if (commit) {
      ASSERT_TRUE(txn->Commit().ok());
    }
  }

  void DeleteRun(Backend& backend, const RunId& run_id) {
    std::unique_ptr<Transaction> txn = Begin(backend);
    ASSERT_NE(txn, nullptr);
    ASSERT_EQ(txn->DeleteRuns({&run_id, 1}).value_or(-1), 1);
    ASSERT_TRUE(txn->Commit().ok());
  }

  // The run of the task (run_id, 0, 0) as `backend` reads it; nullopt if
  // there is no such task.
  std::optional<RunId> RunOfTask(Backend& backend, const RunId& run_id) {
    std::unique_ptr<Transaction> txn = Begin(backend);
    if (txn == nullptr) return std::nullopt;
    const TaskKey key{run_id, 0, 0};
    absl::StatusOr<std::vector<std::optional<TaskRecord>>> tasks =
        txn->GetTasks({&key, 1}, Fields::kNoPayloads);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    if (!tasks.ok() || !(*tasks)[0].has_value()) return std::nullopt;
    return (*tasks)[0]->key.run_id;
  }

  void CreateQueue(Backend& backend) {
    std::unique_ptr<Transaction> txn = Begin(backend);
    ASSERT_NE(txn, nullptr);
    ASSERT_TRUE(txn->CreateQueue(MakeQueue("flow")).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }

  const RunId gone_ = RunId(1, 1);
  const RunId next_ = RunId(2, 2);
  int64_t next_message_ = 1;
};

TEST_F(SqliteRunSeqsTest, RunDeletedHere_ItsSeqFindsNothing) {
  std::unique_ptr<SqliteBackend> backend = Open();
  CreateQueue(*backend);
  AddRun(*backend, gone_);
  ASSERT_EQ(RunOfTask(*backend, gone_), gone_);  // its seq is remembered

  DeleteRun(*backend, gone_);
  AddRun(*backend, next_);  // takes the deleted run's seq

  EXPECT_EQ(RunOfTask(*backend, gone_), std::nullopt);
  EXPECT_EQ(RunOfTask(*backend, next_), next_);
}

TEST_F(SqliteRunSeqsTest, RunInsertRolledBack_ItsSeqFindsNothing) {
  std::unique_ptr<SqliteBackend> backend = Open();
  CreateQueue(*backend);
  AddRun(*backend, gone_, /*commit=*/false);

  AddRun(*backend, next_);  // takes the seq the rolled-back insert had

  EXPECT_EQ(RunOfTask(*backend, gone_), std::nullopt);
  EXPECT_EQ(RunOfTask(*backend, next_), next_);
}

TEST_F(SqliteRunSeqsTest, RunDeletedByAnotherConnection_ItsSeqFindsNothing) {
  std::unique_ptr<SqliteBackend> here = Open();
  std::unique_ptr<SqliteBackend> there = Open();
  CreateQueue(*here);
  AddRun(*here, gone_);
  ASSERT_EQ(RunOfTask(*here, gone_), gone_);  // its seq is remembered here

  DeleteRun(*there, gone_);
  AddRun(*there, next_);  // takes the deleted run's seq

  EXPECT_EQ(RunOfTask(*here, gone_), std::nullopt);
  EXPECT_EQ(RunOfTask(*here, next_), next_);
}

}  // namespace
}  // namespace sluice
