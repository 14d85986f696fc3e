// ListRuns(RunQuery) on the SQLite backend: every filter, both orders, ties
// broken by run id, paging by the `after` position, and the metadata filter
// (applied after reading, so a page must read on until it has `limit`).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/internal/strings.h"
#include "sluice/json.h"
#include "sluice/records.h"
#include "sqlite_backend.h"
#include "support/sqlite_test_support.h"

namespace sluice {
namespace {

using ::sluice::sqlite_testing::J;
using ::sluice::sqlite_testing::kT0;
using ::sluice::sqlite_testing::MakeRun;
using ::sluice::sqlite_testing::RawDatabase;
using ::sluice::sqlite_testing::SqliteBackendTest;
using ::sluice::sqlite_testing::ValueOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RunId RunNo(int n) { return RunId(0x0190000000007000ULL, n); }
absl::Time At(int seconds) { return kT0 + absl::Seconds(seconds); }

std::vector<int> NumbersOf(const std::vector<RunRecord>& runs) {
  std::vector<int> numbers;
  for (const RunRecord& run : runs) {
    numbers.push_back(static_cast<int>(run.run_id.low()));
  }
  return numbers;
}

class SqliteListRunsTest : public SqliteBackendTest {
 protected:
  void SetUp() override {
    SqliteBackendTest::SetUp();
    backend_ = Open();
    ASSERT_NE(backend_, nullptr);
  }

  void Insert(std::vector<RunRecord> runs) {
    std::unique_ptr<Transaction> txn = Begin(*backend_);
    ASSERT_TRUE(txn->InsertRuns(runs).ok());
    ASSERT_TRUE(txn->Commit().ok());
  }

  std::vector<int> List(const RunQuery& query,
                        Fields fields = Fields::kNoPayloads) {
    return NumbersOf(ValueOf(Begin(*backend_)->ListRuns(query, fields)));
  }

  // Every page of `query`, `page` runs at a time, resuming after the last
  // run of the page before, joined.
  std::vector<int> ListByPages(RunQuery query, int page) {
    query.limit = page;
    std::vector<int> all;
    for (int pages = 0; pages < 100; ++pages) {
      std::vector<RunRecord> runs =
          ValueOf(Begin(*backend_)->ListRuns(query, Fields::kNoPayloads));
      for (int n : NumbersOf(runs)) all.push_back(n);
      if (static_cast<int>(runs.size()) < page) break;
      const RunRecord& last = runs.back();
      query.after = RunQuery::Position{
          query.order_by == RunQuery::OrderBy::kFinishedAt ? *last.finished_at
                                                           : last.started_at,
          last.run_id};
    }
    return all;
  }

