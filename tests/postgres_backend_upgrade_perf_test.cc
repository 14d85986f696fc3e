// Upgrading to migrations 0007, 0013 and 0015 (fillfactor on the hot
// tables): a database at version 6 with a run migrates, keeps its run, and
// its hot tables leave room on each page for HOT updates; a queue that
// existed at version 14, and one created after, leave room on each page for
// their claimed messages.
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "pg_session.h"
#include "postgres_jobs_fixture.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

class PostgresPerfUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  }
};

std::string FillFactor(const std::string& url, const std::string& table) {
  return SqlSession(url)
      .Value(
          "SELECT coalesce(array_to_string(reloptions, ','), '') FROM "
          "pg_class WHERE oid = '" +
          table + "'::regclass")
      .value_or("<missing>");
}

TEST_F(PostgresPerfUpgradeTest, Version6Database_Migrates_KeepsRuns) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 6).ok());
  EXPECT_EQ(FillFactor(url, "sluice.step_states"), "");
  SqlSession(url).Script(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) VALUES "
      "('01900000-0000-7000-8000-000000000001', 'jobs', 'started', 1, '', "
      "now(), '{}')");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());
  EXPECT_EQ(FillFactor(url, "sluice.runs"), "fillfactor=70");
  EXPECT_EQ(FillFactor(url, "sluice.step_states"), "fillfactor=30");
  EXPECT_EQ(FillFactor(url, "sluice.tasks"), "fillfactor=40");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  std::optional<RunRecord> run = ValueOf(
      (*tx)->GetRuns(std::vector{RunNo(1)}, LockMode::kNone, Fields::kAll))[0];
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, RunStatus::kStarted);
  ASSERT_TRUE((*tx)->Commit().ok());
}

TEST_F(PostgresPerfUpgradeTest, Version14Queue_Migrates_LeavesRoomForClaims) {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 14).ok());
  SqlSession(url).Script(
      "INSERT INTO sluice.queues (name, owner_flow, created_at) VALUES "
      "('old_q', '', now()); SELECT sluice.create_queue('old_q')");
  EXPECT_EQ(FillFactor(url, "pgmq.q_old_q"), "");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(FillFactor(url, "pgmq.q_old_q"), "fillfactor=50");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  ASSERT_TRUE(
      (*tx)->CreateQueue({.name = "new_q", .created_at = absl::Now()}).ok());
  ASSERT_TRUE((*tx)->Commit().ok());
  EXPECT_EQ(FillFactor(url, "pgmq.q_new_q"), "fillfactor=50");
  // The archive is written once per message and never updated.
  EXPECT_EQ(FillFactor(url, "pgmq.a_new_q"), "");
}

}  // namespace
}  // namespace sluice::testing
