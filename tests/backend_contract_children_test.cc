// The Transaction contract, v6 fan-out children: child links (in a parent's
// store) and child reports (in a child's store), and parked (waiting) tasks
// (see backend_contract_fixture.h and sluice/backend.h's "Fan-out children").
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/backends.h"
#include "sluice/records.h"
#include "support/postgres_sql.h"
#include "support/sqlite_test_support.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Skips, in SetUp, a backend that does not offer fan-out yet (its calls
// return kUnimplemented), as BackendContractV5Test does for v5.
class ChildrenContractTest : public BackendContractTest {
 protected:
  void SetUp() override {
    BackendContractTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::Status status;
    {
      std::unique_ptr<Transaction> tx = Begin();
      ASSERT_NE(tx, nullptr);
      status = tx->CountChildReports().status();
    }
    if (status.code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << GetParam() << " does not offer fan-out yet: " << status;
    }
    Seed();
  }

  // Run 1 (steps 0 and 1) with parent tasks 1/0/0 and 1/0/1; run 2 with
  // parent task 2/0/0.
  void Seed() {
    SeedRun();
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(Movable({MakeRun(2)})));
      ASSERT_OK(tx.InsertStepStates(Movable({MakeStep(2, 0)})));
      ASSERT_OK(tx.InsertTasks(
          Movable({Waiting(MakeTask(1, 0, 0, 1)), Waiting(MakeTask(1, 0, 1, 2)),
                   Waiting(MakeTask(2, 0, 0, 3))})));
    });
  }

  void TearDown() override {
    BackendContractTest::TearDown();  // closes backend_ first
    own_database_.reset();
    if (!own_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(own_dir_, ignored);
    }
  }

  // Replaces the backend with one on a store of this test's own, whose rows
  // it can edit from outside (EditStoredRows), and seeds it; false on
  // memory, which keeps no stored text.
  bool UseOwnStore() {
    std::string url;
    if (GetParam() == "sqlite") {
      char dir[] = "/tmp/sluice-children-XXXXXX";
      if (mkdtemp(dir) == nullptr) return false;
      own_dir_ = dir;
      url = StrCat("sqlite:", own_dir_, "/children.db");
    } else if (GetParam() == "postgres") {
      absl::StatusOr<std::unique_ptr<testing::TestDatabase>> database =
          testing::TestDatabase::Create();
      EXPECT_TRUE(database.ok()) << database.status();
      if (!database.ok()) return false;
      own_database_ = std::move(*database);
      url = own_database_->url();
    } else {
      return false;
    }
    backend_.reset();
    absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return false;
    backend_ = std::move(*backend);
    Seed();
    return true;
  }

  // Runs the SQL for this backend on the store UseOwnStore() made.
  void EditStoredRows(const std::string& sqlite_sql,
                      const std::string& postgres_sql) {
    if (GetParam() == "sqlite") {
      sqlite_testing::RawDatabase(own_dir_ + "/children.db").Exec(sqlite_sql);
    } else {
      testing::SqlSession(own_database_->url()).Script(postgres_sql);
    }
  }

  static TaskRecord Waiting(TaskRecord task) {
    task.status = TaskStatus::kWaiting;
    task.attempts = 1;
    return task;
  }

  static TaskKey Parent(uint64_t run = 1, int task_index = 0) {
    return TaskKey{RunNo(run), 0, task_index};
  }

  static ChildLinkRecord Link(const TaskKey& parent, int child_index,
                              absl::Time pending_since = kT0) {
    return ChildLinkRecord{.parent = parent,
                           .child_index = child_index,
                           .child_store = child_index % 2 == 0 ? "" : "edge",
                           .child_run_id = RunNo(1000 + child_index),
                           .pending_since = pending_since,
                           .spec = J(StrCat(R"({"flow":"child","input":{"n":)",
                                            child_index, "}}"))};
  }

  static ChildSettlement Settle(const TaskKey& parent, int child_index,
                                ChildStatus outcome,
                                std::optional<Json> output = std::nullopt,
                                std::string error = "") {
    return ChildSettlement{.parent = parent,
                           .child_index = child_index,
                           .outcome = outcome,
                           .output = std::move(output),
                           .error = std::move(error)};
  }

  static ChildReport Report(int child_index, ChildStatus outcome,
                            absl::Time created_at = kT0) {
    return ChildReport{.parent_store = "main",
                       .parent = Parent(),
                       .child_index = child_index,
                       .child_run_id = RunNo(1000 + child_index),
                       .outcome = outcome,
                       .output = outcome == ChildStatus::kCompleted
                                     ? std::optional<Json>(J(R"({"ok":1})"))
                                     : std::nullopt,
                       .error = outcome == ChildStatus::kCompleted ? "" : "no",
                       .created_at = created_at};
  }

  static std::vector<ChildReport> Reports(std::vector<ChildReport> reports) {
    return reports;
  }

  static std::string Describe(const ChildLinkRecord& l) {
    return StrCat(
        l.parent.run_id.ToString(), "/", l.parent.step_index, "/",
        l.parent.task_index, "#", l.child_index, " store=", l.child_store,
        " child=", l.child_run_id.ToString(), " ", ToString(l.status),
        " out=", Text(l.output), " err=", l.error, " cascaded=", l.cascaded,
        " since=", absl::FormatTime(l.pending_since),
        " spec=", SerializeJson(l.spec), " unreadable=", l.unreadable);
  }
  static std::string Describe(const ChildReport& r) {
    return StrCat("#", r.report_id, " ", r.parent_store, ":",
                  r.parent.run_id.ToString(), "/", r.parent.step_index, "/",
                  r.parent.task_index, "#", r.child_index,
                  " child=", r.child_run_id.ToString(), " ",
                  ToString(r.outcome), " out=", Text(r.output),
                  " err=", r.error, " created=", absl::FormatTime(r.created_at),
                  " unreadable=", r.unreadable);
  }
  template <typename Record>
  static std::vector<std::string> DescribeAll(const std::vector<Record>& rs) {
    std::vector<std::string> out;
    for (const Record& r : rs) out.push_back(Describe(r));
    return out;
  }

  void InsertLinks(std::vector<ChildLinkRecord> links) {
    Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertChildLinks(links)); });
  }

  std::vector<ChildLinkRecord> Links(const TaskKey& parent,
                                     Fields fields = Fields::kAll) {
    std::unique_ptr<Transaction> tx = Begin();
    return ValueOf(tx->GetChildLinks(parent, fields));
  }

  static std::vector<int> IndexesOf(const std::vector<ChildLinkRecord>& ls) {
    std::vector<int> out;
    for (const ChildLinkRecord& l : ls) out.push_back(l.child_index);
    return out;
  }

  std::string own_dir_;  // UseOwnStore()'s SQLite file's directory
  std::unique_ptr<testing::TestDatabase> own_database_;  // or its Postgres one
};

