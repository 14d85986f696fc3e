// The Transaction contract, v4: claim order (priority, then FIFO by
// sequence), moves to the tail, paused queues, the next visible time and
// task counts per queue (see backend_contract_fixture.h).
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

class ClaimContractTest : public BackendContractV4Test {
 protected:
  void SeedCountedTasks();
};
SLUICE_BACKEND_CONTRACT_SUITE(ClaimContractTest);

OutgoingMessage WithPriority(int n, int priority, absl::Time visible_at = kT0) {
  OutgoingMessage message = Message(n, visible_at);
  message.priority = priority;
  return message;
}

VisibilityUpdate Retry(int64_t id, absl::Time visible_at) {
  return {.message_id = id, .visible_at = visible_at, .to_tail = true};
}

VisibilityUpdate Release(int64_t id, absl::Time visible_at) {
  return {.message_id = id, .visible_at = visible_at};
}

// Reads everything visible at `now` in `tx`, hiding it until At(1000).
std::vector<int64_t> ReadAll(Transaction& tx, absl::Time now,
                             std::string_view queue = "greet") {
  return IdsOf(
      ValueOf(tx.ReadMessages(queue, now, 1000, At(1000), Fields::kAll)));
}

std::string Describe(const QueueCounts& c) {
  return StrCat(
      "waiting=", c.waiting, " delayed=", c.delayed, " active=", c.active,
      " completed=", c.completed, " failed=", c.failed,
      " cancelled=", c.cancelled, " skipped=", c.skipped, " parked=", c.parked,
      " oldest_waiting_since=",
      c.oldest_waiting_since ? absl::FormatTime(*c.oldest_waiting_since)
                             : std::string("none"));
}

// --- Claim order -------------------------------------------------------------

TEST_P(ClaimContractTest, ReadMessages_TakesHigherPriorityFirstThenSendOrder) {
  CreateQueue("greet");
  const std::vector<int64_t> a =
      Send({WithPriority(1, 0), WithPriority(2, 5), WithPriority(3, -3),
            WithPriority(4, 5), WithPriority(5, 0)});
  const std::vector<int64_t> b =
      Send({WithPriority(6, 9), WithPriority(7, 0)}, At(1));
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> first,
      tx->ReadMessages("greet", At(2), 3, At(30), Fields::kAll));
  EXPECT_THAT(IdsOf(first), ElementsAre(b[0], a[1], a[3]));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].priority, 9);
  EXPECT_EQ(first[1].priority, 5);
  EXPECT_THAT(ReadAll(*tx, At(2)), ElementsAre(a[0], a[4], b[1], a[2]));
  EXPECT_EQ(Lookup(*tx, a[2])->message.priority, -3);
}

TEST_P(ClaimContractTest, ReadMessages_OrdersOnlyTheVisibleMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({WithPriority(1, 9, At(10)), WithPriority(2, 0),
            WithPriority(3, 1, At(5)), WithPriority(4, 0, At(5))});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ReadAll(*tx, At(4)), ElementsAre(ids[1]));
  EXPECT_THAT(ReadAll(*tx, At(9)), ElementsAre(ids[2], ids[3]));
  EXPECT_THAT(ReadAll(*tx, At(10)), ElementsAre(ids[0]));
}

TEST_P(ClaimContractTest, SetVisibility_ToTail_GoesBehindItsPriorityOnly) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({WithPriority(1, 0), WithPriority(2, 0), WithPriority(3, 0),
            WithPriority(4, 1)});
  Committed([&](Transaction& tx) {
    EXPECT_THAT(IdsOf(ValueOf(
                    tx.ReadMessages("greet", At(1), 2, At(30), Fields::kAll))),
                ElementsAre(ids[3], ids[0]));
    // Both fail and retry at once: each goes behind its own priority.
    ASSERT_OK(tx.SetVisibility("greet",
                               {{Retry(ids[3], At(1)), Retry(ids[0], At(1))}}));
  });
  const std::vector<int64_t> later = Send({WithPriority(5, 0)}, At(1));
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ReadAll(*tx, At(1)),
              ElementsAre(ids[3], ids[1], ids[2], ids[0], later[0]));
}

