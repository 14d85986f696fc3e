// The Transaction contract, v4: ListRuns queries, their orders, bounds,
// filters and paging (see backend_contract_fixture.h).
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

class QueryContractTest : public BackendContractV4Test {
 protected:
  // The ids ListRuns returns for `query`.
  std::vector<RunId> List(const RunQuery& query) {
    return RunIdsOf(ValueOf(Begin()->ListRuns(query, Fields::kAll)));
  }

  // The ids of every page of `query`, each page resumed after the last run
  // of the one before (at most `max_pages`).
  std::vector<RunId> AllPages(RunQuery query, int max_pages) {
    std::vector<RunId> paged;
    for (int page = 0; page < max_pages; ++page) {
      std::vector<RunRecord> got =
          ValueOf(Begin()->ListRuns(query, Fields::kNoPayloads));
      if (got.empty()) break;
      for (const RunRecord& run : got) paged.push_back(run.run_id);
      const RunRecord& last = got.back();
      query.after = RunQuery::Position{
          query.order_by == RunQuery::OrderBy::kStartedAt ? last.started_at
                                                          : *last.finished_at,
          last.run_id};
    }
    return paged;
  }
};

// The ids of `keyed` in (time, id) order, or the reverse.
std::vector<RunId> IdsInOrder(std::vector<std::tuple<absl::Time, RunId>> keyed,
                              bool newest_first) {
  std::sort(keyed.begin(), keyed.end());
  if (newest_first) std::reverse(keyed.begin(), keyed.end());
  std::vector<RunId> ids;
  for (const auto& [time, id] : keyed) ids.push_back(id);
  return ids;
}
SLUICE_BACKEND_CONTRACT_SUITE(QueryContractTest);

// Run `n` of `flow` started at `started`.
RunRecord StartedAt(uint64_t n, absl::Time started,
                    std::string flow = "greet") {
  return MakeRun(n, std::move(flow), started);
}

// Run `n` started at `started`, ended with `status` at `finished`.
RunRecord EndedAt(uint64_t n, absl::Time started, absl::Time finished,
                  RunStatus status = RunStatus::kCompleted) {
  RunRecord run = Ended(n, status, finished);
  run.started_at = started;
  return run;
}

RunRecord WithMetadata(uint64_t n, std::string_view metadata) {
  RunRecord run = MakeRun(n);
  run.metadata = J(metadata);
  return run;
}

RunQuery Oldest(int limit = 50) {
  RunQuery query;
  query.newest_first = false;
  query.limit = limit;
  return query;
}

RunQuery Newest(int limit = 50) {
  RunQuery query;
  query.limit = limit;
  return query;
}

// --- Orders ------------------------------------------------------------------

TEST_P(QueryContractTest, ListRuns_SameStartTime_BreaksTiesByRunId) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(5), MakeRun(2)})));
  });
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable(
        {MakeRun(9), StartedAt(7, At(1)), MakeRun(1), StartedAt(3, At(-1))})));
  });
  EXPECT_THAT(List(Oldest()), ElementsAre(RunNo(3), RunNo(1), RunNo(2),
                                          RunNo(5), RunNo(9), RunNo(7)));
  EXPECT_THAT(List(Newest()), ElementsAre(RunNo(7), RunNo(9), RunNo(5),
                                          RunNo(2), RunNo(1), RunNo(3)));
  EXPECT_THAT(List(RunQuery::OfFlow("greet", 3)),
              ElementsAre(RunNo(7), RunNo(9), RunNo(5)));
  EXPECT_THAT(List(Oldest(2)), ElementsAre(RunNo(3), RunNo(1)));
}

TEST_P(QueryContractTest, ListRuns_ByFinishedAt_ListsOnlyEndedRuns) {
  Committed([](Transaction& tx) {
    ASSERT_OK(
        tx.InsertRuns(Movable({EndedAt(1, At(1), At(30)), StartedAt(2, At(2)),
                               EndedAt(3, At(3), At(10), RunStatus::kFailed),
                               EndedAt(4, At(4), At(30), RunStatus::kCancelled),
                               StartedAt(5, kT0)})));
  });
  RunQuery newest = Newest();
  newest.order_by = RunQuery::OrderBy::kFinishedAt;
  EXPECT_THAT(List(newest), ElementsAre(RunNo(4), RunNo(1), RunNo(3)));
  RunQuery oldest = Oldest();
  oldest.order_by = RunQuery::OrderBy::kFinishedAt;
  EXPECT_THAT(List(oldest), ElementsAre(RunNo(3), RunNo(1), RunNo(4)));
  // The bounds apply to finished_at.
  oldest.from = At(20);
  EXPECT_THAT(List(oldest), ElementsAre(RunNo(1), RunNo(4)));
}

