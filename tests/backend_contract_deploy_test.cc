// The Transaction contract, v5 (deployment): aliases, flow generations,
// updates and deletion, run counts per flow, queue deletion and the steps a
// worker serves (see backend_contract_fixture.h).
#include <algorithm>
#include <cstdint>
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
#include "sluice/records.h"

namespace sluice::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

class DeployContractTest : public BackendContractV5Test {
 protected:
  static FlowRecord Flow(std::string slug, std::string alias,
                         std::string_view definition, int64_t generation = 1) {
    return FlowRecord{.slug = std::move(slug),
                      .definition = J(definition),
                      .created_at = At(1),
                      .alias = std::move(alias),
                      .generation = generation};
  }

  static std::string Describe(const FlowRecord& f) {
    return StrCat(f.slug, " alias=", f.alias, " gen=", f.generation,
                  " def=", SerializeJson(f.definition),
                  " created=", absl::FormatTime(f.created_at));
  }
  static std::string Describe(const AliasRecord& a) {
    return StrCat(a.alias, "->", a.active_slug,
                  " updated=", absl::FormatTime(a.updated_at));
  }
  static std::string Describe(const std::optional<AliasRecord>& a) {
    return a ? Describe(*a) : "<none>";
  }
  static std::string Describe(const std::optional<FlowRecord>& f) {
    return f ? Describe(*f) : "<none>";
  }
  static std::string Describe(const RunCounts& c) {
    return StrCat("started=", c.started, " completed=", c.completed,
                  " failed=", c.failed, " cancelled=", c.cancelled);
  }

  // Every flow and alias, as text.
  std::string Catalog() {
    std::unique_ptr<Transaction> tx = Begin();
    std::string out;
    for (const FlowRecord& f : ValueOf(tx->ListFlows())) {
      StrAppend(&out, "flow ", Describe(f), "\n");
    }
    std::vector<std::string> aliases;
    for (const AliasRecord& a : ValueOf(tx->ListAliases())) {
      aliases.push_back(Describe(a));
    }
    std::sort(aliases.begin(), aliases.end());
    for (const std::string& a : aliases) StrAppend(&out, "alias ", a, "\n");
    return out;
  }

  // Every worker, by id.
  std::vector<WorkerRecord> Workers() {
    std::vector<WorkerRecord> workers = ValueOf(Begin()->ListWorkers());
    std::sort(workers.begin(), workers.end(),
              [](const WorkerRecord& a, const WorkerRecord& b) {
                return a.worker_id < b.worker_id;
              });
    return workers;
  }

  // Flows greet_v1 (alias greet, active) and greet_v2 (alias greet).
  void SeedVersions() {
    Committed([](Transaction& tx) {
      ASSERT_OK(tx.LockAlias("greet"));
      ASSERT_OK(tx.LockFlowSlug("greet_v1"));
      ASSERT_OK(tx.InsertFlow(Flow("greet_v1", "greet", R"({"v":1})")));
      ASSERT_OK(tx.InsertFlow(Flow("greet_v2", "greet", R"({"v":2})")));
      ASSERT_OK(tx.PutAlias(
          {.alias = "greet", .active_slug = "greet_v1", .updated_at = At(1)}));
    });
  }
};
SLUICE_BACKEND_CONTRACT_SUITE(DeployContractTest);

// --- Flows: alias and generation ---------------------------------------------

TEST_P(DeployContractTest, InsertFlow_KeepsAliasAndGeneration) {
  const FlowRecord flow = Flow("greet_v3", "greeting", R"({"steps":[]})", 7);
  Committed([&](Transaction& tx) { ASSERT_OK(tx.InsertFlow(flow)); });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(ValueOf(tx->GetFlow("greet_v3"))), Describe(flow));
  std::vector<std::string> listed;
  for (const FlowRecord& f : ValueOf(tx->ListFlows())) {
    listed.push_back(Describe(f));
  }
  EXPECT_THAT(listed, ElementsAre(Describe(flow)));
}