TEST_P(ChildrenContractTest, InsertChildLinks_GetReturnsThemInChildOrder) {
  InsertLinks({Link(Parent(), 2), Link(Parent(), 0), Link(Parent(), 1)});
  InsertLinks({Link(Parent(1, 1), 0)});

  const std::vector<ChildLinkRecord> links = Links(Parent());
  EXPECT_THAT(DescribeAll(links), ElementsAre(Describe(Link(Parent(), 0)),
                                              Describe(Link(Parent(), 1)),
                                              Describe(Link(Parent(), 2))));
  EXPECT_THAT(IndexesOf(Links(Parent(1, 1))), ElementsAre(0));
  EXPECT_THAT(Links(Parent(2)), IsEmpty());
  EXPECT_THAT(Links(TaskKey{RunNo(9), 0, 0}), IsEmpty());
}

TEST_P(ChildrenContractTest, GetChildLinks_NoPayloads_LeavesOutOutputAndSpec) {
  InsertLinks({Link(Parent(), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(Movable(
        {Settle(Parent(), 0, ChildStatus::kCompleted, J(R"({"r":1})"))})));
  });

  const std::vector<ChildLinkRecord> links =
      Links(Parent(), Fields::kNoPayloads);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].status, ChildStatus::kCompleted);
  EXPECT_EQ(links[0].child_run_id, RunNo(1000));
  EXPECT_FALSE(links[0].output.has_value());
  EXPECT_TRUE(links[0].spec.is_null());
}