// Retention's query: one flow and one outcome by finish time, which SQLite
// answers from an index of its own (decision 0073).
TEST_P(QueryContractTest,
       ListRuns_OneFlowAndStatusByFinishedAt_ListsThoseRuns) {
  auto of_flow = [](RunRecord run, std::string flow) {
    run.flow_slug = std::move(flow);
    return run;
  };
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable(
        {EndedAt(1, At(1), At(20), RunStatus::kFailed),
         EndedAt(2, At(2), At(40)),
         EndedAt(5, At(3), At(20), RunStatus::kFailed),
         of_flow(EndedAt(3, At(4), At(50), RunStatus::kFailed), "other"),
         EndedAt(4, At(5), At(10), RunStatus::kFailed), StartedAt(6, At(6))})));
  });
  RunQuery query = Newest();
  query.order_by = RunQuery::OrderBy::kFinishedAt;
  query.flow_slugs = {"greet"};
  query.statuses = {RunStatus::kFailed};
  EXPECT_THAT(List(query), ElementsAre(RunNo(5), RunNo(1), RunNo(4)));
  query.after = RunQuery::Position{At(20), RunNo(5)};
  EXPECT_THAT(List(query), ElementsAre(RunNo(1), RunNo(4)));
  query.after.reset();
  query.newest_first = false;
  query.limit = 2;
  EXPECT_THAT(List(query), ElementsAre(RunNo(4), RunNo(1)));
  query.statuses = {RunStatus::kCancelled};
  EXPECT_THAT(List(query), IsEmpty());
  // Several outcomes merge in finish order (the memory backend keeps an
  // index per outcome).
  query.statuses = {RunStatus::kCompleted, RunStatus::kFailed};
  query.limit = 50;
  EXPECT_THAT(List(query), ElementsAre(RunNo(4), RunNo(1), RunNo(5), RunNo(2)));
  query.flow_slugs.clear();
  query.newest_first = true;
  EXPECT_THAT(List(query),
              ElementsAre(RunNo(3), RunNo(2), RunNo(5), RunNo(1), RunNo(4)));
}

TEST_P(QueryContractTest, ListRuns_FromAndTo_BoundTheTimeHalfOpen) {
  Committed([](Transaction& tx) {
    for (int i = 1; i <= 9; ++i) {
      ASSERT_OK(tx.InsertRuns(Movable({StartedAt(i, At(i))})));
    }
  });
  RunQuery oldest = Oldest();
  oldest.from = At(3);
  oldest.to = At(6);
  EXPECT_THAT(List(oldest), ElementsAre(RunNo(3), RunNo(4), RunNo(5)));
  RunQuery newest = Newest();
  newest.from = At(3);
  newest.to = At(6);
  EXPECT_THAT(List(newest), ElementsAre(RunNo(5), RunNo(4), RunNo(3)));
  newest.after = RunQuery::Position{At(5), RunNo(5)};
  EXPECT_THAT(List(newest), ElementsAre(RunNo(4), RunNo(3)));
  oldest.after = RunQuery::Position{At(1), RunNo(1)};  // before `from`
  EXPECT_THAT(List(oldest), ElementsAre(RunNo(3), RunNo(4), RunNo(5)));
  oldest.from = At(7);  // after `to`
  EXPECT_THAT(List(oldest), IsEmpty());
}

// Many runs share each time; paging by the last run seen must give every
// run exactly once, in order, in every order and direction.
TEST_P(QueryContractTest, ListRuns_PagedAfterTheLastRun_HasNoGapsOrRepeats) {
  constexpr int kRuns = 60;
  std::vector<RunRecord> runs;
  for (int i = 0; i < kRuns; ++i) {
    // Ids out of insert order, times shared by a dozen runs each.
    const uint64_t n = static_cast<uint64_t>((i * 37) % kRuns + 1);
    runs.push_back(EndedAt(n, At(i % 5), At(100 + i % 4)));
  }
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(runs)); });
  for (RunQuery::OrderBy order_by :
       {RunQuery::OrderBy::kStartedAt, RunQuery::OrderBy::kFinishedAt}) {
    for (bool newest_first : {true, false}) {
      std::vector<std::tuple<absl::Time, RunId>> expected;
      for (const RunRecord& run : runs) {
        expected.emplace_back(order_by == RunQuery::OrderBy::kStartedAt
                                  ? run.started_at
                                  : *run.finished_at,
                              run.run_id);
      }
      RunQuery query;
      query.order_by = order_by;
      query.newest_first = newest_first;
      query.limit = 7;
      EXPECT_THAT(AllPages(query, kRuns),
                  ElementsAreArray(IdsInOrder(expected, newest_first)))
          << "order_by finished: "
          << (order_by == RunQuery::OrderBy::kFinishedAt)
          << ", newest first: " << newest_first;
    }
  }
}