TEST_P(DeployContractTest, InsertFlow_DefaultGeneration_IsOne) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertFlow({.slug = "greet", .definition = J("{}")}));
  });
  std::optional<FlowRecord> flow = ValueOf(Begin()->GetFlow("greet"));
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->generation, 1);
}

TEST_P(DeployContractTest, UpdateFlow_ReplacesDefinitionAndGeneration) {
  SeedVersions();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.UpdateFlow(Flow("greet_v1", "greet", R"({"v":"one"})", 2)));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(ValueOf(tx->GetFlow("greet_v1"))),
            Describe(Flow("greet_v1", "greet", R"({"v":"one"})", 2)));
  // The other version is untouched.
  EXPECT_EQ(Describe(ValueOf(tx->GetFlow("greet_v2"))),
            Describe(Flow("greet_v2", "greet", R"({"v":2})")));
}

TEST_P(DeployContractTest, UpdateFlow_UnknownSlug_FailsWithNotFound) {
  SeedVersions();
  const std::string before = Catalog();
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(WriteCode(*tx, tx->UpdateFlow(Flow("nope", "nope", "{}", 2))),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(Catalog(), before);
}

TEST_P(DeployContractTest, DeleteFlow_RemovesTheRowOnly) {
  SeedVersions();
  CreateQueue("greet_v2");
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1, "greet_v2")})));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteFlow("greet_v2"));
    EXPECT_TRUE(deleted);
    ASSERT_OK_AND_ASSIGN(bool again, tx->DeleteFlow("greet_v2"));
    EXPECT_FALSE(again);
    ASSERT_OK(tx->Commit());
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_FALSE(ValueOf(tx->GetFlow("greet_v2")).has_value());
  EXPECT_TRUE(ValueOf(tx->GetFlow("greet_v1")).has_value());
  // Runs, queues and the alias are the caller's business.
  EXPECT_TRUE(ValueOf(GetRun(*tx, RunNo(1))).has_value());
  EXPECT_TRUE(ValueOf(tx->QueueExists("greet_v2")));
  EXPECT_TRUE(ValueOf(tx->GetAlias("greet")).has_value());
}

TEST_P(DeployContractTest, DeleteFlow_UnknownSlug_ReturnsFalse) {
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteFlow("nope"));
  EXPECT_FALSE(deleted);
  ASSERT_OK(tx->Commit());
}

TEST_P(DeployContractTest, DeleteFlow_ThenInsertAgain_StoresTheNewRow) {
  SeedVersions();
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.DeleteFlow("greet_v2"));
    ASSERT_OK(tx.InsertFlow(Flow("greet_v2", "greet", R"({"v":"two"})", 3)));
  });
  EXPECT_EQ(Describe(ValueOf(Begin()->GetFlow("greet_v2"))),
            Describe(Flow("greet_v2", "greet", R"({"v":"two"})", 3)));
}

// --- Aliases
// -------------------------------------------------------------------

TEST_P(DeployContractTest, GetAlias_Unknown_ReturnsNullopt) {
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_FALSE(ValueOf(tx->GetAlias("greet")).has_value());
  EXPECT_THAT(ValueOf(tx->ListAliases()), IsEmpty());
}

TEST_P(DeployContractTest, PutAlias_InsertsThenReplaces) {
  SeedVersions();
  EXPECT_EQ(Describe(ValueOf(Begin()->GetAlias("greet"))),
            "greet->greet_v1 updated=" + absl::FormatTime(At(1)));
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.LockAlias("greet"));
    ASSERT_OK(tx.PutAlias(
        {.alias = "greet", .active_slug = "greet_v2", .updated_at = At(5)}));
  });
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(Describe(ValueOf(tx->GetAlias("greet"))),
            "greet->greet_v2 updated=" + absl::FormatTime(At(5)));
  EXPECT_EQ(ValueOf(tx->ListAliases()).size(), 1u);
}

