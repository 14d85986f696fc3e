// The pgmq-compatible SQL's messages: send, read, pop, visibility,
// archive, delete, purge and metrics. Queues are in
// pgmq_compat_queues_test.cc; the fixture is in
// support/pgmq_compat_fixture.h.
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

TEST_F(PgmqCompatTest, Send_EveryOverload_ReturnsIncreasingIds) {
  db_->Must("SELECT pgmq.create('jobs')");
  std::vector<std::string> ids;
  for (const char* call : {
           "SELECT * FROM pgmq.send('jobs', '{\"n\":1}')",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":2}', 0)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":3}', now())",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":4}', '{\"h\":4}'::jsonb)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":5}', '{\"h\":5}'::jsonb, "
           "0)",
           "SELECT * FROM pgmq.send('jobs', '{\"n\":6}', '{\"h\":6}'::jsonb, "
           "now())",
       }) {
    ids.push_back(db_->Must(call).Value());
  }
  EXPECT_THAT(ids, ElementsAre("1", "2", "3", "4", "5", "6"));
  Result rows = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', headers->>'h', "
      "enqueued_at <= clock_timestamp() FROM pgmq.q_jobs ORDER BY msg_id");
  ASSERT_EQ(rows.rows.size(), 6u);
  EXPECT_THAT(rows.rows[0], ElementsAre("1", "0", "1", std::nullopt, "t"));
  EXPECT_THAT(rows.rows[3], ElementsAre("4", "0", "4", "4", "t"));
  EXPECT_THAT(rows.rows[5], ElementsAre("6", "0", "6", "6", "t"));
}

TEST_F(PgmqCompatTest, Send_WithDelay_HidesTheMessageUntilThen) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.send('jobs', '{}', now() + interval '1 hour')");
  db_->Must("SELECT pgmq.send('jobs', '{}', '{}'::jsonb, 3600)");
  db_->Must(
      "SELECT pgmq.send('jobs', '{}', '{}'::jsonb, now() + interval '1 hour')");
  db_->Must("SELECT pgmq.send('jobs', '{}', now() - interval '1 hour')");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("5"));
  // Integer delays count seconds from now.
  EXPECT_EQ(db_->Must("SELECT bool_and(vt - clock_timestamp() BETWEEN "
                      "interval '3590 s' AND interval '3600 s') FROM "
                      "pgmq.q_jobs WHERE msg_id IN (1, 3)")
                .Value(),
            "t");
}

TEST_F(PgmqCompatTest, SendBatch_EveryOverload_KeepsArrayOrder) {
  db_->Must("SELECT pgmq.create('jobs')");
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":1}', '{\"n\":2}', '{\"n\":3}']::jsonb[])"),
              ElementsAre("1", "2", "3"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":4}', '{\"n\":5}']::jsonb[], 3600)"),
              ElementsAre("4", "5"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":6}']::jsonb[], now() + interval '1 hour')"),
              ElementsAre("6"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":7}', '{\"n\":8}']::jsonb[], "
                  "ARRAY['{\"h\":7}', '{\"h\":8}']::jsonb[])"),
              ElementsAre("7", "8"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":9}']::jsonb[], ARRAY['{\"h\":9}']::jsonb[], "
                  "3600)"),
              ElementsAre("9"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY['{\"n\":10}']::jsonb[], ARRAY['{\"h\":10}']::jsonb[], "
                  "now() + interval '1 hour')"),
              ElementsAre("10"));
  // Each message kept its own body and header.
  EXPECT_EQ(db_->Must("SELECT bool_and(message->>'n' = msg_id::text AND "
                      "coalesce(headers->>'h', msg_id::text) = msg_id::text) "
                      "FROM pgmq.q_jobs")
                .Value(),
            "t");
  // Only the undelayed ones are visible.
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 100)"),
              ElementsAre("1", "2", "3", "7", "8"));
  EXPECT_THAT(Ids("SELECT * FROM pgmq.send_batch('jobs', "
                  "ARRAY[]::jsonb[])"),
              IsEmpty());
}

TEST_F(PgmqCompatTest, Read_TakesVisibleMessagesInIdOrder) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"n\":1}', '{\"n\":2}', "
      "'{\"n\":3}']::jsonb[])");
  Result first = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', vt - clock_timestamp() BETWEEN "
      "interval '25 s' AND interval '30 s' FROM pgmq.read('jobs', 30, 2)");
  ASSERT_EQ(first.rows.size(), 2u);
  EXPECT_THAT(first.rows[0], ElementsAre("1", "1", "1", "t"));
  EXPECT_THAT(first.rows[1], ElementsAre("2", "1", "2", "t"));
  // The stored row changed the same way.
  EXPECT_EQ(db_->Must("SELECT read_ct || ' ' || (vt > clock_timestamp()) FROM "
                      "pgmq.q_jobs WHERE msg_id = 1")
                .Value(),
            "1 true");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5)"),
              ElementsAre("3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 5)"), IsEmpty());

  // Visible again after vt 0; read_ct counts every read.
  db_->Must("SELECT pgmq.set_vt('jobs', 1, 0)");
  Result again =
      db_->Must("SELECT msg_id, read_ct FROM pgmq.read('jobs', 0, 5)");
  ASSERT_EQ(again.rows.size(), 1u);
  EXPECT_THAT(again.rows[0], ElementsAre("1", "2"));
  // A vt of 0 leaves it visible at once.
  EXPECT_THAT(Ids("SELECT read_ct FROM pgmq.read('jobs', 0, 5)"),
              ElementsAre("3"));
}

