// The Postgres fan-out schema (migration 0005) from outside: a database at
// schema version 4 with a run and its tasks migrates, keeps working and
// takes parked tasks, links and reports (and the runtime role may use
// them); the sweeper's and the relay's reads walk their indexes with stale
// or fresh statistics.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_session.h"
#include "pg_sql_children.h"
#include "pg_values.h"
#include "postgres_jobs_fixture.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using postgres_internal::Session;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string QueryText(const std::string& url, const std::string& sql) {
  return SqlSession(url).Value(sql).value_or("");
}

TEST(PostgresChildrenUpgradeTest, Version4Database_MigratesAndTakesFanOut) {
  if (PostgresTestUrl().empty()) GTEST_SKIP() << kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(/*migrated=*/false);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string url = (*db)->url();
  ASSERT_TRUE(postgres_internal::MigratePostgresTo(url, 4).ok());
  {
    absl::StatusOr<std::unique_ptr<Backend>> v4 = OpenPostgres(url);
    ASSERT_FALSE(v4.ok());  // this build needs a later version
  }
  // What version 4 wrote: a started run with a queued and a started task.
  SqlSession(url).Script(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) VALUES ('" +
      RunNo(1).ToString() +
      "', 'jobs', 'started', 1, '', now(), '{}'); "
      "INSERT INTO sluice.tasks (run_id, step_index, task_index, flow_slug, "
      "status, attempts, error, queue_name, message_id, queued_at, "
      "requeued_count, worker_id, input) VALUES ('" +
      RunNo(1).ToString() +
      "', 0, 0, 'jobs', 'queued', 0, '', 'jobs_q', 1, now(), 0, '', '1'), "
      "('" +
      RunNo(1).ToString() +
      "', 0, 1, 'jobs', 'started', 1, '', 'jobs_q', 2, now(), 0, 'w1', '2')");

  ASSERT_TRUE(MigratePostgres(url).ok());
  absl::StatusOr<SchemaReport> report = CheckPostgresSchema(url);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->ToString();
  EXPECT_EQ(report->installed_version, LatestPostgresSchemaVersion());
  EXPECT_EQ(QueryText(url,
                      "SELECT count(*) FROM pg_indexes WHERE schemaname = "
                      "'sluice' AND indexname = 'tasks_unfinished'"),
            "0");
  for (const char* table : {"sluice.child_links", "sluice.child_reports"}) {
    for (const char* privilege : {"SELECT", "INSERT", "UPDATE", "DELETE"}) {
      EXPECT_EQ(QueryText(url, StrCat("SELECT has_table_privilege("
                                      "'sluice_runtime', '",
                                      table, "', '", privilege, "')")),
                "t")
          << table << " " << privilege;
    }
  }
  EXPECT_EQ(QueryText(url,
                      "SELECT has_sequence_privilege('sluice_runtime', "
                      "pg_get_serial_sequence('sluice.child_reports', "
                      "'report_id'), 'USAGE')"),
            "t");

  absl::StatusOr<std::unique_ptr<Backend>> backend = OpenPostgres(url);
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::unique_ptr<Transaction>> tx = (*backend)->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status();
  std::vector<TaskRecord> tasks = ValueOf((*tx)->ListTasks(RunNo(1)));
  ASSERT_EQ(tasks.size(), 2u);
  TaskUpdate park{.task = tasks[1],
                  .expected_status = TaskStatus::kStarted,
                  .expected_attempts = 1};
  park.task.status = TaskStatus::kWaiting;
  EXPECT_THAT(ValueOf((*tx)->UpdateTasks({&park, 1})), ElementsAre(true));
  std::vector<TaskRecord> unfinished =
      ValueOf((*tx)->GetUnfinishedTasks(RunNo(1), 0, Fields::kAll));
  ASSERT_EQ(unfinished.size(), 2u);
  EXPECT_EQ(unfinished[1].status, TaskStatus::kWaiting);
  ChildLinkRecord link{.parent = park.task.key,
                       .child_index = 0,
                       .child_run_id = RunNo(2),
                       .pending_since = At(0),
                       .spec = J(R"({"flow":"child"})")};
  EXPECT_TRUE((*tx)->InsertChildLinks({&link, 1}).ok());
  EXPECT_EQ(ValueOf((*tx)->CountChildLinks(park.task.key, 10)).pending, 1);
  ChildReport child_report{.parent = park.task.key, .child_run_id = RunNo(2)};
  EXPECT_EQ(ValueOf((*tx)->AppendChildReports({&child_report, 1})).size(), 1u);
  EXPECT_TRUE((*tx)->Commit().ok());
}

