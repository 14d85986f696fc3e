// The Transaction contract: queues, workers, limits and payloads handed over
// (see backend_contract_fixture.h).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- Queues -----------------------------------------------------------------

TEST_P(BackendContractTest, QueueOperations_UnknownQueue_FailWithNotFound) {
  EXPECT_EQ(CodeOf(Begin()->SendMessages("nope", Movable({Message(1)}), kT0)),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->ReadMessages("nope", kT0, 1, At(30), Fields::kAll)),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.SetVisibility("nope", {{{.message_id = 1}}});
                      }),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.ArchiveMessages("nope", {{1}}, kT0);
                      }),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteCode(Begin(),
                      [](Transaction& tx) {
                        return tx.DeleteMessages("nope", {{1}});
                      }),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(Begin()->LookupMessage("nope", 1)),
            absl::StatusCode::kNotFound);
}

TEST_P(BackendContractTest, SendMessages_AssignsIncreasingIdsAndStoresThem) {
  CreateQueue("greet");
  const std::vector<int64_t> first =
      Send({Message(1), Message(2, At(60))}, At(5));
  const std::vector<int64_t> second = Send({Message(3)}, At(6));
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_LT(first[0], first[1]);
  EXPECT_LT(first[1], second[0]);
  std::optional<MessageLocation> found = Lookup(*Begin(), first[1]);
  ASSERT_TRUE(found.has_value());
  EXPECT_FALSE(found->archived);
  EXPECT_EQ(Describe(found->message), Describe({.message_id = first[1],
                                                .read_count = 0,
                                                .enqueued_at = At(5),
                                                .visible_at = At(60),
                                                .body = J(R"({"n":2})")}));
}

TEST_P(BackendContractTest, SendMessages_KeepsScalarBodiesExactly) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({{.body = J("null"), .visible_at = kT0},
            {.body = J("false"), .visible_at = kT0}});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[0])->message.body), "null");
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[1])->message.body), "false");
}

// A task's message body given as parts is stored and read back as the JSON
// object every pgmq client sees; other messages on the queue are unchanged.
TEST_P(BackendContractTest, SendMessages_TaskBodies_ReadBackAsTheirObject) {
  CreateQueue("greet");
  const TaskMessageBody task{.flow_slug = "orders",
                             .run_id = RunId(1, 2),
                             .step_slug = R"(say "hi" \ é)",
                             .task_index = 7};
  const std::vector<int64_t> ids =
      Send({{.visible_at = kT0, .task = task}, Message(2)});
  const Json expected = J(
      R"({"flow_slug":"orders","run_id":"00000000-0000-0001-0000-000000000002",)"
      R"("step_slug":"say \"hi\" \\ é","task_index":7})");
  ASSERT_EQ(task.ToJson(), expected);
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Lookup(*tx, ids[0])->message.body, expected);
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", kT0, 10, At(30), Fields::kAll));
  ASSERT_THAT(IdsOf(read), ElementsAre(ids[0], ids[1]));
  EXPECT_EQ(read[0].body, expected);
  EXPECT_EQ(read[1].body, J(R"({"n":2})"));
}

TEST_P(BackendContractTest, ReadMessages_TakesVisibleMessagesInIdOrder) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1, At(10)), Message(2, At(0)),
                                         Message(3, At(5)), Message(4, At(6))});
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", At(5), 10, At(100), Fields::kAll));
  // Visible means visible_at <= now: the third becomes visible exactly at 5.
  EXPECT_THAT(IdsOf(read), ElementsAre(ids[1], ids[2]));
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(Describe(read[0]), Describe({.message_id = ids[1],
                                         .read_count = 1,
                                         .enqueued_at = kT0,
                                         .visible_at = At(100),
                                         .body = J(R"({"n":2})")}));
}

TEST_P(BackendContractTest, ReadMessages_SkipsInvisibleMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1, At(10)), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(9), 10, At(100), Fields::kAll))),
              ElementsAre(ids[1]));
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(10), 10, At(100),
                                             Fields::kAll))),
              ElementsAre(ids[0]));
}

