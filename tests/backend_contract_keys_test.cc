// The Transaction contract, v4: the job fields of runs and tasks, and
// external keys (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "boost/json/monotonic_resource.hpp"
#include "boost/json/parse.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::Eq;

class KeyContractTest : public BackendContractV4Test {};
SLUICE_BACKEND_CONTRACT_SUITE(KeyContractTest);

// Run `n` of `flow` with external key `key` and the other job fields set.
RunRecord KeyedRun(uint64_t n, std::string key, std::string flow = "greet") {
  RunRecord run = MakeRun(n, std::move(flow));
  run.priority = 7;
  run.external_key = std::move(key);
  run.metadata = J(R"({"tenant":"a","n":1})");
  run.options = J(R"({"max_attempts":3,"keep":{"completed":{"count":2}}})");
  return run;
}

std::vector<std::optional<RunId>> FoundIds(
    const std::vector<std::optional<RunRecord>>& runs) {
  std::vector<std::optional<RunId>> ids;
  for (const std::optional<RunRecord>& run : runs) {
    ids.push_back(run.has_value() ? std::optional(run->run_id) : std::nullopt);
  }
  return ids;
}

// --- Run and task fields -----------------------------------------------------

TEST_P(KeyContractTest, InsertRuns_JobFields_AreStoredAndReturned) {
  RunRecord run = KeyedRun(1, "order-1");
  run.cancel_requested = true;
  RunRecord plain = MakeRun(2);
  plain.priority = -4;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({run, plain})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(run));
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(2)))), Describe(plain));
  // Metadata and options are not payloads.
  RunRecord without_payloads = run;
  without_payloads.input = nullptr;
  EXPECT_EQ(Describe(*ValueOf(
                GetRun(*tx, RunNo(1), LockMode::kNone, Fields::kNoPayloads))),
            Describe(without_payloads));
}

TEST_P(KeyContractTest, UpdateRuns_WritesCancelRequestedButNotCreationFields) {
  const RunRecord run = KeyedRun(1, "order-1");
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertRuns(Movable({run}))); });
  RunRecord update = KeyedRun(1, "changed");
  update.priority = 1;
  update.metadata = J(R"({"tenant":"b"})");
  update.options = nullptr;
  update.cancel_requested = true;
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.UpdateRuns(Movable({update}))); });
  RunRecord expected = run;
  expected.cancel_requested = true;
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*ValueOf(GetRun(*tx, RunNo(1)))), Describe(expected));
  EXPECT_THAT(FoundIds(ValueOf(tx->FindRunsByKey(
                  "greet", {{"order-1", "changed"}}, Fields::kAll))),
              ElementsAre(Eq(RunNo(1)), Eq(std::nullopt)));
}

TEST_P(KeyContractTest, UpdateTasks_WritesBudgetAndCancelButNotOptions) {
  SeedRun();
  TaskRecord queued = MakeTask(1, 0, 0, 1);
  queued.options = J(R"({"timeout_ms":5000})");
  Committed(
      [&](Transaction& tx) { ASSERT_OK(tx.InsertTasks(Movable({queued}))); });
  TaskRecord started = Started(queued, At(1), At(60));
  started.budget_start = 1;
  started.cancel_requested = true;
  started.options = J(R"({"timeout_ms":1})");
  Committed([&](Transaction& tx) {
    EXPECT_THAT(ValueOf(tx.UpdateTasks(Movable({UpdateOf(queued, started)}))),
                ElementsAre(true));
  });
  TaskRecord expected = started;
  expected.options = queued.options;
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(*GetTask(*tx, queued.key)), Describe(expected));
  ASSERT_OK_AND_ASSIGN(std::vector<std::optional<TaskRecord>> light,
                       tx->GetTasks({{queued.key}}, Fields::kNoPayloads));
  expected.input = nullptr;
  EXPECT_EQ(Describe(*light[0]), Describe(expected));
}

// Every JSON value a write takes lives in a memory resource that is
// destroyed and scribbled over after the commit.
TEST_P(KeyContractTest, Writes_JobFieldsInAShortLivedResource_AreKept) {
  CreateQueue("greet");
  const std::string big(100, 'x');  // longer than any small-string buffer
  auto text = [&](std::string_view name) {
    return StrCat(R"({")", name, R"(":")", big, R"("})");
  };
  std::vector<unsigned char> buffer(1 << 16);
  {
    boost::json::monotonic_resource arena(buffer.data(), buffer.size());
    auto in_arena = [&](std::string_view name) {
      return boost::json::parse(text(name), boost::json::storage_ptr(&arena));
    };
    RunRecord run = MakeRun(1);
    run.metadata = in_arena("meta");
    run.options = in_arena("run_options");
    TaskRecord task = MakeTask(1, 0, 0, 1);
    task.options = in_arena("task_options");
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(std::span(&run, 1)));
      ASSERT_OK(tx.InsertTasks(std::span(&task, 1)));
    });
  }
  std::fill(buffer.begin(), buffer.end(), 0xA5);
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<RunRecord> run = ValueOf(GetRun(*tx, RunNo(1)));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(SerializeJson(run->metadata), text("meta"));
  EXPECT_EQ(SerializeJson(run->options), text("run_options"));
  EXPECT_EQ(SerializeJson(GetTask(*tx, {RunNo(1), 0, 0})->options),
            text("task_options"));
}