// Start and finish order across flows and statuses, each filter shape: the
// runs of several flows and statuses merge into one order, ties broken by
// run id, and paging resumes exactly after the last run of each page.
TEST_P(QueryContractTest, ListRuns_AcrossFlowsAndStatuses_PagesInOrder) {
  constexpr int kRuns = 48;
  constexpr std::array<RunStatus, 4> kStatuses = {
      RunStatus::kStarted, RunStatus::kCompleted, RunStatus::kFailed,
      RunStatus::kCancelled};
  std::vector<RunRecord> runs;
  for (int i = 0; i < kRuns; ++i) {
    const uint64_t n = static_cast<uint64_t>((i * 29) % kRuns + 1);
    const RunStatus status = kStatuses[i % 4];
    RunRecord run = status == RunStatus::kStarted
                        ? StartedAt(n, At(i % 5))
                        : EndedAt(n, At(i % 5), At(100 + i % 3), status);
    run.flow_slug = std::string(1, static_cast<char>('a' + i % 3));
    runs.push_back(std::move(run));
  }
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Copied(runs))); });
  struct Filter {
    std::vector<std::string> flows;
    std::vector<RunStatus> statuses;
  };
  const std::vector<Filter> filters = {
      {{}, {}},
      {{}, {RunStatus::kFailed}},
      {{}, {RunStatus::kStarted, RunStatus::kCancelled}},
      {{"a", "c"}, {}},
      {{"c", "b"}, {RunStatus::kCompleted}},
      {{"b"}, {RunStatus::kCompleted, RunStatus::kFailed}},
      {{"b"}, {}}};
  for (RunQuery::OrderBy order_by :
       {RunQuery::OrderBy::kStartedAt, RunQuery::OrderBy::kFinishedAt}) {
    const bool by_finish = order_by == RunQuery::OrderBy::kFinishedAt;
    for (const Filter& filter : filters) {
      for (bool newest_first : {true, false}) {
        std::vector<std::tuple<absl::Time, RunId>> expected;
        for (const RunRecord& run : runs) {
          if ((filter.flows.empty() ||
               absl::c_linear_search(filter.flows, run.flow_slug)) &&
              (filter.statuses.empty() ||
               absl::c_linear_search(filter.statuses, run.status)) &&
              (!by_finish || run.finished_at.has_value())) {
            expected.emplace_back(by_finish ? *run.finished_at : run.started_at,
                                  run.run_id);
          }
        }
        RunQuery query = newest_first ? Newest(5) : Oldest(5);
        query.order_by = order_by;
        query.flow_slugs = filter.flows;
        query.statuses = filter.statuses;
        EXPECT_THAT(AllPages(query, kRuns),
                    ElementsAreArray(IdsInOrder(expected, newest_first)))
            << filter.flows.size() << " flows, " << filter.statuses.size()
            << " statuses, by finish: " << by_finish
            << ", newest first: " << newest_first;
      }
    }
  }
}

// --- Filters -----------------------------------------------------------------

TEST_P(QueryContractTest, ListRuns_Flows_ListsRunsOfAnyOfThem) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({StartedAt(1, At(1), "a"), StartedAt(2, At(2), "b"),
                 StartedAt(3, At(3), "c"), StartedAt(4, At(4), "a"),
                 StartedAt(5, At(5), "c")})));
  });
  RunQuery query = Newest();
  query.flow_slugs = {"c", "a", "none", "a"};
  EXPECT_THAT(List(query), ElementsAre(RunNo(5), RunNo(4), RunNo(3), RunNo(1)));
  query.newest_first = false;
  query.limit = 3;
  EXPECT_THAT(List(query), ElementsAre(RunNo(1), RunNo(3), RunNo(4)));
}