TEST_F(PgmqCompatTest, Read_SkipsRowsLockedByAnotherConnection) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}']::jsonb[])");
  std::unique_ptr<Connection> other = Second();
  ASSERT_NE(other, nullptr);
  other->Must("BEGIN");
  other->Must("SELECT * FROM pgmq.q_jobs WHERE msg_id = 1 FOR UPDATE");
  db_->Must("SET lock_timeout = '5s'");  // a blocked read fails, not hangs
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2", "3"));
  // A reader in another transaction also skips what `other` read.
  other->Must("COMMIT");
  other->Must("BEGIN");
  db_->Must("SELECT pgmq.set_vt('jobs', 2, 0)");
  EXPECT_THAT(
      other->Must("SELECT msg_id FROM pgmq.read('jobs', 30, 1)").Column(),
      ElementsAre("1"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2"));
  other->Must("ROLLBACK");
  // The rolled-back read left message 1 as it was.
  EXPECT_THAT(Ids("SELECT msg_id || ':' || read_ct FROM pgmq.read('jobs', 30, "
                  "10)"),
              ElementsAre("1:1"));
}

TEST_F(PgmqCompatTest, Read_Conditional_FiltersByJsonContainment) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"k\":\"a\",\"x\":1}', "
      "'{\"k\":\"b\"}', '{\"k\":\"a\"}', '[1,2]']::jsonb[])");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10, "
                  "'{\"k\":\"a\"}')"),
              ElementsAre("1", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10, "
                  "'{\"k\":\"zzz\"}')"),
              IsEmpty());
  // The default '{}' takes everything left, non-objects included.
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2", "4"));
}

TEST_F(PgmqCompatTest, ReadWithPoll_WaitsForAMessageOrTheTimeLimit) {
  db_->Must("SELECT pgmq.create('jobs')");
  auto started = std::chrono::steady_clock::now();
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 1, 1, "
                  "50)"),
              IsEmpty());
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::seconds(5));

  db_->Must("SELECT pgmq.send('jobs', '{}', 1)");
  started = std::chrono::steady_clock::now();
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5, 5, "
                  "50)"),
              ElementsAre("1"));
  waited = std::chrono::steady_clock::now() - started;
  EXPECT_LT(waited, std::chrono::seconds(4));
  // Defaults and a conditional.
  db_->Must("SELECT pgmq.send('jobs', '{\"k\":1}')");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5)"),
              ElementsAre("2"));
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"k\":1}', "
      "'{\"k\":2}']::jsonb[])");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read_with_poll('jobs', 30, 5, 1, "
                  "100, '{\"k\":2}')"),
              ElementsAre("4"));
}

TEST_F(PgmqCompatTest, Pop_ReturnsAndDeletesTheFirstVisibleMessage) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":1}', 3600)");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":2}')");
  db_->Must("SELECT pgmq.send('jobs', '{\"n\":3}')");
  Result popped =
      db_->Must("SELECT msg_id, message->>'n' FROM pgmq.pop('jobs')");
  ASSERT_EQ(popped.rows.size(), 1u);
  EXPECT_THAT(popped.rows[0], ElementsAre("2", "2"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs ORDER BY msg_id"),
              ElementsAre("1", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.pop('jobs')"), ElementsAre("3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.pop('jobs')"), IsEmpty());
}

TEST_F(PgmqCompatTest, SetVt_MovesOneMessagesVisibility) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}']::jsonb[])");
  Result hidden = db_->Must(
      "SELECT msg_id, read_ct, vt - clock_timestamp() BETWEEN interval '590 s' "
      "AND interval '600 s' FROM pgmq.set_vt('jobs', 1, 600)");
  ASSERT_EQ(hidden.rows.size(), 1u);
  EXPECT_THAT(hidden.rows[0], ElementsAre("1", "0", "t"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("2"));
  db_->Must("SELECT pgmq.set_vt('jobs', 1, 0)");
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.read('jobs', 30, 10)"),
              ElementsAre("1"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.set_vt('jobs', 999, 0)"), IsEmpty());
}

TEST_F(PgmqCompatTest, Archive_MovesRowsToTheArchiveTable) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{\"n\":1}', '{\"n\":2}', "
      "'{\"n\":3}', '{\"n\":4}']::jsonb[], ARRAY['{\"h\":1}', "
      "'{\"h\":2}', '{\"h\":3}', '{\"h\":4}']::jsonb[])");
  db_->Must("SELECT pgmq.read('jobs', 30, 1)");  // message 1: read_ct 1
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 1::bigint)").Value(), "f");
  EXPECT_EQ(db_->Must("SELECT pgmq.archive('jobs', 999::bigint)").Value(), "f");
  std::vector<std::string> moved =
      Ids("SELECT * FROM pgmq.archive('jobs', ARRAY[2, 3, 999]::bigint[])");
  std::sort(moved.begin(), moved.end());
  EXPECT_THAT(moved, ElementsAre("2", "3"));

  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs"), ElementsAre("4"));
  Result archived = db_->Must(
      "SELECT msg_id, read_ct, message->>'n', headers->>'h', "
      "archived_at >= enqueued_at FROM pgmq.a_jobs ORDER BY msg_id");
  ASSERT_EQ(archived.rows.size(), 3u);
  EXPECT_THAT(archived.rows[0], ElementsAre("1", "1", "1", "1", "t"));
  EXPECT_THAT(archived.rows[1], ElementsAre("2", "0", "2", "2", "t"));
  EXPECT_THAT(archived.rows[2], ElementsAre("3", "0", "3", "3", "t"));
  // Archiving keeps ids unique per queue: new messages get new ids.
  EXPECT_EQ(db_->Must("SELECT pgmq.send('jobs', '{}')").Value(), "5");
}

