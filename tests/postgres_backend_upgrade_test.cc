// Upgrading to the job schema (migration 0003) and pgmq compatibility of
// the queues it changes: a database at version 2 with a queue, messages and
// a run migrates and keeps working, and a Sluice queue's live table keeps
// pgmq's exact row shape, so every pgmq function works on it.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_session.h"
#include "postgres_jobs_fixture.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using ::testing::ElementsAre;

class PostgresUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }
};

std::string QueryText(const std::string& url, const std::string& sql) {
  return SqlSession(url).Value(sql).value_or("");
}

void ExecuteSql(const std::string& url, const std::string& sql) {
  SqlSession(url).Script(sql);
}

TEST_F(PostgresUpgradeTest, Version2Database_WithQueuedMessages_Migrates) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 2).ok());
  // What version 2 wrote: a registered queue, three messages in it (pgmq's
  // own send, the database's clock), a run.
  ExecuteSql(url,
             "INSERT INTO sluice.queues (name, owner_flow, created_at) VALUES "
             "('old_q', '', now()); SELECT sluice.create_queue('old_q'); "
             "SELECT pgmq.send('old_q', '{\"n\":1}'::jsonb); "
             "SELECT pgmq.send('old_q', '{\"n\":2}'::jsonb); "
             "SELECT pgmq.send('old_q', '{\"n\":3}'::jsonb); "
             "INSERT INTO sluice.runs (run_id, flow_slug, status, "
             "remaining_steps, error, started_at, input) VALUES "
             "('01900000-0000-7000-8000-000000000001', 'jobs', 'started', 1, "
             "'', now(), '{}')");
  absl::StatusOr<std::unique_ptr<Backend>> old =
      OpenPostgres(url, PostgresOptions());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  // The queue's indexes are Sluice's (migrations 0003, 0012, 0016 and
  // 0017): pgmq's index of every vt and the claim order of every message
  // gave way to one partial index each of ready, delayed and read messages.
  EXPECT_EQ(QueryText(url,
                      "SELECT to_regclass('pgmq.q_old_q_sluice_ready') "
                      "IS NOT NULL AND to_regclass('pgmq.q_old_q_sluice_read') "
                      "IS NOT NULL AND "
                      "to_regclass('pgmq.q_old_q_sluice_delayed') IS NOT NULL "
                      "AND num_nulls(to_regclass('pgmq.q_old_q_vt_idx'), "
                      "to_regclass('pgmq.q_old_q_sluice_claim'), "
                      "to_regclass('pgmq.q_old_q_sluice_unread')) = 3"),
            "t");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  // The old messages were visible at the database's clock; read later.
  const absl::Time now = absl::Now() + absl::Hours(1);
  std::vector<OutgoingMessage> fresh = {
      {.body = J("4"), .visible_at = now, .priority = 0},
      {.body = J("5"), .visible_at = now, .priority = 5}};
  std::vector<MessageRecord> read;
  {
    absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE((*tx)->SendMessages("old_q", std::span(fresh), now).ok());
    read = ValueOf((*tx)->ReadMessages("old_q", now, 10, now + absl::Minutes(1),
                                       Fields::kAll));
    std::optional<RunRecord> run = ValueOf((*tx)->GetRuns(
        std::vector{RunNo(1)}, LockMode::kNone, Fields::kAll))[0];
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->priority, 0);
    EXPECT_EQ(run->external_key, "");
    EXPECT_TRUE(run->metadata.is_null());
    EXPECT_TRUE(run->options.is_null());
    EXPECT_FALSE(run->cancel_requested);
    ASSERT_TRUE((*tx)->Commit().ok());
  }
  std::vector<std::string> bodies;
  for (const MessageRecord& message : read) {
    bodies.push_back(SerializeJson(message.body));
  }
  // Priority first; the old messages keep their order, ahead of newer ones
  // of their priority.
  EXPECT_THAT(bodies,
              ElementsAre("5", R"({"n":1})", R"({"n":2})", R"({"n":3})", "4"));
}

TEST_F(PostgresJobsTest, SluiceQueue_KeepsPgmqRowShape_PgmqFunctionsWork) {
  CreateQueue("shape_q");
  // Visible by the database's clock, which pgmq's functions use.
  std::vector<int64_t> ids =
      Send("shape_q", {2, 7, 0, 1}, absl::Now() - absl::Hours(1));
  ASSERT_EQ(ids.size(), 4u);
  const std::string url = db_->url();
  EXPECT_EQ(
      QueryText(url,
                "SELECT string_agg(attname, ',' ORDER BY attnum) FROM "
                "pg_attribute WHERE attrelid = 'pgmq.q_shape_q'::regclass "
                "AND attnum > 0 AND NOT attisdropped"),
      "msg_id,read_ct,enqueued_at,vt,message,headers");
  // pgmq's functions that return whole rows (pop, set_vt) and the rest.
  EXPECT_EQ(QueryText(url, StrCat("SELECT msg_id FROM pgmq.set_vt('shape_q', ",
                                  ids[0], ", 0)")),
            StrCat(ids[0]));
  EXPECT_EQ(QueryText(url, "SELECT msg_id FROM pgmq.pop('shape_q')"),
            StrCat(ids[0]));
  EXPECT_EQ(QueryText(url, "SELECT msg_id FROM pgmq.read('shape_q', 30, 1)"),
            StrCat(ids[1]));
  EXPECT_EQ(QueryText(url, StrCat("SELECT pgmq.archive('shape_q', ", ids[2],
                                  "::bigint)")),
            "t");
  EXPECT_EQ(QueryText(url, StrCat("SELECT pgmq.delete('shape_q', ", ids[3],
                                  "::bigint)")),
            "t");
  EXPECT_EQ(QueryText(url, "SELECT queue_length FROM pgmq.metrics('shape_q')"),
            "1");
  // A message another pgmq client sends is claimed after Sluice's own.
  ExecuteSql(url, "SELECT pgmq.send('shape_q', '{\"x\":1}'::jsonb)");
  std::vector<int64_t> later =
      Send("shape_q", {0}, absl::Now() - absl::Hours(1));
  EXPECT_THAT(Read("shape_q", 10, absl::Now() + absl::Hours(1)),
              ElementsAre(ids[1], later[0], later[0] - 1));
}

}  // namespace
}  // namespace sluice::testing