TEST_P(ClaimContractTest, SetVisibility_WithoutToTail_KeepsTheMessagesPlace) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  Committed([&](Transaction& tx) {
    EXPECT_THAT(IdsOf(ValueOf(
                    tx.ReadMessages("greet", At(1), 2, At(30), Fields::kAll))),
                ElementsAre(ids[0], ids[1]));
    // A release gives the first back at once; the second comes back later.
    ASSERT_OK(tx.SetVisibility(
        "greet", {{Release(ids[0], At(1)), Release(ids[1], At(5))}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ReadAll(*tx, At(1)), ElementsAre(ids[0], ids[2]));
  EXPECT_THAT(ReadAll(*tx, At(5)), ElementsAre(ids[1]));
}

TEST_P(ClaimContractTest, SetVisibility_ToTailTwice_KeepsTheLaterMoveLast) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SetVisibility("greet", {{Retry(ids[1], kT0)}}));
  });
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.SetVisibility("greet", {{Retry(ids[0], kT0)}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ReadAll(*tx, At(1)), ElementsAre(ids[2], ids[1], ids[0]));
}

// --- Paused queues -----------------------------------------------------------

TEST_P(ClaimContractTest, ReadMessages_PausedQueue_ReadsNothingUntilResumed) {
  CreateQueue("greet");
  CreateQueue("other");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  const std::vector<int64_t> other = Send({Message(3)}, kT0, "other");
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK_OR_SKIP(tx->SetQueuePaused("greet", true));
    ASSERT_OK(tx->Commit());
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_TRUE(ValueOf(tx->GetQueue("greet"))->paused);
    EXPECT_FALSE(ValueOf(tx->GetQueue("other"))->paused);
    EXPECT_THAT(ReadAll(*tx, At(1)), IsEmpty());
    EXPECT_EQ(Lookup(*tx, ids[0])->message.read_count, 0);
    EXPECT_THAT(ReadAll(*tx, At(1), "other"), ElementsAre(other[0]));
    ASSERT_OK(tx->SetQueuePaused("greet", false));
    ASSERT_OK(tx->Commit());
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_FALSE(ValueOf(tx->GetQueue("greet"))->paused);
  EXPECT_THAT(ReadAll(*tx, At(1)), ElementsAre(ids[0], ids[1]));
}

TEST_P(ClaimContractTest, SetQueuePaused_UnknownQueue_FailsWithNotFound) {
  EXPECT_EQ(FailureOfWrite([](Transaction& tx) {
              return tx.SetQueuePaused("nope", true);
            }),
            absl::StatusCode::kNotFound);
}

TEST_P(ClaimContractTest, ListQueues_ReturnsEveryQueueByName) {
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->ListQueues()), IsEmpty());
  ASSERT_OK(tx->CreateQueue({.name = "b", .created_at = At(1)}));
  ASSERT_OK(
      tx->CreateQueue({.name = "a", .owner_flow = "f", .created_at = At(2)}));
  ASSERT_OK(tx->CreateQueue({.name = "c", .created_at = At(3)}));
  ASSERT_OK(tx->SetQueuePaused("c", true));
  ASSERT_OK(tx->Commit());
  ASSERT_OK_AND_ASSIGN(std::vector<QueueRecord> queues, Begin()->ListQueues());
  ASSERT_EQ(queues.size(), 3u);
  EXPECT_EQ(queues[0].name, "a");
  EXPECT_EQ(queues[0].owner_flow, "f");
  EXPECT_EQ(queues[0].created_at, At(2));
  EXPECT_FALSE(queues[0].paused);
  EXPECT_EQ(queues[1].name, "b");
  EXPECT_FALSE(queues[1].paused);
  EXPECT_EQ(queues[2].name, "c");
  EXPECT_TRUE(queues[2].paused);
}

// --- The next visible time ---------------------------------------------------

TEST_P(ClaimContractTest, NextVisibleAt_IsTheEarliestVisibleAtAfterNow) {
  CreateQueue("greet");
  EXPECT_EQ(ValueOf(Begin()->NextVisibleAt("greet", kT0)), std::nullopt);
  const std::vector<int64_t> ids =
      Send({Message(1, At(10)), Message(2, At(5)), Message(3)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("greet", kT0)), At(5));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("greet", At(5))), At(10));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("greet", At(10))), std::nullopt);
  // A read hides what it takes until its visible_until.
  EXPECT_THAT(
      IdsOf(ValueOf(tx->ReadMessages("greet", kT0, 1, At(7), Fields::kAll))),
      ElementsAre(ids[2]));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("greet", At(6))), At(7));
  // Archived messages are not live; a paused queue still answers.
  ASSERT_OK(tx->ArchiveMessages("greet", {{ids[1], ids[2]}}, At(1)));
  ASSERT_OK(tx->SetQueuePaused("greet", true));
  EXPECT_EQ(ValueOf(tx->NextVisibleAt("greet", kT0)), At(10));
}

