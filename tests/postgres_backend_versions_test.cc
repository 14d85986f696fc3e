// The Postgres backend's versions schema (migration 0004, interface v5):
// upgrading a version 3 database keeps its flows and workers and gives
// every flow its alias; flows carry alias and generation; run counts,
// aliases, alias locks, queue deletion and served steps, checked on the
// tables themselves. The contract for every backend is in
// backend_contract_*_test.cc.
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "postgres_jobs_fixture.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kLockDeadline = absl::Seconds(20);

FlowRecord MakeFlow(std::string slug, std::string alias,
                    int64_t generation = 1) {
  return {.slug = std::move(slug),
          .definition = J(R"({"steps":[{"slug":"a"}]})"),
          .created_at = kJobsT0,
          .alias = std::move(alias),
          .generation = generation};
}

RunRecord RunWithStatus(uint64_t n, std::string flow, RunStatus status) {
  RunRecord run = MakeRun(n, std::move(flow));
  run.status = status;
  if (status != RunStatus::kStarted) run.finished_at = At(1);
  return run;
}

TEST(PostgresVersionsUpgradeTest, Version3Database_KeepsFlowsAndGetsAliases) {
  if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 3).ok());
  // What version 3 wrote: two flows, a registered queue with a message, a
  // worker, a run.
  {
    SqlSession sql(url);
    sql.Rows(
        "INSERT INTO sluice.flows (slug, definition, created_at) VALUES "
        "('greet', '{\"v\":1}', '2027-01-15 08:00:00+00'), "
        "('mail', '{\"v\":2}', '2027-02-01 09:30:00+00')");
    sql.Rows(
        "INSERT INTO sluice.queues (name, owner_flow, created_at) VALUES "
        "('greet', 'greet', now())");
    sql.Rows("SELECT sluice.create_queue('greet')");
    sql.Rows("SELECT pgmq.send('greet', '{\"n\":1}'::jsonb)");
    sql.Rows(
        "INSERT INTO sluice.workers (worker_id, queue_name, flow_slug, "
        "started_at, last_heartbeat_at) VALUES ('w1', 'greet', 'greet', "
        "'2027-01-15 08:00:00+00', '2027-01-15 08:01:00+00')");
  }
  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  std::vector<FlowRecord> flows = ValueOf((*tx)->ListFlows());
  ASSERT_EQ(flows.size(), 2u);
  for (const FlowRecord& flow : flows) {
    EXPECT_EQ(flow.alias, flow.slug);
    EXPECT_EQ(flow.generation, 1);
  }
  EXPECT_EQ(SerializeJson(flows[0].definition), R"({"v":1})");
  std::vector<AliasRecord> aliases = ValueOf((*tx)->ListAliases());
  ASSERT_EQ(aliases.size(), 2u);
  EXPECT_EQ(aliases[0].alias, "greet");
  EXPECT_EQ(aliases[0].active_slug, "greet");
  EXPECT_EQ(aliases[0].updated_at, flows[0].created_at);
  EXPECT_EQ(aliases[1].alias, "mail");
  EXPECT_EQ(aliases[1].active_slug, "mail");
  std::vector<WorkerRecord> workers = ValueOf((*tx)->ListWorkers());
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].flow_slug, "greet");
  EXPECT_THAT(workers[0].served, IsEmpty());
  // A queue made before the upgrade can be deleted after it.
  EXPECT_TRUE(ValueOf((*tx)->DeleteQueue("greet")));
  ASSERT_TRUE((*tx)->Commit().ok());
}

class PostgresVersionsTest : public PostgresJobsTest {
 protected:
  std::optional<FlowRecord> Flow(std::string_view slug) {
    std::unique_ptr<Transaction> tx = Begin();
    if (tx == nullptr) return std::nullopt;
    return ValueOf(tx->GetFlow(slug));
  }
};

