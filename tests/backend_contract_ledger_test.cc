// The Transaction contract, v4: the attempts ledger and the dedupe registry
// (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend_contract_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/backend.h"
#include "sluice/records.h"

namespace sluice::contract {
namespace {

// The fixture's overloads, next to this file's own.
using ::sluice::contract::Describe;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class LedgerContractTest : public BackendContractV4Test {
 protected:
  // Runs 1 and 2 of "greet", each with tasks (0,0), (0,1) and (1,0).
  void SeedTasks() {
    CreateQueue("greet");
    Committed([](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1), MakeRun(2)})));
      ASSERT_OK(tx.InsertTasks(Movable(
          {MakeTask(1, 0, 0, 1), MakeTask(1, 0, 1, 2), MakeTask(1, 1, 0, 3),
           MakeTask(2, 0, 0, 4), MakeTask(2, 0, 1, 5), MakeTask(2, 1, 0, 6)})));
    });
  }

  std::optional<DedupeRecord> GetDedupe(std::string_view flow,
                                        std::string_view key) {
    return ValueOf(Begin()->GetDedupe(flow, key));
  }
};
SLUICE_BACKEND_CONTRACT_SUITE(LedgerContractTest);

AttemptRecord Attempt(uint64_t run, int step, int task, int attempt,
                      AttemptOutcome outcome = AttemptOutcome::kCompleted) {
  return AttemptRecord{.task = {RunNo(run), step, task},
                       .attempt = attempt,
                       .worker_id = StrCat("w", attempt),
                       .started_at = At(attempt),
                       .finished_at = At(attempt + 1),
                       .outcome = outcome};
}

std::string Describe(const AttemptRecord& a) {
  return StrCat(a.task.run_id.ToString(), "/", a.task.step_index, "/",
                a.task.task_index, " #", a.attempt, " ", a.worker_id,
                " started=", Text(a.started_at),
                " finished=", absl::FormatTime(a.finished_at), " ",
                ToString(a.outcome), " err=", a.error);
}

std::vector<std::string> Describe(const std::vector<AttemptRecord>& ledger) {
  std::vector<std::string> out;
  for (const AttemptRecord& a : ledger) out.push_back(Describe(a));
  return out;
}

std::string Describe(const std::optional<DedupeRecord>& d) {
  if (!d.has_value()) return "<none>";
  return StrCat(d->flow_slug, "/", d->key, " -> ", d->run_id.ToString(),
                " expires=", Text(d->expires_at));
}

DedupeRecord Dedupe(std::string key, uint64_t run,
                    std::optional<absl::Time> expires_at = std::nullopt,
                    std::string flow = "greet") {
  return {.flow_slug = std::move(flow),
          .key = std::move(key),
          .run_id = RunNo(run),
          .expires_at = expires_at};
}

// --- Attempts ledger ---------------------------------------------------------

TEST_P(LedgerContractTest, ListAttempts_ReturnsEveryFieldByStepTaskAttempt) {
  SeedTasks();
  AttemptRecord released = Attempt(1, 0, 0, 1, AttemptOutcome::kReleased);
  released.started_at = std::nullopt;
  AttemptRecord failed = Attempt(1, 0, 0, 2, AttemptOutcome::kRetried);
  failed.error = "boom: it broke";
  const std::vector<AttemptRecord> ledger = {
      Attempt(1, 1, 0, 1, AttemptOutcome::kCancelled),
      Attempt(1, 0, 1, 1, AttemptOutcome::kStalled),
      Attempt(1, 0, 0, 3, AttemptOutcome::kFailed),
      failed,
      released,
      Attempt(2, 0, 0, 1)};
  Committed([&](Transaction& tx) { ASSERT_OK(tx.AppendAttempts(ledger)); });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(
      Describe(ValueOf(tx->ListAttempts(RunNo(1)))),
      ElementsAre(Describe(released), Describe(failed), Describe(ledger[2]),
                  Describe(ledger[1]), Describe(ledger[0])));
  EXPECT_THAT(Describe(ValueOf(tx->ListAttempts(RunNo(2)))),
              ElementsAre(Describe(ledger[5])));
  EXPECT_THAT(ValueOf(tx->ListAttempts(RunNo(7))), IsEmpty());
}