TEST_P(BackendContractTest, ReadMessages_HidesMessagesUntilVisibleUntil) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  Committed([&](Transaction& tx) {
    EXPECT_THAT(IdsOf(ValueOf(
                    tx.ReadMessages("greet", At(1), 1, At(30), Fields::kAll))),
                ElementsAre(ids[0]));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(29), 10, At(40), Fields::kAll))),
              ElementsAre(ids[1]));
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> again,
      tx->ReadMessages("greet", At(30), 10, At(60), Fields::kAll));
  ASSERT_THAT(IdsOf(again), ElementsAre(ids[0]));
  EXPECT_EQ(again[0].read_count, 2);
  EXPECT_EQ(again[0].visible_at, At(60));
}

TEST_P(BackendContractTest, ReadMessages_TakesAtMostTheLimit) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(ValueOf(tx->ReadMessages("greet", kT0, 0, At(30), Fields::kAll)),
              IsEmpty());
  EXPECT_THAT(
      IdsOf(ValueOf(tx->ReadMessages("greet", kT0, 2, At(30), Fields::kAll))),
      ElementsAre(ids[0], ids[1]));
  EXPECT_THAT(
      IdsOf(ValueOf(tx->ReadMessages("greet", kT0, 2, At(30), Fields::kAll))),
      ElementsAre(ids[2]));
}

TEST_P(BackendContractTest,
       ReadMessages_EarlierNowThanTheLastRead_StillHidesLaterMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({Message(1, At(50)), Message(2, At(80)), Message(3, At(200))});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(100), 1, At(300),
                                             Fields::kAll))),
              ElementsAre(ids[0]));
  EXPECT_THAT(
      ValueOf(tx->ReadMessages("greet", At(10), 10, At(300), Fields::kAll)),
      IsEmpty());
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(90), 10, At(300),
                                             Fields::kAll))),
              ElementsAre(ids[1]));
}

TEST_P(BackendContractTest,
       ReadMessages_VisibleUntilNotAfterNow_LeavesThemVisible) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(10), 10, At(10), Fields::kAll))),
              ElementsAre(ids[0], ids[1]));
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> again,
      tx->ReadMessages("greet", At(10), 10, At(20), Fields::kAll));
  EXPECT_THAT(IdsOf(again), ElementsAre(ids[0], ids[1]));
  EXPECT_EQ(again[1].read_count, 2);
}

TEST_P(BackendContractTest, SetVisibility_HidesAndRevealsLiveMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids =
      Send({Message(1), Message(2), Message(3, At(100))});
  const int64_t unknown = ids[2] + 1000;
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK(tx->SetVisibility("greet",
                              {{{.message_id = ids[0], .visible_at = At(50)},
                                {.message_id = ids[2], .visible_at = At(5)},
                                {.message_id = unknown, .visible_at = kT0}}}));
  EXPECT_EQ(Lookup(*tx, ids[0])->message.visible_at, At(50));
  EXPECT_EQ(Lookup(*tx, ids[0])->message.read_count, 0);
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(10), 10, At(20), Fields::kAll))),
              ElementsAre(ids[1], ids[2]));
  EXPECT_EQ(Lookup(*tx, unknown), std::nullopt);
}

TEST_P(BackendContractTest, ArchiveMessages_MovesLiveMessagesToTheArchive) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  const int64_t unknown = ids[1] + 1000;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ReadMessages("greet", kT0, 1, At(30), Fields::kAll));
  });
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0], unknown}}, At(3)));
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0]}}, At(4)));  // a no-op
  });
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<MessageLocation> archived = Lookup(*tx, ids[0]);
  ASSERT_TRUE(archived.has_value());
  EXPECT_TRUE(archived->archived);
  EXPECT_EQ(archived->archived_at, At(3));
  EXPECT_EQ(Lookup(*tx, ids[1])->archived_at, std::nullopt);
  EXPECT_EQ(Describe(archived->message), Describe({.message_id = ids[0],
                                                   .read_count = 1,
                                                   .enqueued_at = kT0,
                                                   .visible_at = At(30),
                                                   .body = J(R"({"n":1})")}));
  EXPECT_THAT(IdsOf(ValueOf(tx->ReadMessages("greet", At(100), 10, At(130),
                                             Fields::kAll))),
              ElementsAre(ids[1]));
  // An archived message is not live: visibility changes skip it.
  ASSERT_OK(tx->SetVisibility("greet",
                              {{{.message_id = ids[0], .visible_at = kT0}}}));
  EXPECT_TRUE(Lookup(*tx, ids[0])->archived);
  EXPECT_EQ(Lookup(*tx, ids[0])->message.visible_at, At(30));
  EXPECT_EQ(Lookup(*tx, unknown), std::nullopt);
}