TEST_P(DeployContractTest,
       ExpectAlias_ElsewhereThanActive_FailsTheTransaction) {
  SeedVersions();  // greet -> greet_v1
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.ExpectAlias("greet", "greet_v1"));
    ASSERT_OK(tx.PutAlias({.alias = "kept", .active_slug = "kept_v1"}));
  });
  // kNotFound by the Commit at the latest (Postgres defers the check), and
  // nothing the transaction wrote applies.
  for (auto [alias, slug] :
       {std::pair("greet", "greet_v2"), std::pair("nothing", "nothing_v1")}) {
    std::unique_ptr<Transaction> tx = Begin();
    absl::Status status = tx->ExpectAlias(alias, slug);
    if (status.ok()) {
      status = tx->PutAlias({.alias = "lost", .active_slug = "lost_v1"});
    }
    if (status.ok()) status = tx->Commit();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(StrCat("alias \"", alias, "\" at version \"", slug,
                                 "\" does not exist")));
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_TRUE(ValueOf(tx->GetAlias("kept")).has_value());
  EXPECT_FALSE(ValueOf(tx->GetAlias("lost")).has_value());
}

TEST_P(DeployContractTest, ListAliases_ReturnsEveryAlias) {
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.PutAlias({.alias = "b", .active_slug = "b_v1"}));
    ASSERT_OK(tx.PutAlias({.alias = "a", .active_slug = "a_v2"}));
  });
  std::vector<std::string> listed;
  for (const AliasRecord& a : ValueOf(Begin()->ListAliases())) {
    listed.push_back(StrCat(a.alias, "->", a.active_slug));
  }
  EXPECT_THAT(listed, UnorderedElementsAre("a->a_v2", "b->b_v1"));
}

TEST_P(DeployContractTest,
       LockAlias_AndLockFlowSlug_OfTheSameText_BothSucceed) {
  // The two locks live in different key spaces: taking both for one name in
  // one transaction must not deadlock or fail.
  Committed([](Transaction& tx) {
    ASSERT_OK(tx.LockAlias("greet"));
    ASSERT_OK(tx.LockFlowSlug("greet"));
    ASSERT_OK(tx.LockAlias("greet"));
    ASSERT_OK(tx.InsertFlow(Flow("greet", "greet", "{}")));
  });
  EXPECT_TRUE(ValueOf(Begin()->GetFlow("greet")).has_value());
}

// --- Rollback ----------------------------------------------------------------

TEST_P(DeployContractTest, Drop_WithoutCommit_RollsBackAliasAndFlowChanges) {
  SeedVersions();
  const std::string before = Catalog();
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->LockAlias("greet"));
    ASSERT_OK(tx->PutAlias(
        {.alias = "greet", .active_slug = "greet_v2", .updated_at = At(9)}));
    ASSERT_OK(tx->PutAlias({.alias = "other", .active_slug = "other"}));
    ASSERT_OK(tx->InsertFlow(Flow("other", "other", "{}")));
    ASSERT_OK(tx->UpdateFlow(Flow("greet_v1", "greet", R"({"v":0})", 2)));
    ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteFlow("greet_v2"));
    EXPECT_TRUE(deleted);
    EXPECT_EQ(ValueOf(tx->GetAlias("greet"))->active_slug, "greet_v2");
  }
  EXPECT_EQ(Catalog(), before);
}

TEST_P(DeployContractTest, FailedCall_RollsBackAliasAndFlowChanges) {
  SeedVersions();
  const std::string before = Catalog();
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK(tx->PutAlias(
        {.alias = "greet", .active_slug = "greet_v2", .updated_at = At(9)}));
    ASSERT_OK(tx->UpdateFlow(Flow("greet_v1", "greet", R"({"v":0})", 2)));
    ASSERT_OK(tx->DeleteFlow("greet_v2").status());
    // The same slug again: kAlreadyExists, and the whole transaction goes.
    ASSERT_OK(tx->InsertFlow(Flow("new", "greet", "{}")));
    EXPECT_EQ(WriteCode(*tx, tx->InsertFlow(Flow("new", "greet", "{}"))),
              absl::StatusCode::kAlreadyExists);
  }
  EXPECT_EQ(Catalog(), before);
}

// --- Run counts
// ----------------------------------------------------------------