  std::unique_ptr<SqliteBackend> backend_;
};

RunRecord Ended(int n, std::string flow, absl::Time started, RunStatus status,
                absl::Time finished) {
  RunRecord run = MakeRun(RunNo(n), std::move(flow), started);
  run.status = status;
  run.finished_at = finished;
  return run;
}

TEST_F(SqliteListRunsTest, SameTime_TiesBreakByRunIdInTheWalkDirection) {
  // Inserted in an order unlike the ids'.
  Insert({MakeRun(RunNo(3), "f", At(5)), MakeRun(RunNo(1), "f", At(5)),
          MakeRun(RunNo(2), "f", At(5)), MakeRun(RunNo(9), "f", At(1))});
  RunQuery query = RunQuery::OfFlow("f", 10);

  EXPECT_THAT(List(query), ElementsAre(3, 2, 1, 9));
  query.newest_first = false;
  EXPECT_THAT(List(query), ElementsAre(9, 1, 2, 3));
}

TEST_F(SqliteListRunsTest, Pages_NoGapsOrRepeats_WhenManyShareATime) {
  std::vector<RunRecord> runs;
  for (int n = 1; n <= 23; ++n) {
    // Eight times, each shared by several runs.
    runs.push_back(MakeRun(RunNo(n), n % 2 ? "a" : "b", At(n % 8)));
  }
  Insert(runs);
  for (RunQuery query :
       {RunQuery::OfFlow("", 100), RunQuery::OfFlow("a", 100)}) {
    for (bool newest : {true, false}) {
      query.newest_first = newest;
      const std::vector<int> whole = List(query);
      EXPECT_EQ(whole.size(), query.flow_slugs.empty() ? 23u : 12u);
      for (int page : {1, 3, 5}) {
        EXPECT_THAT(ListByPages(query, page), ElementsAreArray(whole))
            << "page " << page << " newest " << newest;
      }
    }
  }
}

TEST_F(SqliteListRunsTest, FinishedOrder_LeavesOutUnfinished_AndPages) {
  Insert({Ended(1, "f", At(0), RunStatus::kCompleted, At(30)),
          Ended(2, "f", At(1), RunStatus::kFailed, At(20)),
          MakeRun(RunNo(3), "f", At(2)),
          Ended(4, "g", At(3), RunStatus::kCancelled, At(20)),
          Ended(5, "f", At(4), RunStatus::kCompleted, At(10))});
  RunQuery query = RunQuery::OfFlow("", 10);
  query.order_by = RunQuery::OrderBy::kFinishedAt;

  EXPECT_THAT(List(query), ElementsAre(1, 4, 2, 5));
  EXPECT_THAT(ListByPages(query, 1), ElementsAre(1, 4, 2, 5));
  query.newest_first = false;
  EXPECT_THAT(ListByPages(query, 2), ElementsAre(5, 2, 4, 1));
  query.flow_slugs = {"f"};
  EXPECT_THAT(List(query), ElementsAre(5, 2, 1));
}

TEST_F(SqliteListRunsTest, FlowsAndStatuses_AnyOfEach_AllFiltersTogether) {
  Insert({Ended(1, "a", At(1), RunStatus::kCompleted, At(9)),
          Ended(2, "b", At(2), RunStatus::kFailed, At(9)),
          Ended(3, "c", At(3), RunStatus::kCompleted, At(9)),
          MakeRun(RunNo(4), "a", At(4)),
          Ended(5, "b", At(5), RunStatus::kCancelled, At(9))});
  RunQuery query = RunQuery::OfFlow("", 10);
  query.flow_slugs = {"a", "b"};
  EXPECT_THAT(List(query), ElementsAre(5, 4, 2, 1));
  query.statuses = {RunStatus::kCompleted, RunStatus::kFailed};
  EXPECT_THAT(List(query), ElementsAre(2, 1));
  query.flow_slugs.clear();
  EXPECT_THAT(List(query), ElementsAre(3, 2, 1));
  query.statuses = {RunStatus::kStarted};
  EXPECT_THAT(List(query), ElementsAre(4));
  query.flow_slugs = {"none"};
  EXPECT_THAT(List(query), IsEmpty());
}

TEST_F(SqliteListRunsTest, FromAndTo_AreAHalfOpenRange) {
  Insert({MakeRun(RunNo(1), "f", At(1)), MakeRun(RunNo(2), "f", At(2)),
          MakeRun(RunNo(3), "f", At(3)), MakeRun(RunNo(4), "f", At(4))});
  RunQuery query = RunQuery::OfFlow("f", 10);
  query.from = At(2);
  query.to = At(4);

  EXPECT_THAT(List(query), ElementsAre(3, 2));
  query.newest_first = false;
  query.after = RunQuery::Position{At(2), RunNo(2)};
  EXPECT_THAT(List(query), ElementsAre(3));
}

TEST_F(SqliteListRunsTest, Metadata_ContainmentReadsOnUntilTheLimit) {
  std::vector<RunRecord> runs;
  for (int n = 1; n <= 12; ++n) {
    RunRecord run = MakeRun(RunNo(n), "f", At(n));
    if (n % 4 == 0) {
      run.metadata = J(R"({"tenant":"acme","tags":["x","y"],"n":1})");
    } else if (n % 4 == 1) {
      run.metadata = J(R"({"tenant":"other"})");
    }  // else no metadata (null)
    runs.push_back(run);
  }
  Insert(runs);
  RunQuery query = RunQuery::OfFlow("f", 2);
  query.metadata = J(R"({"tenant":"acme","tags":["y"]})");

  // Runs 12, 8 and 4 match, with nine that don't between them.
  EXPECT_THAT(List(query, Fields::kAll), ElementsAre(12, 8));
  EXPECT_THAT(ListByPages(query, 1), ElementsAre(12, 8, 4));
  EXPECT_THAT(ListByPages(query, 2), ElementsAre(12, 8, 4));
  query.metadata = J(R"({"tenant":"acme","missing":1})");
  EXPECT_THAT(List(query), IsEmpty());
}

TEST_F(SqliteListRunsTest, LimitZeroOrNegative_ListsNothing) {
  Insert({MakeRun(RunNo(1), "f", At(1))});
  for (int limit : {0, -1}) {
    EXPECT_THAT(List(RunQuery::OfFlow("", limit)), IsEmpty());
  }
}

TEST_F(SqliteListRunsTest, Fields_NoPayloadsLeavesInputOut_KeepsMetadata) {
  RunRecord run = MakeRun(RunNo(1), "f", At(1));
  run.metadata = J(R"({"a":1})");
  run.output = J("[1]");
  Insert({run});

  std::vector<RunRecord> bare = ValueOf(Begin(*backend_)->ListRuns(
      RunQuery::OfFlow("f", 5), Fields::kNoPayloads));
  std::vector<RunRecord> full = ValueOf(
      Begin(*backend_)->ListRuns(RunQuery::OfFlow("f", 5), Fields::kAll));

  ASSERT_EQ(bare.size(), 1u);
  EXPECT_TRUE(bare[0].input.is_null());
  EXPECT_EQ(bare[0].output, std::nullopt);
  EXPECT_EQ(bare[0].metadata, run.metadata);
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].input, run.input);
  EXPECT_EQ(full[0].output, run.output);
}

TEST_F(SqliteListRunsTest, UnreadableMetadata_MarksTheRunAndListsTheRest) {
  RunRecord bad = MakeRun(RunNo(1), "f", At(1));
  bad.metadata = J(R"({"a":1})");
  RunRecord good = MakeRun(RunNo(2), "f", At(2));
  good.metadata = J(R"({"a":1})");
  Insert({bad, good});
  RawDatabase(path()).Exec(
      StrCat("UPDATE runs SET metadata = '{oops', status = 'sideways' "
             "WHERE run_id = '",
             RunNo(1).ToString(), "'"));

  std::vector<RunRecord> all = ValueOf(
      Begin(*backend_)->ListRuns(RunQuery::OfFlow("f", 5), Fields::kAll));
  RunQuery matching = RunQuery::OfFlow("f", 5);
  matching.metadata = J(R"({"a":1})");

  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].unreadable.empty());
  EXPECT_THAT(all[1].unreadable, HasSubstr("run metadata"));
  EXPECT_THAT(all[1].unreadable, HasSubstr("sideways"));
  EXPECT_TRUE(all[1].metadata.is_null());
  EXPECT_THAT(List(matching), ElementsAre(2));
}

}  // namespace
}  // namespace sluice