TEST_P(BackendContractTest, DeleteMessages_RemovesLiveMessagesOnly) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  const int64_t unknown = ids[2] + 1000;
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[2]}}, At(3)));
  });
  {
    // Rolled back: the message stays.
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->DeleteMessages("greet", {{ids[1]}}));
    EXPECT_EQ(Lookup(*tx, ids[1]), std::nullopt);
  }
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.DeleteMessages("greet", {{ids[0], ids[2], unknown}}));
    ASSERT_OK(tx.DeleteMessages("greet", {{ids[0]}}));  // a no-op
    ASSERT_OK(tx.DeleteMessages("greet", {}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Lookup(*tx, ids[0]), std::nullopt);
  ASSERT_TRUE(Lookup(*tx, ids[1]).has_value());
  EXPECT_FALSE(Lookup(*tx, ids[1])->archived);
  // An archived message is not live: the delete skips it.
  ASSERT_TRUE(Lookup(*tx, ids[2]).has_value());
  EXPECT_TRUE(Lookup(*tx, ids[2])->archived);
  EXPECT_THAT(IdsOf(ValueOf(
                  tx->ReadMessages("greet", At(10), 10, At(20), Fields::kAll))),
              ElementsAre(ids[1]));
}

TEST_P(BackendContractTest, ReadMessages_NoPayloads_LeavesBodiesEmpty) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(
      std::vector<MessageRecord> read,
      tx->ReadMessages("greet", At(1), 10, At(30), Fields::kNoPayloads));
  ASSERT_THAT(IdsOf(read), ElementsAre(ids[0], ids[1]));
  EXPECT_EQ(Describe(read[0]), Describe({.message_id = ids[0],
                                         .read_count = 1,
                                         .enqueued_at = kT0,
                                         .visible_at = At(30),
                                         .body = nullptr}));
  // The stored body is untouched.
  EXPECT_EQ(SerializeJson(Lookup(*tx, ids[1])->message.body), R"({"n":2})");
}

TEST_P(BackendContractTest, LookupMessage_UnknownId_ReturnsNullopt) {
  CreateQueue("greet");
  EXPECT_EQ(Lookup(*Begin(), 1), std::nullopt);
}

// --- Workers ----------------------------------------------------------------

TEST_P(BackendContractTest, UpsertWorker_InsertsThenReplacesTheWholeRecord) {
  const WorkerRecord w1{.worker_id = "w1",
                        .queue_name = "greet",
                        .flow_slug = "greet",
                        .started_at = kT0,
                        .last_heartbeat_at = kT0};
  const WorkerRecord w2{.worker_id = "w2",
                        .queue_name = "other",
                        .flow_slug = "other",
                        .started_at = At(1),
                        .last_heartbeat_at = At(1)};
  WorkerRecord w1_stopped = w1;
  w1_stopped.last_heartbeat_at = At(9);
  w1_stopped.stopped_at = At(10);
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpsertWorker(w1));
    ASSERT_OK(tx.UpsertWorker(w2));
  });
  Committed([&](Transaction& tx) { ASSERT_OK(tx.UpsertWorker(w1_stopped)); });
  ASSERT_OK_AND_ASSIGN(std::vector<WorkerRecord> workers,
                       Begin()->ListWorkers());
  std::vector<std::string> described;
  for (const WorkerRecord& w : workers) described.push_back(Describe(w));
  EXPECT_THAT(described,
              UnorderedElementsAre(Describe(w1_stopped), Describe(w2)));
}

// --- Limits -----------------------------------------------------------------