TEST_F(PostgresVersionsTest, Flows_KeepAliasAndGeneration_UpdateAndDelete) {
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                return tx.InsertFlow(MakeFlow("greet_v2", "greet", 3));
              }).ok());
  std::optional<FlowRecord> stored = Flow("greet_v2");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->alias, "greet");
  EXPECT_EQ(stored->generation, 3);
  EXPECT_EQ(stored->created_at, kJobsT0);

  FlowRecord changed = MakeFlow("greet_v2", "ignored", 4);
  changed.definition = J(R"({"steps":[{"slug":"b"}],"z":0})");
  changed.created_at = At(99);
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.UpdateFlow(changed);
              }).ok());
  stored = Flow("greet_v2");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(SerializeJson(stored->definition),
            R"({"steps":[{"slug":"b"}],"z":0})");
  EXPECT_EQ(stored->generation, 4);
  // Only definition and generation change.
  EXPECT_EQ(stored->alias, "greet");
  EXPECT_EQ(stored->created_at, kJobsT0);

  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    absl::Status missing = tx->UpdateFlow(MakeFlow("nope", "nope"));
    EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
    EXPECT_THAT(std::string(missing.message()), ::testing::HasSubstr("nope"));
  }
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    EXPECT_TRUE(ValueOf(tx->DeleteFlow("greet_v2")));
    EXPECT_FALSE(ValueOf(tx->DeleteFlow("greet_v2")));
    EXPECT_THAT(ValueOf(tx->ListFlows()), IsEmpty());
    ASSERT_TRUE(tx->Commit().ok());
  }
  EXPECT_FALSE(Flow("greet_v2").has_value());
}

TEST_F(PostgresVersionsTest, CountRuns_CountsOneFlowsRunsByStatus) {
  ASSERT_TRUE(Insert({RunWithStatus(1, "a", RunStatus::kStarted),
                      RunWithStatus(2, "a", RunStatus::kStarted),
                      RunWithStatus(3, "a", RunStatus::kCompleted),
                      RunWithStatus(4, "a", RunStatus::kCancelled),
                      RunWithStatus(5, "b", RunStatus::kFailed)})
                  .ok());
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  RunCounts a = ValueOf(tx->CountRuns("a"));
  EXPECT_EQ(a.started, 2);
  EXPECT_EQ(a.completed, 1);
  EXPECT_EQ(a.failed, 0);
  EXPECT_EQ(a.cancelled, 1);
  EXPECT_EQ(a.total(), 4);
  RunCounts b = ValueOf(tx->CountRuns("b"));
  EXPECT_EQ(b.failed, 1);
  EXPECT_EQ(b.total(), 1);
  EXPECT_EQ(ValueOf(tx->CountRuns("none")).total(), 0);
}