TEST_P(LedgerContractTest, AppendAttempts_KeepsAppendingAcrossTransactions) {
  SeedTasks();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AppendAttempts({{Attempt(1, 0, 0, 2)}}));
    ASSERT_OK(tx.AppendAttempts({}));
  });
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AppendAttempts({{Attempt(1, 0, 0, 1), Attempt(1, 0, 0, 3)}}));
  });
  ASSERT_OK_AND_ASSIGN(std::vector<AttemptRecord> ledger,
                       Begin()->ListAttempts(RunNo(1)));
  std::vector<int> numbers;
  for (const AttemptRecord& a : ledger) numbers.push_back(a.attempt);
  EXPECT_THAT(numbers, ElementsAre(1, 2, 3));
}

TEST_P(LedgerContractTest, AppendAttempts_UnknownRun_FailsAndAppendsNone) {
  SeedTasks();
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(FailureOf(*tx, tx->AppendAttempts(
                                 {{Attempt(1, 0, 0, 1), Attempt(9, 0, 0, 1)}})),
              absl::StatusCode::kNotFound);
  }
  EXPECT_THAT(ValueOf(Begin()->ListAttempts(RunNo(1))), IsEmpty());
}

TEST_P(LedgerContractTest, AppendAttempts_ExistingAttempt_FailsAndAppendsNone) {
  SeedTasks();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AppendAttempts({{Attempt(1, 0, 0, 1)}}));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(FailureOf(*tx, tx->AppendAttempts(
                                 {{Attempt(1, 0, 0, 2), Attempt(1, 0, 0, 1)}})),
              absl::StatusCode::kAlreadyExists);
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(FailureOf(*tx, tx->AppendAttempts(
                                 {{Attempt(1, 0, 1, 1), Attempt(1, 0, 1, 1)}})),
              absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(ValueOf(Begin()->ListAttempts(RunNo(1))).size(), 1u);
}

TEST_P(LedgerContractTest, DeleteRuns_DeletesTheLedgerWithTheRun) {
  SeedTasks();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.AppendAttempts(
        {{Attempt(1, 0, 0, 1), Attempt(1, 1, 0, 1), Attempt(2, 0, 0, 1)}}));
  });
  Committed([](Transaction& tx) {
    ASSERT_EQ(ValueOf(tx.DeleteRuns({{RunNo(1)}})), 1);
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->ListAttempts(RunNo(1))), IsEmpty());
  EXPECT_EQ(ValueOf(tx->ListAttempts(RunNo(2))).size(), 1u);
  // A new run with the same id starts with an empty ledger.
  ASSERT_OK(tx->InsertRuns(Movable({MakeRun(1)})));
  ASSERT_OK(tx->InsertTasks(Movable({MakeTask(1, 0, 0, 7)})));
  ASSERT_OK(tx->AppendAttempts({{Attempt(1, 0, 0, 1)}}));
  EXPECT_EQ(ValueOf(tx->ListAttempts(RunNo(1))).size(), 1u);
}

// --- Dedupe registry ---------------------------------------------------------

TEST_P(LedgerContractTest, PutDedupe_ThenGetDedupe_ReturnsTheEntry) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.PutDedupe(Dedupe("pending", 1)));
    ASSERT_OK(tx.PutDedupe(Dedupe("throttle", 2, At(30))));
    ASSERT_OK(tx.PutDedupe(Dedupe("pending", 3, std::nullopt, "other")));
  });
  EXPECT_EQ(Describe(GetDedupe("greet", "pending")),
            Describe(Dedupe("pending", 1)));
  EXPECT_EQ(Describe(GetDedupe("greet", "throttle")),
            Describe(Dedupe("throttle", 2, At(30))));
  EXPECT_EQ(Describe(GetDedupe("other", "pending")),
            Describe(Dedupe("pending", 3, std::nullopt, "other")));
  EXPECT_EQ(GetDedupe("greet", "none"), std::nullopt);
  EXPECT_EQ(GetDedupe("none", "pending"), std::nullopt);
}