TEST_P(ChildrenContractTest, InsertChildLinks_Duplicate_IsAlreadyExists) {
  InsertLinks({Link(Parent(), 0)});
  EXPECT_EQ(FailureOfWrite([&](Transaction& tx) {
              return tx.InsertChildLinks(Movable({Link(Parent(), 0)}));
            }),
            absl::StatusCode::kAlreadyExists);
  // A repeat within one call too; and neither left anything behind.
  EXPECT_EQ(FailureOfWrite([&](Transaction& tx) {
              return tx.InsertChildLinks(
                  Movable({Link(Parent(), 1), Link(Parent(), 1)}));
            }),
            absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(IndexesOf(Links(Parent())), ElementsAre(0));
}

TEST_P(ChildrenContractTest, InsertChildLinks_UnknownParent_IsNotFound) {
  EXPECT_EQ(
      FailureOfWrite([&](Transaction& tx) {
        return tx.InsertChildLinks(Movable({Link(TaskKey{RunNo(9), 0, 0}, 0)}));
      }),
      absl::StatusCode::kNotFound);
  // The run exists, the task does not.
  EXPECT_EQ(FailureOfWrite([&](Transaction& tx) {
              return tx.InsertChildLinks(
                  Movable({Link(Parent(), 0), Link(Parent(1, 7), 0)}));
            }),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Links(Parent()), IsEmpty());
}

TEST_P(ChildrenContractTest, CountChildLinks_ByStatus) {
  InsertLinks({Link(Parent(), 0), Link(Parent(), 1), Link(Parent(), 2),
               Link(Parent(), 3), Link(Parent(), 4), Link(Parent(2), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(
        Movable({Settle(Parent(), 0, ChildStatus::kCompleted, J("1")),
                 Settle(Parent(), 1, ChildStatus::kFailed, std::nullopt, "x"),
                 Settle(Parent(), 2, ChildStatus::kCancelled)})));
  });

  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(ChildCounts counts, tx->CountChildLinks(Parent(), 10));
  EXPECT_EQ(counts.pending, 2);
  EXPECT_EQ(counts.completed, 1);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.cancelled, 1);
  EXPECT_EQ(counts.total(), 5);
  ASSERT_OK_AND_ASSIGN(ChildCounts other, tx->CountChildLinks(Parent(2), 10));
  EXPECT_EQ(other.pending, 1);
  EXPECT_EQ(other.total(), 1);
  ASSERT_OK_AND_ASSIGN(ChildCounts none, tx->CountChildLinks(Parent(1, 1), 10));
  EXPECT_EQ(none.total(), 0);
}

TEST_P(ChildrenContractTest, CountChildLinks_EachCountStopsAtUpTo) {
  InsertLinks({Link(Parent(), 0), Link(Parent(), 1), Link(Parent(), 2),
               Link(Parent(), 3)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(
        Movable({Settle(Parent(), 0, ChildStatus::kCompleted, J("1"))})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(ChildCounts one, tx->CountChildLinks(Parent(), 1));
  EXPECT_EQ(one.pending, 1);
  EXPECT_EQ(one.completed, 1);
  EXPECT_EQ(one.failed, 0);
  ASSERT_OK_AND_ASSIGN(ChildCounts two, tx->CountChildLinks(Parent(), 2));
  EXPECT_EQ(two.pending, 2);
  ASSERT_OK_AND_ASSIGN(ChildCounts exact, tx->CountChildLinks(Parent(), 3));
  EXPECT_EQ(exact.pending, 3);
  for (int64_t nothing : {int64_t{0}, int64_t{-1}}) {
    ASSERT_OK_AND_ASSIGN(ChildCounts none,
                         tx->CountChildLinks(Parent(), nothing));
    EXPECT_EQ(none.total(), 0) << nothing;
  }
}

TEST_P(ChildrenContractTest, SettleChildLinks_FirstOccurrenceAndPendingOnly) {
  InsertLinks({Link(Parent(), 0), Link(Parent(), 1), Link(Parent(2), 0)});
  std::vector<bool> applied;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        applied,
        tx.SettleChildLinks(Movable(
            {Settle(Parent(), 0, ChildStatus::kCompleted, J(R"({"a":1})")),
             Settle(Parent(), 0, ChildStatus::kFailed, std::nullopt, "late"),
             Settle(Parent(2), 0, ChildStatus::kFailed, std::nullopt, "boom"),
             Settle(Parent(), 9, ChildStatus::kCompleted),
             Settle(TaskKey{RunNo(9), 0, 0}, 0, ChildStatus::kCompleted)})));
  });
  EXPECT_THAT(applied, ElementsAre(true, false, true, false, false));

  ChildLinkRecord first = Link(Parent(), 0);
  first.status = ChildStatus::kCompleted;
  first.output = J(R"({"a":1})");
  first.cascaded = true;
  EXPECT_THAT(DescribeAll(Links(Parent())),
              ElementsAre(Describe(first), Describe(Link(Parent(), 1))));
  const std::vector<ChildLinkRecord> other = Links(Parent(2));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].status, ChildStatus::kFailed);
  EXPECT_EQ(other[0].error, "boom");

  // A settled link never moves again.
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(
        applied, tx.SettleChildLinks(
                     Movable({Settle(Parent(), 0, ChildStatus::kCancelled),
                              Settle(Parent(), 1, ChildStatus::kCancelled)})));
  });
  EXPECT_THAT(applied, ElementsAre(false, true));
  EXPECT_EQ(Links(Parent())[0].status, ChildStatus::kCompleted);
}