TEST_P(DeployContractTest, CountRuns_CountsTheFlowsRunsByStatus) {
  Committed([](Transaction& tx) {
    RunRecord failed = Ended(3, RunStatus::kFailed, At(3));
    RunRecord cancelled = Ended(4, RunStatus::kCancelled, At(4));
    RunRecord done = Ended(5, RunStatus::kCompleted, At(5));
    RunRecord other = MakeRun(6, "other");
    ASSERT_OK(tx.InsertRuns(
        Movable({MakeRun(1), MakeRun(2), failed, cancelled, done, other})));
  });
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(RunCounts greet, tx->CountRuns("greet"));
  EXPECT_EQ(Describe(greet), "started=2 completed=1 failed=1 cancelled=1");
  EXPECT_EQ(greet.total(), 5);
  ASSERT_OK_AND_ASSIGN(RunCounts other, tx->CountRuns("other"));
  EXPECT_EQ(Describe(other), "started=1 completed=0 failed=0 cancelled=0");
  ASSERT_OK_AND_ASSIGN(RunCounts none, tx->CountRuns("nope"));
  EXPECT_EQ(none.total(), 0);
}

TEST_P(DeployContractTest, CountRuns_SeesTheTransactionsOwnWrites) {
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK(tx->InsertRuns(Movable({MakeRun(1)})));
  RunRecord done = MakeRun(1);
  done.status = RunStatus::kCompleted;
  done.remaining_steps = 0;
  done.finished_at = At(2);
  ASSERT_OK(tx->UpdateRuns(Movable({done})));
  ASSERT_OK_AND_ASSIGN(RunCounts counts, tx->CountRuns("greet"));
  EXPECT_EQ(Describe(counts), "started=0 completed=1 failed=0 cancelled=0");
}

// --- Queue deletion
// ------------------------------------------------------------

TEST_P(DeployContractTest, DeleteQueue_RemovesRegistryRowAndEveryMessage) {
  CreateQueue("greet");
  CreateQueue("keep");
  const std::vector<int64_t> ids = Send({Message(1), Message(2), Message(3)});
  const std::vector<int64_t> kept = Send({Message(9)}, kT0, "keep");
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.InsertRuns(Movable({MakeRun(1)})));
    ASSERT_OK(tx.InsertTasks(Movable({MakeTask(1, 0, 0, ids[0])})));
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0]}}, At(1)));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteQueue("greet"));
    EXPECT_TRUE(deleted);
    ASSERT_OK(tx->Commit());
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_FALSE(ValueOf(tx->QueueExists("greet")));
    EXPECT_FALSE(ValueOf(tx->GetQueue("greet")).has_value());
    std::vector<std::string> names;
    for (const QueueRecord& q : ValueOf(tx->ListQueues())) {
      names.push_back(q.name);
    }
    EXPECT_THAT(names, ElementsAre("keep"));
    // The task keeps its message snapshot.
    std::optional<TaskRecord> task = GetTask(*tx, {RunNo(1), 0, 0});
    ASSERT_TRUE(task.has_value());
    EXPECT_EQ(task->queue_name, "greet");
    EXPECT_EQ(task->message_id, ids[0]);
    // The other queue keeps its message.
    std::optional<MessageLocation> found = Lookup(*tx, kept[0], "keep");
    ASSERT_TRUE(found.has_value());
    EXPECT_FALSE(found->archived);
  }
  // Created again, the queue holds none of the old messages, live or
  // archived.
  CreateQueue("greet");
  std::unique_ptr<Transaction> tx = Begin();
  for (int64_t id : ids) EXPECT_FALSE(Lookup(*tx, id).has_value()) << id;
  EXPECT_THAT(
      ValueOf(tx->ReadMessages("greet", At(1), 10, At(100), Fields::kAll)),
      IsEmpty());
}

TEST_P(DeployContractTest, DeleteQueue_Unknown_ReturnsFalse) {
  CreateQueue("keep");
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteQueue("nope"));
  EXPECT_FALSE(deleted);
  ASSERT_OK(tx->Commit());
  EXPECT_TRUE(ValueOf(Begin()->QueueExists("keep")));
}

