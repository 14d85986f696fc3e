// The pgmq-compatible SQL's queues: install, create, names, advisory locks,
// listing, dropping, search paths, and where it is stricter than pgmq.
// Messages are in pgmq_compat_messages_test.cc; the fixture and what both
// need is in support/pgmq_compat_fixture.h.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/pgmq_compat_fixture.h"

namespace sluice::pgmq_testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(PgmqCompatTest, Stricter_Install_RunTwice_IsHarmless) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{\"a\":1}')");
  Result again = Install(*db_);
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "1");
}

TEST_F(PgmqCompatTest, Create_MakesTablesIndexesAndMetaRow) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('jobs')");  // idempotent
  EXPECT_THAT(db_->Must("SELECT column_name || ' ' || data_type || ' ' || "
                        "is_nullable FROM information_schema.columns "
                        "WHERE table_schema = 'pgmq' AND table_name = 'q_jobs' "
                        "ORDER BY ordinal_position")
                  .Column(),
              ElementsAre("msg_id bigint NO", "read_ct integer NO",
                          "enqueued_at timestamp with time zone NO",
                          "vt timestamp with time zone NO", "message jsonb YES",
                          "headers jsonb YES"));
  EXPECT_THAT(db_->Must("SELECT column_name || ' ' || data_type || ' ' || "
                        "is_nullable FROM information_schema.columns "
                        "WHERE table_schema = 'pgmq' AND table_name = 'a_jobs' "
                        "ORDER BY ordinal_position")
                  .Column(),
              ElementsAre("msg_id bigint NO", "read_ct integer NO",
                          "enqueued_at timestamp with time zone NO",
                          "archived_at timestamp with time zone NO",
                          "vt timestamp with time zone NO", "message jsonb YES",
                          "headers jsonb YES"));
  EXPECT_EQ(db_->Must("SELECT is_identity FROM information_schema.columns "
                      "WHERE table_schema = 'pgmq' AND table_name = 'q_jobs' "
                      "AND column_name = 'msg_id'")
                .Value(),
            "YES");
  // Indexed: the live table's vt, the archive's archived_at.
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_indexes WHERE schemaname = "
                      "'pgmq' AND tablename = 'q_jobs' AND indexdef LIKE "
                      "'%(vt)%'")
                .Value(),
            "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_indexes WHERE schemaname = "
                      "'pgmq' AND tablename = 'a_jobs' AND indexdef LIKE "
                      "'%(archived_at)%'")
                .Value(),
            "1");
  Result meta = db_->Must(
      "SELECT queue_name, is_partitioned, is_unlogged, created_at IS NOT NULL "
      "FROM pgmq.meta");
  ASSERT_EQ(meta.rows.size(), 1u);
  EXPECT_THAT(meta.rows[0], ElementsAre("jobs", "f", "f", "t"));
  EXPECT_EQ(db_->Must("SELECT relpersistence FROM pg_class WHERE oid = "
                      "'pgmq.q_jobs'::regclass")
                .Value(),
            "p");
}

TEST_F(PgmqCompatTest, CreateUnlogged_MakesAnUnloggedLiveTable) {
  db_->Must("SELECT pgmq.create_unlogged('fast')");
  EXPECT_EQ(db_->Must("SELECT relpersistence FROM pg_class WHERE oid = "
                      "'pgmq.q_fast'::regclass")
                .Value(),
            "u");
  EXPECT_EQ(db_->Must("SELECT is_unlogged FROM pgmq.meta WHERE queue_name = "
                      "'fast'")
                .Value(),
            "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('fast', '{}')").Value(), "1");
}

TEST_F(PgmqCompatTest, CreateNonPartitioned_IsCreate) {
  db_->Must("SELECT pgmq.create_non_partitioned('plain')");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.list_queues() WHERE "
                      "queue_name = 'plain'")
                .Value(),
            "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('plain', '{}')").Value(), "1");
}

TEST_F(PgmqCompatTest, CreateAndDrop_TakeAnAdvisoryLockUntilCommit) {
  std::unique_ptr<Connection> other = Second();
  ASSERT_NE(other, nullptr);
  const std::string locks =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
      "granted AND pid = $1";
  const std::string pid = std::to_string(other->BackendPid());
  other->Must("BEGIN");
  other->Must("SELECT pgmq.create('locked')");
  EXPECT_NE(db_->Must(locks, {pid}).Value(), "0");
  other->Must("COMMIT");
  EXPECT_EQ(db_->Must(locks, {pid}).Value(), "0");
  other->Must("BEGIN");
  other->Must("SELECT pgmq.drop_queue('locked')");
  EXPECT_NE(db_->Must(locks, {pid}).Value(), "0");
  other->Must("COMMIT");
  EXPECT_EQ(db_->Must(locks, {pid}).Value(), "0");
}

TEST_F(PgmqCompatTest, QueueNames_AreCaseFolded) {
  db_->Must("SELECT pgmq.create('MixedCase')");
  EXPECT_EQ(
      db_->Must("SELECT pgmq.format_table_name('MixedCase', 'q')").Value(),
      "q_mixedcase");
  EXPECT_EQ(
      db_->Must("SELECT to_regclass('pgmq.q_mixedcase') IS NOT NULL").Value(),
      "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('MIXEDCASE', '{}')").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('mixedcase', '{}')").Value(), "2");
  EXPECT_EQ(
      db_->Must("SELECT count(*) FROM pgmq.read('MixedCase', 30, 10)").Value(),
      "2");
  // The meta row keeps the name as it was given.
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"),
              ElementsAre("MixedCase"));
}