TEST_F(PgmqCompatTest, Delete_RemovesMessages) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}', "
      "'{}']::jsonb[])");
  EXPECT_EQ(db_->Must("SELECT pgmq.delete('jobs', 1::bigint)").Value(), "t");
  EXPECT_EQ(db_->Must("SELECT pgmq.delete('jobs', 1::bigint)").Value(), "f");
  std::vector<std::string> deleted =
      Ids("SELECT * FROM pgmq.delete('jobs', ARRAY[2, 3, 999]::bigint[])");
  std::sort(deleted.begin(), deleted.end());
  EXPECT_THAT(deleted, ElementsAre("2", "3"));
  EXPECT_THAT(Ids("SELECT msg_id FROM pgmq.q_jobs"), ElementsAre("4"));
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "0");
}

TEST_F(PgmqCompatTest, PurgeQueue_DeletesEveryLiveMessage) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}']::jsonb[])");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.archive('jobs', 1::bigint)");
  EXPECT_EQ(db_->Must("SELECT pgmq.purge_queue('jobs')").Value(), "3");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.q_jobs").Value(), "0");
  EXPECT_EQ(db_->Must("SELECT count(*) FROM pgmq.a_jobs").Value(), "1");
  EXPECT_EQ(db_->Must("SELECT pgmq.purge_queue('jobs')").Value(), "0");
}

TEST_F(PgmqCompatTest, Metrics_CountLiveVisibleAndTotalMessages) {
  db_->Must("SELECT pgmq.create('jobs')");
  db_->Must("SELECT pgmq.create('idle')");
  Result empty = db_->Must(
      "SELECT queue_name, queue_length, newest_msg_age_sec, "
      "oldest_msg_age_sec, total_messages, scrape_time IS NOT NULL, "
      "queue_visible_length FROM pgmq.metrics('idle')");
  ASSERT_EQ(empty.rows.size(), 1u);
  EXPECT_THAT(empty.rows[0], ElementsAre("idle", "0", std::nullopt,
                                         std::nullopt, "0", "t", "0"));

  db_->Must(
      "SELECT pgmq.send_batch('jobs', ARRAY['{}', '{}', '{}', "
      "'{}']::jsonb[])");
  db_->Must("SELECT pgmq.send('jobs', '{}', 3600)");
  db_->Must("SELECT pgmq.read('jobs', 30, 1)");
  db_->Must("SELECT pgmq.delete('jobs', 2::bigint)");
  db_->Must("SELECT pgmq.archive('jobs', 3::bigint)");
  // Live: 1 (read, hidden), 4, 5 (delayed); visible: 4. Sent: 5.
  Result metrics = db_->Must(
      "SELECT queue_name, queue_length, queue_visible_length, total_messages, "
      "oldest_msg_age_sec >= 0, newest_msg_age_sec <= oldest_msg_age_sec "
      "FROM pgmq.metrics('jobs')");
  ASSERT_EQ(metrics.rows.size(), 1u);
  EXPECT_THAT(metrics.rows[0], ElementsAre("jobs", "3", "1", "5", "t", "t"));

  Result all = db_->Must(
      "SELECT queue_name, queue_length, total_messages FROM pgmq.metrics_all() "
      "ORDER BY queue_name");
  ASSERT_EQ(all.rows.size(), 2u);
  EXPECT_THAT(all.rows[0], ElementsAre("idle", "0", "0"));
  EXPECT_THAT(all.rows[1], ElementsAre("jobs", "3", "5"));
}

}  // namespace
}  // namespace sluice::pgmq_testing