TEST_P(DeployContractTest, DeleteQueue_Dropped_KeepsQueueAndMessages) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0]}}, At(1)));
  });
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_OK_AND_ASSIGN(bool deleted, tx->DeleteQueue("greet"));
    EXPECT_TRUE(deleted);
    EXPECT_FALSE(ValueOf(tx->QueueExists("greet")));
  }
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_TRUE(ValueOf(tx->QueueExists("greet")));
  std::optional<MessageLocation> archived = Lookup(*tx, ids[0]);
  ASSERT_TRUE(archived.has_value());
  EXPECT_TRUE(archived->archived);
  std::optional<MessageLocation> live = Lookup(*tx, ids[1]);
  ASSERT_TRUE(live.has_value());
  EXPECT_FALSE(live->archived);
  EXPECT_EQ(SerializeJson(live->message.body), R"({"n":2})");
}

TEST_P(DeployContractTest, DeleteQueue_ThenCreateAgain_InOneTransaction) {
  CreateQueue("greet");
  const std::vector<int64_t> ids = Send({Message(1), Message(2)});
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.ArchiveMessages("greet", {{ids[0]}}, At(1)));
  });
  auto recreate = [&](Transaction& tx) {
    ASSERT_OK_AND_ASSIGN(bool deleted, tx.DeleteQueue("greet"));
    EXPECT_TRUE(deleted);
    ASSERT_OK(tx.CreateQueue({.name = "greet", .created_at = At(5)}));
    ASSERT_OK(tx.SendMessages("greet", Movable({Message(7)}), At(5)));
  };
  {
    // Dropped: the old queue is back with both its messages.
    std::unique_ptr<Transaction> tx = Begin();
    recreate(*tx);
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    EXPECT_EQ(ValueOf(tx->GetQueue("greet"))->created_at, kT0);
    std::optional<MessageLocation> archived = Lookup(*tx, ids[0]);
    ASSERT_TRUE(archived.has_value());
    EXPECT_TRUE(archived->archived);
    std::optional<MessageLocation> live = Lookup(*tx, ids[1]);
    ASSERT_TRUE(live.has_value());
    EXPECT_EQ(SerializeJson(live->message.body), R"({"n":2})");
  }
  // Committed: only the new queue's message is readable.
  Committed(recreate);
  std::unique_ptr<Transaction> tx = Begin();
  EXPECT_EQ(ValueOf(tx->GetQueue("greet"))->created_at, At(5));
  std::vector<MessageRecord> read =
      ValueOf(tx->ReadMessages("greet", At(6), 10, At(100), Fields::kAll));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(SerializeJson(read[0].body), R"({"n":7})");
}

// --- Served steps ------------------------------------------------------------

TEST_P(DeployContractTest, UpsertWorker_RoundTripsServedSteps) {
  const WorkerRecord none{.worker_id = "w0",
                          .queue_name = "greet",
                          .flow_slug = "greet",
                          .started_at = kT0,
                          .last_heartbeat_at = kT0};
  WorkerRecord some = none;
  some.worker_id = "w1";
  some.served = {{.flow_slug = "greet", .steps = {"fetch", "save"}},
                 {.flow_slug = "report", .steps = {"only"}},
                 {.flow_slug = "idle", .steps = {}}};
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpsertWorker(none));
    ASSERT_OK(tx.UpsertWorker(some));
  });
  {
    std::vector<WorkerRecord> workers = Workers();
    ASSERT_EQ(workers.size(), 2u);
    EXPECT_EQ(workers[0].worker_id, "w0");
    EXPECT_THAT(workers[0].served, IsEmpty());
    EXPECT_EQ(workers[1].served, some.served);
  }
  // An upsert replaces the list: emptied for w1, filled for w0.
  WorkerRecord w0 = none;
  w0.served = {{.flow_slug = "greet", .steps = {"a \"quoted\" step"}}};
  WorkerRecord w1 = some;
  w1.served.clear();
  Committed([&](Transaction& tx) {
    ASSERT_OK(tx.UpsertWorker(w0));
    ASSERT_OK(tx.UpsertWorker(w1));
  });
  std::vector<WorkerRecord> workers = Workers();
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[0].served, w0.served);
  EXPECT_THAT(workers[1].served, IsEmpty());
}

}  // namespace
}  // namespace sluice::contract