TEST_P(ChildrenContractTest, SettleChildLinks_CascadedFalse_IsOwedACancel) {
  InsertLinks({Link(Parent(), 0)});
  ChildSettlement cancel = Settle(Parent(), 0, ChildStatus::kCancelled);
  cancel.cascaded = false;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(std::span(&cancel, 1)));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<ChildLinkRecord> owed,
                       tx->FindUncascadedChildLinks(10));
  EXPECT_THAT(IndexesOf(owed), ElementsAre(0));
}

TEST_P(ChildrenContractTest, CancelPendingChildLinks_CancelsOnlyPending) {
  InsertLinks({Link(Parent(), 0), Link(Parent(), 1), Link(Parent(), 2),
               Link(Parent(2), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(
        Movable({Settle(Parent(), 1, ChildStatus::kCompleted, J("7"))})));
  });
  int64_t cancelled = 0;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(cancelled,
                         tx.CancelPendingChildLinks(Parent(), "parent failed"));
  });
  EXPECT_EQ(cancelled, 2);

  const std::vector<ChildLinkRecord> links = Links(Parent());
  ASSERT_EQ(links.size(), 3u);
  for (int i : {0, 2}) {
    EXPECT_EQ(links[i].status, ChildStatus::kCancelled) << i;
    EXPECT_FALSE(links[i].cascaded) << i;
    EXPECT_EQ(links[i].error, "parent failed") << i;
  }
  EXPECT_EQ(links[1].status, ChildStatus::kCompleted);
  EXPECT_EQ(links[1].error, "");
  EXPECT_EQ(Links(Parent(2))[0].status, ChildStatus::kPending);

  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(cancelled,
                         tx.CancelPendingChildLinks(Parent(), "again"));
  });
  EXPECT_EQ(cancelled, 0);
}

TEST_P(ChildrenContractTest, TakeStaleChildLinks_OldestFirst_ReArmsAndLimits) {
  InsertLinks({Link(Parent(), 0, At(3)), Link(Parent(), 1, At(1)),
               Link(Parent(), 2, At(2)), Link(Parent(), 3, At(10)),
               Link(Parent(2), 0, At(4))});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(
        Movable({Settle(Parent(), 2, ChildStatus::kCompleted, J("1"))})));
  });

  std::vector<ChildLinkRecord> taken;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(taken, tx.TakeStaleChildLinks(At(5), At(100), 2));
  });
  EXPECT_THAT(IndexesOf(taken), ElementsAre(1, 0));
  for (const ChildLinkRecord& link : taken) {
    EXPECT_EQ(link.pending_since, At(100));
    EXPECT_FALSE(link.spec.is_null());  // the full request, to re-create it
  }
  EXPECT_EQ(Links(Parent())[1].pending_since, At(100));

  // The re-armed ones are no longer stale: the next page holds the rest.
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(taken, tx.TakeStaleChildLinks(At(5), At(101), 2));
  });
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].parent, Parent(2));
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(taken, tx.TakeStaleChildLinks(At(5), At(102), 2));
  });
  EXPECT_THAT(taken, IsEmpty());
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(taken, tx.TakeStaleChildLinks(At(5), At(102), 0));
  });
  EXPECT_THAT(taken, IsEmpty());
}