// 20,000 links under 200 parents (1% pending, 1% owed a cancel) and 20,000
// reports.
TEST_F(PostgresJobsTest, ChildQueries_WalkTheirIndexes_WithAnyStatistics) {
  Execute("ANALYZE");  // statistics that say "empty"
  std::vector<RunRecord> runs;
  std::vector<TaskRecord> tasks;
  for (int r = 1; r <= 200; ++r) {
    runs.push_back(MakeRun(r));
    tasks.push_back(MakeTask(r, 0));
    tasks.back().status = TaskStatus::kWaiting;
  }
  ASSERT_TRUE(Insert(runs).ok());
  std::vector<ChildLinkRecord> links;
  std::vector<ChildReport> reports;
  for (const TaskRecord& task : tasks) {
    for (int i = 0; i < 100; ++i) {
      ChildLinkRecord& link =
          links.emplace_back(ChildLinkRecord{.parent = task.key,
                                             .child_index = i,
                                             .child_run_id = RunId::Random(),
                                             .status = ChildStatus::kCompleted,
                                             .cascaded = true,
                                             .pending_since = At(i),
                                             .spec = J("{}")});
      if (i == 0) link.status = ChildStatus::kPending;
      if (i == 1) {
        link.status = ChildStatus::kCancelled;
        link.cascaded = false;
      }
      reports.push_back({.parent = task.key,
                         .child_index = i,
                         .child_run_id = link.child_run_id,
                         .created_at = At(i)});
    }
  }
  ASSERT_TRUE(
      InTransaction([&](Transaction& tx) {
        if (absl::Status s = tx.InsertTasks(std::span(tasks)); !s.ok()) {
          return s;
        }
        if (absl::Status s = tx.InsertChildLinks(std::span(links)); !s.ok()) {
          return s;
        }
        return tx.AppendChildReports(reports).status();
      }).ok());

  absl::StatusOr<Session> session = Session::Open(db_->url());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(
      session->Execute("SET plan_cache_mode = force_custom_plan", "set").ok());
  const std::string before = postgres_internal::FormatTimestamp(At(50));
  const std::string now = postgres_internal::FormatTimestamp(At(1000));
  namespace sql = postgres_internal::sql;
  for (bool analyzed : {false, true}) {
    if (analyzed) Execute("ANALYZE");
    SCOPED_TRACE(analyzed ? "fresh statistics" : "stale statistics");
    std::string plan =
        PlanText(*session, sql::kTakeStaleChildLinks, {before, now, "512"});
    EXPECT_THAT(plan, HasSubstr("child_links_pending")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;

    plan = PlanText(*session, sql::kFindUncascadedChildLinks, {"512"});
    EXPECT_THAT(plan, HasSubstr("child_links_uncascaded")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;

    plan = PlanText(*session, sql::kPeekChildReports, {"100", "500"});
    EXPECT_THAT(plan, HasSubstr("child_reports_pkey")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Sort"))) << plan;

    const std::string parent = tasks[7].key.run_id.ToString();
    plan = PlanText(*session, sql::kSettleChildLinks,
                    {"{" + parent + "}", "{0}", "{0}", "{0}", "{completed}",
                     "{null}", "{\"\"}", "{t}"});
    // One entry by the whole key: the primary key, or child_links_by_status
    // (which ends with child_index), never a walk of a parent's links.
    EXPECT_THAT(plan, HasSubstr("child_index = s.child_index)")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Filter: (child_index"))) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan on child_links"))) << plan;

    plan = PlanText(*session, sql::kCountChildLinks, {parent, "0", "0", "1"});
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
  }
}

}  // namespace
}  // namespace sluice::testing
