#include "backend_contract_fixture.h"

#include <stdlib.h>

#include <filesystem>
#include <functional>

#include "sluice/backends.h"

namespace sluice::contract {

void BackendContractTest::SetUp() {
  std::string url;
  if (GetParam() == "sqlite") {
    char dir[] = "/tmp/sluice-contract-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    temp_dir_ = dir;
    url = StrCat("sqlite:", temp_dir_, "/contract.db");
  } else if (GetParam() == "postgres") {
    if (testing::PostgresTestUrl().empty()) {
      GTEST_SKIP() << testing::kPostgresSkipMessage;
    }
    absl::StatusOr<std::unique_ptr<testing::TestDatabase>> database =
        testing::TestDatabase::Create();
    ASSERT_TRUE(database.ok()) << database.status();
    postgres_database_ = std::move(*database);
    url = postgres_database_->url();
  } else {
    url = StrCat(GetParam(), ":");
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenBackend(url);
  if (backend.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << url << ": " << backend.status();
  }
  ASSERT_TRUE(backend.ok()) << backend.status();
  backend_ = std::move(*backend);
}

void BackendContractTest::TearDown() {
  backend_.reset();
  postgres_database_.reset();
  if (!temp_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
  }
}

void BackendContractV4Test::SetUp() {
  BackendContractTest::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  // One call of each v4 operation, each in a transaction that is dropped;
  // a missing or failing result is fine, kUnimplemented is not.
  const std::vector<std::string> no_keys;
  const std::vector<
      std::pair<std::string_view, std::function<absl::Status(Transaction&)>>>
      probes = {
          {"ListRuns(oldest first)",
           [](Transaction& tx) {
             RunQuery query;
             query.newest_first = false;
             return tx.ListRuns(query, Fields::kAll).status();
           }},
          {"FindRunsByKey",
           [&](Transaction& tx) {
             return tx.FindRunsByKey("f", no_keys, Fields::kAll).status();
           }},
          {"CountTasks",
           [](Transaction& tx) {
             return tx.CountTasks("q", kT0, TaskCounts::kAll).status();
           }},
          {"AppendAttempts",
           [](Transaction& tx) { return tx.AppendAttempts({}); }},
          {"ListAttempts",
           [](Transaction& tx) { return tx.ListAttempts(RunNo(1)).status(); }},
          {"GetDedupe",
           [](Transaction& tx) { return tx.GetDedupe("f", "k").status(); }},
          {"PutDedupe",
           [](Transaction& tx) {
             return tx.PutDedupe({.flow_slug = "f", .key = "k"});
           }},
          {"DeleteDedupe",
           [](Transaction& tx) {
             return tx.DeleteDedupe("f", "k", RunNo(1)).status();
           }},
          {"DeleteExpiredDedupe",
           [](Transaction& tx) {
             return tx.DeleteExpiredDedupe(kT0, 1).status();
           }},
          {"ListQueues",
           [](Transaction& tx) { return tx.ListQueues().status(); }},
          {"SetQueuePaused",
           [](Transaction& tx) { return tx.SetQueuePaused("q", true); }},
          {"NextVisibleAt",
           [](Transaction& tx) { return tx.NextVisibleAt("q", kT0).status(); }},
      };
  for (const auto& [name, probe] : probes) {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    const absl::Status status = probe(*tx);
    if (status.code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << GetParam() << " does not implement " << name
                   << " yet: " << status;
    }
  }
}

void BackendContractV5Test::SetUp() {
  BackendContractTest::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  // As the v4 probes: each v5 call once, in a transaction that is dropped.
  const std::vector<
      std::pair<std::string_view, std::function<absl::Status(Transaction&)>>>
      probes = {
          {"DeleteFlow",
           [](Transaction& tx) { return tx.DeleteFlow("f").status(); }},
          {"UpdateFlow",
           [](Transaction& tx) {
             return tx.UpdateFlow({.slug = "f", .definition = Json()});
           }},
          {"CountRuns",
           [](Transaction& tx) { return tx.CountRuns("f").status(); }},
          {"LockAlias", [](Transaction& tx) { return tx.LockAlias("a"); }},
          {"GetAlias",
           [](Transaction& tx) { return tx.GetAlias("a").status(); }},
          {"PutAlias",
           [](Transaction& tx) {
             return tx.PutAlias({.alias = "a", .active_slug = "f"});
           }},
          {"ListAliases",
           [](Transaction& tx) { return tx.ListAliases().status(); }},
          {"DeleteQueue",
           [](Transaction& tx) { return tx.DeleteQueue("q").status(); }},
      };
  for (const auto& [name, probe] : probes) {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    const absl::Status status = probe(*tx);
    if (status.code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << GetParam() << " does not implement " << name
                   << " yet: " << status;
    }
  }
}

std::string BackendName(const ::testing::TestParamInfo<std::string>& info) {
  if (info.param == "memory") return "Memory";
  if (info.param == "sqlite") return "Sqlite";
  return "Postgres";
}

SLUICE_BACKEND_CONTRACT_SUITE(BackendContractTest);

}  // namespace sluice::contract