TEST_F(PostgresVersionsTest, Aliases_PutUpserts_ListIsOrderedByAlias) {
  ASSERT_TRUE(
      InTransaction([](Transaction& tx) {
        if (absl::Status s = tx.PutAlias({"b", "b_v1", At(1)}); !s.ok()) {
          return s;
        }
        return tx.PutAlias({"a", "a_v1", At(2)});
      }).ok());
  ASSERT_TRUE(InTransaction([](Transaction& tx) {
                return tx.PutAlias({"b", "b_v2", At(3)});
              }).ok());
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  std::optional<AliasRecord> b = ValueOf(tx->GetAlias("b"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->active_slug, "b_v2");
  EXPECT_EQ(b->updated_at, At(3));
  EXPECT_FALSE(ValueOf(tx->GetAlias("c")).has_value());
  std::vector<std::string> listed;
  for (const AliasRecord& alias : ValueOf(tx->ListAliases())) {
    listed.push_back(alias.alias + "=" + alias.active_slug);
  }
  EXPECT_THAT(listed, ElementsAre("a=a_v1", "b=b_v2"));
}

// Holds LockAlias("shared") in one transaction; `work` runs in another, on
// its own thread, and `done` is notified when its transaction committed.
class HeldAliasLock {
 public:
  HeldAliasLock(Backend& backend,
                std::function<absl::Status(Transaction&)> work)
      : holder_(ValueOf(backend.Begin())) {
    EXPECT_TRUE(holder_->LockAlias("shared").ok());
    EXPECT_TRUE(holder_->GetAlias("shared").ok());  // the lock is taken
    thread_ = std::thread([&backend, work = std::move(work), this] {
      absl::StatusOr<std::unique_ptr<Transaction>> tx = backend.Begin();
      absl::Status status = tx.status();
      if (status.ok()) status = work(**tx);
      if (status.ok()) status = (*tx)->Commit();
      EXPECT_TRUE(status.ok()) << status;
      done_.Notify();
    });
  }
  ~HeldAliasLock() {
    Release();
    thread_.join();
  }
  void Release() {
    if (holder_ == nullptr) return;
    EXPECT_TRUE(holder_->Commit().ok());
    holder_.reset();
  }
  absl::Notification& done() { return done_; }

 private:
  std::unique_ptr<Transaction> holder_;
  absl::Notification done_;
  std::thread thread_;
};

TEST_F(PostgresVersionsTest, LockAlias_DoesNotCollideWithSlugOfSameText) {
  HeldAliasLock held(*backend_, [](Transaction& tx) {
    if (absl::Status s = tx.LockFlowSlug("shared"); !s.ok()) return s;
    return tx.GetFlow("shared").status();  // waits for the lock, if any
  });
  EXPECT_TRUE(held.done().WaitForNotificationWithTimeout(kLockDeadline))
      << "LockFlowSlug waited for LockAlias of the same text";
}

TEST_F(PostgresVersionsTest, LockAlias_SerializesTransactionsOnOneAlias) {
  HeldAliasLock held(*backend_, [](Transaction& tx) {
    if (absl::Status s = tx.LockAlias("shared"); !s.ok()) return s;
    return tx.GetAlias("shared").status();
  });
  // The second transaction waits on the advisory lock...
  SqlSession sql(db_->url());
  const absl::Time give_up = absl::Now() + kLockDeadline;
  int64_t waiting = 0;
  while ((waiting = sql.Count("SELECT count(*) FROM pg_locks WHERE locktype "
                              "= 'advisory' AND NOT granted")) != 1 &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(waiting, 1);
  EXPECT_FALSE(held.done().HasBeenNotified());
  // ...until the first ends.
  held.Release();
  EXPECT_TRUE(held.done().WaitForNotificationWithTimeout(kLockDeadline));
}

TEST_F(PostgresVersionsTest, DeleteQueue_DropsTablesMessagesAndRegistryRow) {
  CreateQueue("gone_q");
  std::vector<int64_t> ids = Send("gone_q", {0, 0});
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.ArchiveMessages("gone_q", std::span(ids).first(1),
                                          kJobsT0);
              }).ok());
  // A physical pgmq queue nobody registered is not DeleteQueue's.
  Execute("SELECT pgmq.create('foreign_q')");
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    EXPECT_TRUE(ValueOf(tx->DeleteQueue("gone_q")));
    EXPECT_FALSE(ValueOf(tx->DeleteQueue("gone_q")));
    EXPECT_FALSE(ValueOf(tx->DeleteQueue("foreign_q")));
    EXPECT_FALSE(ValueOf(tx->GetQueue("gone_q")).has_value());
    EXPECT_FALSE(ValueOf(tx->QueueExists("gone_q")));
    ASSERT_TRUE(tx->Commit().ok());
  }
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT to_regclass('pgmq.q_gone_q') IS NULL AND "
                      "to_regclass('pgmq.a_gone_q') IS NULL"),
            "t");
  EXPECT_EQ(sql.Count("SELECT count(*) FROM pgmq.meta WHERE queue_name = "
                      "'gone_q'"),
            0);
  EXPECT_EQ(sql.Value("SELECT to_regclass('pgmq.q_foreign_q') IS NOT NULL"),
            "t");
  // The name can be used again; the pool's statements on the old tables
  // are planned afresh.
  CreateQueue("gone_q");
  std::vector<int64_t> again = Send("gone_q", {0});
  EXPECT_THAT(Read("gone_q", 10), ElementsAre(again.at(0)));
}