TEST_P(BackendContractTest, Limits_ZeroOrNegative_TakeAndListNothing) {
  CreateQueue("greet");
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({Ended(1, RunStatus::kCompleted, kT0)})));
    ASSERT_OK(
        tx.InsertTasks(Movable({Started(MakeTask(1, 0, 0, 1), kT0, At(1))})));
    ASSERT_OK(tx.SendMessages("greet", Movable({Message(1)}), kT0));
    ASSERT_OK(tx.AppendReports({{MakeReport(0, kT0)}}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  for (int limit : {0, -1}) {
    EXPECT_THAT(
        ValueOf(tx->ListRuns(RunQuery::OfFlow("", limit), Fields::kAll)),
        IsEmpty());
    EXPECT_THAT(ValueOf(tx->FindFinishedRuns(At(100), limit)), IsEmpty());
    EXPECT_THAT(ValueOf(tx->FindStalledTasks(StalledBefore(At(100), limit),
                                             Fields::kAll)),
                IsEmpty());
    EXPECT_THAT(ValueOf(tx->TakeStaleReports(At(100), limit)), IsEmpty());
    EXPECT_THAT(ValueOf(tx->ReadMessages("greet", At(100), limit, At(200),
                                         Fields::kAll)),
                IsEmpty());
  }
  EXPECT_EQ(ValueOf(tx->CountReports()), 1);
}

// --- Payloads handed over ---------------------------------------------------

// Every payload a write takes lives in a memory resource that is destroyed
// and scribbled over after the commit: what the backend keeps must not point
// into it.
TEST_P(BackendContractTest, Writes_PayloadsInAShortLivedResource_AreKept) {
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
    RunRecord run{.run_id = RunNo(1),
                  .flow_slug = "greet",
                  .input = in_arena("run_in"),
                  .output = in_arena("run_out"),
                  .started_at = kT0};
    ASSERT_EQ(run.input.storage().get(), &arena);
    StepStateRecord state{.run_id = RunNo(1),
                          .step_index = 0,
                          .step_slug = "step0",
                          .output = in_arena("step_out")};
    TaskRecord task{.key = {RunNo(1), 0, 0},
                    .flow_slug = "greet",
                    .input = in_arena("task_in"),
                    .output = in_arena("task_out"),
                    .queue_name = "greet",
                    .queued_at = kT0};
    OutgoingMessage message{.body = in_arena("body"), .visible_at = kT0};
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.InsertRuns(std::span(&run, 1)));
      ASSERT_OK(tx.InsertStepStates(std::span(&state, 1)));
      ASSERT_OK_AND_ASSIGN(
          std::vector<int64_t> ids,
          tx.SendMessages("greet", std::span(&message, 1), kT0));
      task.message_id = ids[0];
      ASSERT_OK(tx.InsertTasks(std::span(&task, 1)));
    });
    TaskUpdate update{.task = {.key = {RunNo(1), 0, 0},
                               .status = TaskStatus::kCompleted,
                               .output = in_arena("task_done"),
                               .message_id = task.message_id},
                      .expected_status = TaskStatus::kQueued,
                      .expected_attempts = 0};
    Committed([&](Transaction& tx) {
      ASSERT_OK(tx.UpdateTasks(std::span(&update, 1)));
    });
  }
  std::fill(buffer.begin(), buffer.end(), 0xA5);
  std::unique_ptr<Transaction> tx = Begin();
  std::optional<RunRecord> run = ValueOf(GetRun(*tx, RunNo(1)));
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(SerializeJson(run->input), text("run_in"));
  EXPECT_EQ(Text(run->output), text("run_out"));
  EXPECT_EQ(Text(ValueOf(GetSteps(*tx, RunNo(1)))[0].output), text("step_out"));
  std::optional<TaskRecord> task = GetTask(*tx, {RunNo(1), 0, 0});
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(SerializeJson(task->input), text("task_in"));
  EXPECT_EQ(Text(task->output), text("task_done"));
  EXPECT_EQ(SerializeJson(Lookup(*tx, task->message_id)->message.body),
            text("body"));
}

}  // namespace
}  // namespace sluice::contract