TEST_F(PgmqCompatTest,
       QueueNames_TooLongOrWithForbiddenCharacters_AreRejected) {
  const std::string longest(47, 'n');
  db_->Must("SELECT pgmq.create($1)", {longest});
  EXPECT_EQ(db_->Must("SELECT pgmq.send($1, '{}')", {longest}).Value(), "1");
  EXPECT_EQ(
      db_->Must("SELECT queue_length FROM pgmq.metrics($1)", {longest}).Value(),
      "1");

  Result too_long = db_->Exec("SELECT pgmq.create($1)", {longest + "n"});
  EXPECT_FALSE(too_long.ok);
  EXPECT_THAT(too_long.error, HasSubstr("too long"));
  EXPECT_FALSE(
      db_->Exec("SELECT pgmq.validate_queue_name($1)", {longest + "n"}).ok);
  EXPECT_TRUE(db_->Exec("SELECT pgmq.validate_queue_name($1)", {longest}).ok);

  for (const std::string bad : {"a$b", "a;b", "a--b", "a'b"}) {
    Result created = db_->Exec("SELECT pgmq.create($1)", {bad});
    EXPECT_FALSE(created.ok) << bad;
    EXPECT_THAT(created.error, HasSubstr("invalid characters")) << bad;
    EXPECT_FALSE(db_->Exec("SELECT pgmq.format_table_name($1, 'q')", {bad}).ok)
        << bad;
  }
  // Nothing but the valid queue exists.
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.meta").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pg_tables WHERE schemaname = "
                      "'pgmq' AND tablename <> 'meta'")
                .Value(),
            "2");
}

TEST_F(PgmqCompatTest, ListQueues_ReturnsTheMetaRows) {
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"), IsEmpty());
  db_->Must("SELECT pgmq.create('b_queue')");
  db_->Must("SELECT pgmq.create_unlogged('a_queue')");
  Result queues = db_->Must(
      "SELECT queue_name, is_partitioned, is_unlogged, created_at <= now() "
      "FROM pgmq.list_queues() ORDER BY queue_name");
  ASSERT_EQ(queues.rows.size(), 2u);
  EXPECT_THAT(queues.rows[0], ElementsAre("a_queue", "f", "t", "t"));
  EXPECT_THAT(queues.rows[1], ElementsAre("b_queue", "f", "f", "t"));
}

TEST_F(PgmqCompatTest, DropQueue_RemovesBothTablesAndTheMetaRow) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('kept')");
  db_->Must("SELECT pgmq.send('jobs', '{}')");
  db_->Must("SELECT pgmq.archive('jobs', 1::bigint)");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT to_regclass('pgmq.q_jobs') IS NULL AND "
                      "to_regclass('pgmq.a_jobs') IS NULL")
                .Value(),
            "t");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.meta"), ElementsAre("kept"));
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "f");
  EXPECT_FALSE(db_->Exec("SELECT pgmq.send('jobs', '{}')").ok);

  // Created again, the queue starts empty with fresh ids.
  db_->Must("SELECT pgmq.create('jobs')");
  EXPECT_EQ(db_->Must("SELECT pgmq.send('jobs', '{}')").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "0");
}

// sluice.create_queue (SECURITY DEFINER) calls pgmq.create with
// search_path = pg_catalog, pg_temp.
TEST_F(PgmqCompatTest, Functions_WorkWithARestrictedSearchPath) {
  db_->Must("SET search_path = pg_catalog, pg_temp");
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create_unlogged('fast')");
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"k\":1}', '{\"k\":2}']::jsonb[], 0)"),
              ElementsAre("1", "2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5, "
                  "'{\"k\":2}')"),
              ElementsAre("2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.set_vt('jobs', 2, 0)"),
              ElementsAre("2"));
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(
      db_->Must("SELECT total_messages FROM pgmq.metrics('jobs')").Value(),
      "2");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.metrics_all()").Value(), "2");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('jobs')").Value(), "t");
}

TEST_F(PgmqCompatTest, Functions_OnAMissingQueue_FailNamingTheTable) {
  Result sent = db_->Exec("SELECT pgmq.send('ghost', '{}')");
  EXPECT_FALSE(sent.ok);
  EXPECT_THAT(sent.error, HasSubstr("q_ghost"));
  EXPECT_FALSE(db_->Exec("SELECT pgmq.read('ghost', 30, 1)").ok);
  EXPECT_FALSE(db_->Exec("SELECT pgmq.metrics('ghost')").ok);
}

// Where Sluice's SQL is stricter than pgmq 1.5.1 (docs/pgmq.md lists the
// differences); the real pgmq fails these.

TEST_F(PgmqCompatTest, Stricter_CaseVariantsOfOneName_ShareOneMetaRow) {
  db_->Must("SELECT pgmq.create('MixedCase')");
  db_->Must("SELECT pgmq.create('MIXEDCASE')");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"),
              ElementsAre("MixedCase"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.metrics_all()").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.drop_queue('mixedcase')").Value(), "t");
  EXPECT_THAT(Ids("SELECT queue_name FROM pgmq.list_queues()"), IsEmpty());
}

TEST_F(PgmqCompatTest, Stricter_EmptyQueueName_IsRejected) {
  Result created = db_->Exec("SELECT pgmq.create('')");
  EXPECT_FALSE(created.ok);
  EXPECT_THAT(created.error, HasSubstr("must not be empty"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.meta").Value(), "0");
}

TEST_F(PgmqCompatTest, Stricter_SendBatch_HeadersOfAnotherLength_AreRejected) {
  db_->Must("SELECT pgmq.create('jobs')");
  Result sent = db_->Exec(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}']::jsonb[], "
      "ARRAY['{}']::jsonb[])");
  EXPECT_FALSE(sent.ok);
  EXPECT_THAT(sent.error, HasSubstr("one header per message"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "0");
}

}  // namespace
}  // namespace sluice::pgmq_testing