// The runtime role owns no queue table: it drops one through
// sluice.drop_queue, and writes aliases with its table rights.
TEST_F(PostgresVersionsTest, RuntimeRole_DeletesQueuesAndWritesAliases) {
  const std::string role = StrCat("sluice_test_versions_", getpid());
  Execute(StrCat("DROP ROLE IF EXISTS ", role, "; CREATE ROLE ", role,
                 " LOGIN; GRANT sluice_runtime TO ", role));
  {
    const std::string& url = db_->url();
    absl::StatusOr<std::unique_ptr<Backend>> runtime = OpenPostgres(StrCat(
        url, url.find('?') == std::string::npos ? "?" : "&", "user=", role));
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    absl::StatusOr<std::unique_ptr<Transaction>> tx = (*runtime)->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    ASSERT_TRUE(
        (*tx)->CreateQueue({.name = "rt_q", .created_at = kJobsT0}).ok());
    ASSERT_TRUE((*tx)->PutAlias({"rt", "rt_v1", kJobsT0}).ok());
    ASSERT_TRUE((*tx)->Commit().ok());
    tx = (*runtime)->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    EXPECT_TRUE(ValueOf((*tx)->DeleteQueue("rt_q")));
    EXPECT_EQ(ValueOf((*tx)->ListAliases()).size(), 1u);
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  EXPECT_EQ(
      SqlSession(db_->url()).Value("SELECT to_regclass('pgmq.q_rt_q') IS NULL"),
      "t");
  // Drops the database before the role.
  backend_.reset();
  db_.reset();
  SqlSession(PostgresTestUrl()).Script(StrCat("DROP ROLE ", role));
}

TEST_F(PostgresVersionsTest, Workers_StoreServedSteps_NullReadsAsNone) {
  WorkerRecord worker{.worker_id = "w1",
                      .queue_name = "shared_q",
                      .flow_slug = "a",
                      .started_at = kJobsT0,
                      .last_heartbeat_at = At(5)};
  worker.served = {{"a", {"first", "second"}}, {"b", {"only"}}, {"c", {}}};
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.UpsertWorker(worker);
              }).ok());
  SqlSession sql(db_->url());
  EXPECT_EQ(sql.Value("SELECT served::text FROM sluice.workers"),
            R"([{"flow":"a","steps":["first","second"]},)"
            R"({"flow":"b","steps":["only"]},{"flow":"c","steps":[]}])");
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    std::vector<WorkerRecord> workers = ValueOf(tx->ListWorkers());
    ASSERT_EQ(workers.size(), 1u);
    EXPECT_EQ(workers[0].served, worker.served);
  }
  worker.served.clear();
  ASSERT_TRUE(InTransaction([&](Transaction& tx) {
                return tx.UpsertWorker(worker);
              }).ok());
  EXPECT_EQ(sql.Value("SELECT served::text FROM sluice.workers"), "[]");
  sql.Rows("UPDATE sluice.workers SET served = NULL");
  {
    std::unique_ptr<Transaction> tx = Begin();
    ASSERT_NE(tx, nullptr);
    std::vector<WorkerRecord> workers = ValueOf(tx->ListWorkers());
    ASSERT_EQ(workers.size(), 1u);
    EXPECT_THAT(workers[0].served, IsEmpty());
  }
  // Another shape is corruption, reported rather than read as nothing.
  sql.Rows("UPDATE sluice.workers SET served = '[{\"flow\": 1}]'");
  std::unique_ptr<Transaction> tx = Begin();
  ASSERT_NE(tx, nullptr);
  EXPECT_EQ(tx->ListWorkers().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace sluice::testing