// --- External keys -----------------------------------------------------------

TEST_P(KeyContractTest, InsertRuns_ExistingExternalKey_FailsAndAddsNone) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({KeyedRun(1, "k")})));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(
        FailureOf(
            *tx, tx->InsertRuns(Movable({KeyedRun(2, "j"), KeyedRun(3, "k")}))),
        absl::StatusCode::kAlreadyExists);
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(2))), std::nullopt);
  EXPECT_EQ(ValueOf(GetRun(*tx, RunNo(3))), std::nullopt);
  EXPECT_THAT(
      FoundIds(ValueOf(tx->FindRunsByKey("greet", {{"j", "k"}}, Fields::kAll))),
      ElementsAre(Eq(std::nullopt), Eq(RunNo(1))));
}

TEST_P(KeyContractTest, InsertRuns_SameKeyTwiceInOneBatch_FailsAndAddsNone) {
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(
        FailureOf(
            *tx, tx->InsertRuns(Movable({KeyedRun(1, "k"), KeyedRun(2, "k")}))),
        absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(ValueOf(GetRun(*Begin(), RunNo(1))), std::nullopt);
}

TEST_P(KeyContractTest, InsertRuns_KeysAreUniquePerFlowAndOnlyWhenSet) {
  Committed([](Transaction& tx) {
    // The same key in another flow, and runs without a key, are distinct.
    ASSERT_OK(tx.InsertRuns(Movable({KeyedRun(1, "k"), KeyedRun(2, "k", "b"),
                                     KeyedRun(3, ""), KeyedRun(4, "")})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(FoundIds(ValueOf(tx->FindRunsByKey("b", {{"k"}}, Fields::kAll))),
              ElementsAre(Eq(RunNo(2))));
  EXPECT_THAT(
      FoundIds(ValueOf(tx->FindRunsByKey("greet", {{""}}, Fields::kAll))),
      ElementsAre(Eq(std::nullopt)));
}

TEST_P(KeyContractTest, FindRunsByKey_ReturnsOneEntryPerKeyInOrder) {
  RunRecord a = KeyedRun(1, "a");
  a.output = J(R"({"big":"payload"})");
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(
        Movable({a, KeyedRun(2, "b"), KeyedRun(3, "zz", "other")})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::optional<RunRecord>> found,
      tx->FindRunsByKey("greet", {{"b", "zz", "a", "b"}}, Fields::kAll));
  EXPECT_THAT(FoundIds(found), ElementsAre(Eq(RunNo(2)), Eq(std::nullopt),
                                           Eq(RunNo(1)), Eq(RunNo(2))));
  EXPECT_EQ(Describe(*found[2]), Describe(a));
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::optional<RunRecord>> light,
      tx->FindRunsByKey("greet", {{"a"}}, Fields::kNoPayloads));
  RunRecord expected = a;
  expected.input = nullptr;
  expected.output = std::nullopt;
  EXPECT_EQ(Describe(*light[0]), Describe(expected));
  EXPECT_THAT(ValueOf(tx->FindRunsByKey("greet", {}, Fields::kAll)),
              ::testing::IsEmpty());
}

TEST_P(KeyContractTest, DeleteRuns_FreesTheExternalKey) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({KeyedRun(1, "k")})));
  });
  Committed([](Transaction& tx) {
    ASSERT_EQ(ValueOf(tx.DeleteRuns({{RunNo(1)}})), 1);
    EXPECT_THAT(
        FoundIds(ValueOf(tx.FindRunsByKey("greet", {{"k"}}, Fields::kAll))),
        ElementsAre(Eq(std::nullopt)));
    ASSERT_OK(tx.InsertRuns(Movable({KeyedRun(2, "k")})));
  });
  EXPECT_THAT(
      FoundIds(ValueOf(Begin()->FindRunsByKey("greet", {{"k"}}, Fields::kAll))),
      ElementsAre(Eq(RunNo(2))));
}

}  // namespace
}  // namespace sluice::contract