TEST_P(QueryContractTest, ListRuns_Statuses_ListsRunsInAnyOfThem) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable(
        {EndedAt(1, At(1), At(9), RunStatus::kFailed), StartedAt(2, At(2)),
         EndedAt(3, At(3), At(9), RunStatus::kCancelled),
         EndedAt(4, At(4), At(9), RunStatus::kCompleted)})));
  });
  RunQuery query = Oldest();
  query.statuses = {RunStatus::kCancelled, RunStatus::kFailed};
  EXPECT_THAT(List(query), ElementsAre(RunNo(1), RunNo(3)));
  query.statuses = {RunStatus::kStarted};
  EXPECT_THAT(List(query), ElementsAre(RunNo(2)));
}

TEST_P(QueryContractTest, ListRuns_Metadata_ListsRunsContainingIt) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable(
        {WithMetadata(1, R"({"tenant":"a","tier":"gold"})"),
         WithMetadata(2, R"({"tenant":"a"})"),
         WithMetadata(3, R"({"tenant":"b","tier":"gold"})"), MakeRun(4),
         WithMetadata(5, R"({"tenant":"a","tags":["x","y"],"n":1})")})));
  });
  RunQuery query = Oldest();
  query.metadata = J(R"({"tenant":"a"})");
  EXPECT_THAT(List(query), ElementsAre(RunNo(1), RunNo(2), RunNo(5)));
  query.metadata = J(R"({"tenant":"a","tier":"gold"})");  // every key
  EXPECT_THAT(List(query), ElementsAre(RunNo(1)));
  query.metadata = J(R"({"tier":"gold"})");
  EXPECT_THAT(List(query), ElementsAre(RunNo(1), RunNo(3)));
  query.metadata = J(R"({"tags":["y"],"n":1})");  // containment, as jsonb @>
  EXPECT_THAT(List(query), ElementsAre(RunNo(5)));
  query.metadata = J(R"({"tenant":"c"})");
  EXPECT_THAT(List(query), IsEmpty());
}

TEST_P(QueryContractTest, ListRuns_EveryFilterMustHold) {
  auto run = [](uint64_t n, std::string flow, int started,
                std::string_view metadata, RunStatus status) {
    RunRecord r = StartedAt(n, At(started), std::move(flow));
    r.metadata = J(metadata);
    if (status != RunStatus::kStarted) {
      r.status = status;
      r.finished_at = At(50);
    }
    return r;
  };
  const std::string_view a = R"({"tenant":"a"})";
  const std::string_view b = R"({"tenant":"b"})";
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({run(1, "f", 1, a, RunStatus::kFailed),
                 run(2, "g", 2, a, RunStatus::kFailed),   // other flow
                 run(3, "f", 3, b, RunStatus::kFailed),   // other tenant
                 run(4, "f", 4, a, RunStatus::kStarted),  // other status
                 run(5, "f", 5, a, RunStatus::kFailed),
                 run(6, "f", 9, a, RunStatus::kFailed)})));  // too late
  });
  RunQuery query = Newest();
  query.flow_slugs = {"f"};
  query.statuses = {RunStatus::kFailed};
  query.metadata = J(a);
  query.to = At(9);
  EXPECT_THAT(List(query), ElementsAre(RunNo(5), RunNo(1)));
  query.limit = 1;
  EXPECT_THAT(List(query), ElementsAre(RunNo(5)));
  query.after = RunQuery::Position{At(5), RunNo(5)};
  EXPECT_THAT(List(query), ElementsAre(RunNo(1)));
}

TEST_P(QueryContractTest, ListRuns_NoPayloads_KeepsEverythingButPayloads) {
  RunRecord run = Ended(1, RunStatus::kCompleted, At(3));
  run.metadata = J(R"({"tenant":"a"})");
  run.options = J(R"({"max_attempts":2})");
  run.external_key = "k";
  run.priority = 3;
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({run}))); });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(std::vector<RunRecord> all,
                       tx->ListRuns(Newest(), Fields::kAll));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(Describe(all[0]), Describe(run));
  ASSERT_OK_AND_ASSIGN(std::vector<RunRecord> light,
                       tx->ListRuns(Newest(), Fields::kNoPayloads));
  ASSERT_EQ(light.size(), 1u);
  run.input = nullptr;
  run.output = std::nullopt;
  EXPECT_EQ(Describe(light[0]), Describe(run));
  EXPECT_THAT(ValueOf(tx->ListRuns(Oldest(0), Fields::kAll)), IsEmpty());
}

}  // namespace
}  // namespace sluice::contract