TEST_P(ChildrenContractTest, UncascadedLinks_FoundUntilMarked) {
  InsertLinks({Link(Parent(), 0), Link(Parent(), 1), Link(Parent(), 2),
               Link(Parent(1, 1), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SettleChildLinks(
        Movable({Settle(Parent(), 0, ChildStatus::kCancelled)})));
    ASSERT_OK(tx.CancelPendingChildLinks(Parent(), "stop"));
  });

  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<ChildLinkRecord> owed,
                       tx->FindUncascadedChildLinks(10));
  // Link 0 reported its own cancel (cascaded); 1 and 2 are owed one.
  EXPECT_THAT(IndexesOf(owed), ElementsAre(1, 2));
  ASSERT_OK_AND_ASSIGN(std::vector<ChildLinkRecord> page,
                       tx->FindUncascadedChildLinks(1));
  EXPECT_EQ(page.size(), 1u);
  ASSERT_OK(
      tx->MarkChildLinksCascaded(Movable({Link(Parent(), 1), Link(Parent(), 7),
                                          Link(TaskKey{RunNo(9), 0, 0}, 0)})));
  ASSERT_OK(tx->Commit());

  tx = Begin();
  ASSERT_OK_AND_ASSIGN(owed, tx->FindUncascadedChildLinks(10));
  EXPECT_THAT(IndexesOf(owed), ElementsAre(2));
  tx.reset();
  EXPECT_TRUE(Links(Parent())[1].cascaded);
}

TEST_P(ChildrenContractTest, ChildReports_AppendPeekDeleteCount) {
  std::vector<int64_t> ids;
  Committed([&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(ids, tx.AppendChildReports(std::vector<ChildReport>{
                                  Report(0, ChildStatus::kCompleted, At(1)),
                                  Report(1, ChildStatus::kFailed, At(2)),
                                  Report(2, ChildStatus::kCancelled, At(3))}));
  });
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_LT(ids[0], ids[1]);
  EXPECT_LT(ids[1], ids[2]);

  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<ChildReport> all,
                       tx->PeekChildReports(0, 10));
  std::vector<ChildReport> expected = {
      Report(0, ChildStatus::kCompleted, At(1)),
      Report(1, ChildStatus::kFailed, At(2)),
      Report(2, ChildStatus::kCancelled, At(3))};
  for (size_t i = 0; i < expected.size(); ++i) expected[i].report_id = ids[i];
  EXPECT_EQ(DescribeAll(all), DescribeAll(expected));
  ASSERT_OK_AND_ASSIGN(std::vector<ChildReport> page,
                       tx->PeekChildReports(ids[0], 1));
  EXPECT_THAT(DescribeAll(page), ElementsAre(Describe(expected[1])));
  // Peeking consumes nothing.
  EXPECT_EQ(ValueOf(tx->CountChildReports()), 3);

  const std::vector<int64_t> remove = {ids[0], ids[2], ids[2] + 1000};
  ASSERT_OK(tx->DeleteChildReports(remove));
  ASSERT_OK(tx->Commit());

  tx = Begin();
  EXPECT_EQ(ValueOf(tx->CountChildReports()), 1);
  // `after` still works past a deleted id.
  ASSERT_OK_AND_ASSIGN(page, tx->PeekChildReports(ids[0], 10));
  EXPECT_THAT(DescribeAll(page), ElementsAre(Describe(expected[1])));
  ASSERT_OK_AND_ASSIGN(
      std::vector<int64_t> more,
      tx->AppendChildReports(Reports({Report(3, ChildStatus::kCompleted)})));
  ASSERT_EQ(more.size(), 1u);
  EXPECT_GT(more[0], ids[2]);  // ids are never handed out twice
  ASSERT_OK_AND_ASSIGN(page, tx->PeekChildReports(0, 0));
  EXPECT_THAT(page, IsEmpty());
}