TEST_P(LedgerContractTest, PutDedupe_ExistingEntry_OverwritesIt) {
  Committed(
      [](Transaction& tx) { ASSERT_OK(tx.PutDedupe(Dedupe("k", 1, At(30)))); });
  Committed([](Transaction& tx) { ASSERT_OK(tx.PutDedupe(Dedupe("k", 2))); });
  EXPECT_EQ(Describe(GetDedupe("greet", "k")), Describe(Dedupe("k", 2)));
  // No longer a throttle entry: the expiry sweep leaves it.
  EXPECT_EQ(ValueOf(Begin()->DeleteExpiredDedupe(At(100), 10)), 0);
}

TEST_P(LedgerContractTest, DeleteDedupe_DeletesOnlyWhileItNamesTheRun) {
  Committed([](Transaction& tx) { ASSERT_OK(tx.PutDedupe(Dedupe("k", 1))); });
  Committed([](Transaction& tx) {
    EXPECT_EQ(ValueOf(tx.DeleteDedupe("greet", "k", RunNo(2))), false);
    EXPECT_EQ(ValueOf(tx.DeleteDedupe("other", "k", RunNo(1))), false);
  });
  EXPECT_TRUE(GetDedupe("greet", "k").has_value());
  Committed([](Transaction& tx) {
    EXPECT_EQ(ValueOf(tx.DeleteDedupe("greet", "k", RunNo(1))), true);
    EXPECT_EQ(ValueOf(tx.DeleteDedupe("greet", "k", RunNo(1))), false);
  });
  EXPECT_EQ(GetDedupe("greet", "k"), std::nullopt);
}

TEST_P(LedgerContractTest, DeleteExpiredDedupe_TakesEndedWindowsEarliestFirst) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.PutDedupe(Dedupe("pending", 1)));
    ASSERT_OK(tx.PutDedupe(Dedupe("t20", 2, At(20))));
    ASSERT_OK(tx.PutDedupe(Dedupe("t5", 3, At(5))));
    ASSERT_OK(tx.PutDedupe(Dedupe("t10", 4, At(10), "other")));
    ASSERT_OK(tx.PutDedupe(Dedupe("t8", 5, At(8))));
  });
  Committed([](Transaction& tx) {
    EXPECT_EQ(ValueOf(tx.DeleteExpiredDedupe(At(10), 0)), 0);
    EXPECT_EQ(ValueOf(tx.DeleteExpiredDedupe(At(10), 2)), 2);
  });
  EXPECT_EQ(GetDedupe("greet", "t5"), std::nullopt);
  EXPECT_EQ(GetDedupe("greet", "t8"), std::nullopt);
  EXPECT_TRUE(GetDedupe("other", "t10").has_value());
  Committed([](Transaction& tx) {
    // A window that ends exactly now has ended.
    EXPECT_EQ(ValueOf(tx.DeleteExpiredDedupe(At(10), 10)), 1);
    EXPECT_EQ(ValueOf(tx.DeleteExpiredDedupe(At(10), 10)), 0);
  });
  EXPECT_EQ(GetDedupe("other", "t10"), std::nullopt);
  EXPECT_TRUE(GetDedupe("greet", "pending").has_value());
  EXPECT_TRUE(GetDedupe("greet", "t20").has_value());
}

TEST_P(LedgerContractTest, DeleteRuns_KeepsTheRunsDedupeEntries) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(tx.PutDedupe(Dedupe("k", 1)));
  });
  Committed([](Transaction& tx) {
    ASSERT_EQ(ValueOf(tx.DeleteRuns({{RunNo(1)}})), 1);
  });
  EXPECT_EQ(Describe(GetDedupe("greet", "k")), Describe(Dedupe("k", 1)));
}

}  // namespace
}  // namespace sluice::contract