TEST_P(ClaimContractTest, NextVisibleAt_UnknownQueue_FailsWithNotFound) {
  EXPECT_EQ(CodeOf(Begin()->NextVisibleAt("nope", kT0)),
            absl::StatusCode::kNotFound);
}

// --- Task counts -------------------------------------------------------------

// Queue "greet": tasks queued visible at 2 and at 10, one started (its
// message hidden until 30), and one of each ended status (their messages
// still live). Queue "other": one task queued at kT0. Queue "empty".
void ClaimContractTest::SeedCountedTasks() {
  SeedRun();
  CreateQueue("other");
  CreateQueue("empty");
  const std::vector<int64_t> ids =
      Send({Message(0, At(2)), Message(1, At(10)), Message(2, At(30)),
            Message(3), Message(4), Message(5), Message(6)});
  const std::vector<int64_t> other = Send({Message(7)}, kT0, "other");
  auto ended = [&](int index, TaskStatus status) {
    TaskRecord task = MakeTask(1, 0, index, ids[index]);
    task.status = status;
    task.finished_at = At(1);
    return task;
  };
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertTasks(Movable(
        {MakeTask(1, 0, 0, ids[0]), MakeTask(1, 0, 1, ids[1]),
         Started(MakeTask(1, 0, 2, ids[2]), kT0, At(30)),
         ended(3, TaskStatus::kCompleted), ended(4, TaskStatus::kFailed),
         ended(5, TaskStatus::kCancelled), ended(6, TaskStatus::kSkipped),
         MakeTask(1, 1, 0, other[0], "other")})));
  });
}

TEST_P(ClaimContractTest, CountTasks_CountsTheQueuesTasksByStateAtNow) {
  SeedCountedTasks();
  std::unique_ptr<Transaction> tx = Begin();
  auto count = [&](std::string_view queue, absl::Time now) {
    return Describe(ValueOf(tx->CountTasks(queue, now, TaskCounts::kAll)));
  };
  // At 1 only the ended tasks' and the started task's messages are visible.
  EXPECT_EQ(count("greet", At(1)), Describe({.delayed = 2,
                                             .active = 1,
                                             .completed = 1,
                                             .failed = 1,
                                             .cancelled = 1,
                                             .skipped = 1}));
  EXPECT_EQ(count("greet", At(3)), Describe({.waiting = 1,
                                             .delayed = 1,
                                             .active = 1,
                                             .completed = 1,
                                             .failed = 1,
                                             .cancelled = 1,
                                             .skipped = 1,
                                             .oldest_waiting_since = At(2)}));
  // The oldest waiting task is the one visible first, not the last to wait.
  EXPECT_EQ(count("greet", At(10)), Describe({.waiting = 2,
                                              .active = 1,
                                              .completed = 1,
                                              .failed = 1,
                                              .cancelled = 1,
                                              .skipped = 1,
                                              .oldest_waiting_since = At(2)}));
  EXPECT_EQ(count("other", At(1)),
            Describe({.waiting = 1, .oldest_waiting_since = kT0}));
  EXPECT_EQ(count("empty", At(1)), Describe(QueueCounts{}));
}

TEST_P(ClaimContractTest, CountTasks_InFlight_CountsOnlyQueuedAndStarted) {
  SeedCountedTasks();
  std::unique_ptr<Transaction> tx = Begin();
  auto count = [&](std::string_view queue, absl::Time now) {
    return Describe(ValueOf(tx->CountTasks(queue, now, TaskCounts::kInFlight)));
  };
  EXPECT_EQ(count("greet", At(1)), Describe({.delayed = 2, .active = 1}));
  EXPECT_EQ(count("greet", At(3)), Describe({.waiting = 1,
                                             .delayed = 1,
                                             .active = 1,
                                             .oldest_waiting_since = At(2)}));
  EXPECT_EQ(
      count("greet", At(10)),
      Describe({.waiting = 2, .active = 1, .oldest_waiting_since = At(2)}));
  EXPECT_EQ(count("other", At(1)),
            Describe({.waiting = 1, .oldest_waiting_since = kT0}));
  EXPECT_EQ(count("empty", At(1)), Describe(QueueCounts{}));
  EXPECT_EQ(count("no_such_queue", At(1)), Describe(QueueCounts{}));
}

}  // namespace
}  // namespace sluice::contract