TEST_P(ChildrenContractTest, Rollback_LeavesNothing) {
  InsertLinks({Link(Parent(), 0)});
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->InsertChildLinks(Movable({Link(Parent(), 1)})));
    ASSERT_OK(tx->SettleChildLinks(
        Movable({Settle(Parent(), 0, ChildStatus::kCompleted, J("1"))})));
    ASSERT_OK(tx->TakeStaleChildLinks(At(100), At(200), 10));
    ASSERT_OK(
        tx->AppendChildReports(Reports({Report(0, ChildStatus::kCompleted)})));
    ASSERT_OK(tx->CountChildReports());
  }  // dropped: rolled back
  EXPECT_THAT(DescribeAll(Links(Parent())),
              ElementsAre(Describe(Link(Parent(), 0))));
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->CountChildReports()), 0);
}

TEST_P(ChildrenContractTest, DeleteRuns_TakesParentLinks_LeavesReports) {
  InsertLinks({Link(Parent(), 0), Link(Parent(2), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(
        tx.AppendChildReports(Reports({Report(0, ChildStatus::kCompleted)})));
    ASSERT_OK(tx.DeleteRuns(Movable({RunNo(1)})));
  });
  EXPECT_THAT(Links(Parent()), IsEmpty());
  EXPECT_THAT(IndexesOf(Links(Parent(2))), ElementsAre(0));
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->CountChildReports()), 1);
  ASSERT_OK_AND_ASSIGN(std::vector<ChildLinkRecord> stale,
                       tx->TakeStaleChildLinks(At(1), At(2), 10));
  EXPECT_EQ(stale.size(), 1u);
}

TEST_P(ChildrenContractTest, WaitingTasks_UnfinishedAndParked_NeverStalled) {
  Committed([&](Transaction& tx) {
    TaskRecord before = *GetTask(tx, Parent(1, 1));
    TaskRecord after = before;
    after.stall_at = At(1);  // a stale stall time must not matter
    ASSERT_OK(tx.UpdateTasks(Movable({UpdateOf(before, after)})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<TaskRecord> unfinished,
                       tx->GetUnfinishedTasks(RunNo(1), 0, Fields::kAll));
  EXPECT_THAT(TaskIndexesOf(unfinished), ElementsAre(0, 1));
  ASSERT_OK_AND_ASSIGN(
      unfinished, tx->GetUnfinishedTasks(RunNo(1), std::nullopt, Fields::kAll));
  EXPECT_EQ(unfinished.size(), 2u);
  ASSERT_OK_AND_ASSIGN(
      std::vector<TaskRecord> stalled,
      tx->FindStalledTasks(StalledBefore(At(1000), 10), Fields::kAll));
  EXPECT_THAT(stalled, IsEmpty());
  ASSERT_OK_AND_ASSIGN(QueueCounts counts,
                       tx->CountTasks("greet", At(1), TaskCounts::kAll));
  EXPECT_EQ(counts.parked, 3);
  EXPECT_EQ(counts.waiting + counts.delayed + counts.active, 0);
}

TEST_P(ChildrenContractTest, UnreadableJson_IsNotedOnTheRecord) {
  if (!UseOwnStore()) GTEST_SKIP() << "memory keeps no stored text";
  InsertLinks({Link(Parent(), 0)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(
        tx.AppendChildReports(Reports({Report(0, ChildStatus::kCompleted)})));
  });
  // A number past the double range: valid JSON syntax (Postgres' json takes
  // it) that Sluice can't read.
  const std::string bad = R"('{"a":1e99999}')";
  EditStoredRows(
      StrCat("UPDATE child_links SET output = ", bad, ", spec = ", bad,
             "; UPDATE child_reports SET output = ", bad),
      StrCat("UPDATE sluice.child_links SET output = ", bad, ", spec = ", bad,
             "; UPDATE sluice.child_reports SET output = ", bad));
  const std::vector<ChildLinkRecord> links = Links(Parent());
  ASSERT_EQ(links.size(), 1u);
  EXPECT_THAT(links[0].unreadable, HasSubstr("child link"));
  EXPECT_EQ(links[0].child_run_id, RunNo(1000));  // the rest still reads
  EXPECT_EQ(links[0].status, ChildStatus::kPending);
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<ChildReport> reports,
                       tx->PeekChildReports(0, 10));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_THAT(reports[0].unreadable, HasSubstr("child report output"));
  EXPECT_EQ(reports[0].child_index, 0);
  EXPECT_EQ(reports[0].outcome, ChildStatus::kCompleted);
}

SLUICE_BACKEND_CONTRACT_SUITE(ChildrenContractTest);

}  // namespace
}  // namespace sluice::contract
