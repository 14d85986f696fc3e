// The Postgres job schema (migration 0003) from outside: the claim and the
// next-visible lookup walk indexes instead of sorting the queue, a database
// at schema version 2 with a queue and messages migrates and keeps working,
// and Sluice's queue tables keep pgmq's exact row shape, so pgmq's own
// functions (pop and set_vt return `RETURNING *` as pgmq.message_record)
// still work on them. The statements that check a batch's runs exist and
// that write step states look each row up by key whatever the statistics
// say, and the statements that keep a generic plan use their indexes even
// when it was made on empty tables.
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pg_one_row.h"
#include "pg_queue_sql.h"
#include "pg_sql.h"
#include "pg_sql_counters.h"
#include "pg_sql_tasks.h"
#include "pg_values.h"
#include "postgres_jobs_fixture.h"
#include "support/postgres_sql.h"

namespace sluice::testing {
namespace {

using postgres_internal::Session;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Whether `plan` has a Sort node (not just a "Sort Key" line).
bool SortsRows(const std::string& plan) {
  return absl::StrContains(plan, "Sort  (");
}

int Occurrences(const std::string& plan, std::string_view what) {
  int count = 0;
  for (size_t at = plan.find(what); at != std::string::npos;
       at = plan.find(what, at + what.size())) {
    ++count;
  }
  return count;
}

// Whether every index scan in `plan` is one of `scans`, each written as
// the plan names it (" using INDEX " or "Bitmap Index Scan on INDEX ").
bool ScansOnly(const std::string& plan,
               std::initializer_list<std::string_view> scans) {
  int ours = 0;
  for (std::string_view scan : scans) ours += Occurrences(plan, scan);
  return ours == Occurrences(plan, " using ") +
                     Occurrences(plan, "Bitmap Index Scan on ");
}

// The walks of runs_by_flow_status_start down one flow's runs of a status
// (not the probes of a skip scan, which look for the next flow), or -1 if
// the plan uses an index other than that one and the primary key.
int FlowStatusWalks(const std::string& plan) {
  if (!ScansOnly(plan,
                 {" using runs_by_flow_status_start ", " using runs_pkey ",
                  "Bitmap Index Scan on runs_pkey "})) {
    return -1;
  }
  return Occurrences(plan, "Index Cond: ((flow_slug = ");
}

// The walks of runs_by_flow_finish down one flow's ended runs, or -1 if the
// plan reads runs by any other index than that, the primary key and the
// skip scan's.
int FlowFinishWalks(const std::string& plan) {
  if (!ScansOnly(plan,
                 {" using runs_by_flow_finish ",
                  "Bitmap Index Scan on runs_by_flow_finish ",
                  " using runs_by_flow_status_start ", " using runs_pkey ",
                  "Bitmap Index Scan on runs_pkey "})) {
    return -1;
  }
  return Occurrences(plan, "Index Cond: (flow_slug = f.flow_slug)") +
         Occurrences(plan, "Index Cond: ((flow_slug = f.flow_slug) AND");
}

// A session of `url` that has run `setup`.
absl::StatusOr<Session> SessionAfter(const std::string& url,
                                     std::string_view setup) {
  absl::StatusOr<Session> session = Session::Open(url);
  if (!session.ok()) return session.status();
  absl::Status set = session->Execute(setup, "session setup");
  if (!set.ok()) return set;
  return session;
}

// A session of `url` that plans with `plan_cache_mode = mode`.
absl::StatusOr<Session> SessionPlanning(const std::string& url,
                                        std::string_view mode) {
  return SessionAfter(url, StrCat("SET plan_cache_mode = ", mode));
}

// A session of `url` in the mode the backend runs its generic-plan
// statements in (pg_sql.h kGenericPlans: generic plans, no sequential scans).
absl::StatusOr<Session> GenericPlanSession(const std::string& url) {
  return SessionAfter(url, postgres_internal::sql::kGenericPlans);
}

// The plan of `sql` prepared, then executed with `arguments` (SQL
// literals, comma-separated): in generic mode, the plan the session keeps.
std::string PreparedPlanText(postgres_internal::Session& session,
                             std::string_view sql, std::string_view arguments) {
  EXPECT_TRUE(
      session.Execute(StrCat("PREPARE explained AS ", sql), "prepare").ok())
      << sql;
  const std::string text =
      PlanText(session, StrCat("EXECUTE explained(", arguments, ")"), {});
  EXPECT_TRUE(session.Execute("DEALLOCATE explained", "deallocate").ok());
  return text;
}

// The plan a session in generic mode keeps for `sql`: prepared, then
// explained for `params` (literals), which shows the generic plan.
std::string GenericPlanText(postgres_internal::Session& session,
                            std::string_view sql,
                            const std::vector<std::string>& params) {
  std::string arguments;
  for (size_t i = 0; i < params.size(); ++i) {
    StrAppend(&arguments, i == 0 ? "" : ", ", "'", params[i], "'");
  }
  return PreparedPlanText(session, sql, arguments);
}

// Expects `plan` to choose a claim's messages from the three partial
// indexes of migration 0017: the ready ones walked in claim order straight
// into their locks (no sort), the due delayed and read ones by vt, and
// never a scan of the queue.
void ExpectChoosesByThePartialIndexes(const std::string& plan) {
  const std::vector<std::string> lines = absl::StrSplit(plan, '\n');
  // The node above the walk, past the paused queue's one-time filter.
  bool ready_locked_in_order = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!absl::StrContains(lines[i],
                           "Index Scan using q_plans_sluice_ready ")) {
      continue;
    }
    for (size_t j = i; j-- > 0;) {
      if (!absl::StrContains(lines[j], "(cost=") ||
          absl::StrContains(lines[j], "Result  (")) {
        continue;
      }
      ready_locked_in_order = absl::StrContains(lines[j], "LockRows  (");
      break;
    }
  }
  EXPECT_TRUE(ready_locked_in_order) << plan;
  EXPECT_THAT(plan, HasSubstr("q_plans_sluice_delayed")) << plan;
  EXPECT_THAT(plan, HasSubstr("q_plans_sluice_read")) << plan;
  EXPECT_THAT(plan, Not(HasSubstr("Seq Scan on q_plans"))) << plan;
  // The due ones the vt indexes gave (at most 10,000 each) are then looked
  // up by key, never found again by filtering the whole due range.
  EXPECT_GE(Occurrences(plan, "Index Cond: (msg_id = ANY"), 2) << plan;
  EXPECT_THAT(plan, Not(HasSubstr("AND (msg_id = ANY"))) << plan;
}

// The claim's choice keeps a generic plan, made once per connection, so it
// must walk the same indexes whatever the queue held when it was made:
// nothing, a head of delayed messages (scheduled jobs, retries, Wait steps)
// before a few visible ones, or half the messages visible.
TEST_F(PostgresJobsTest, ClaimsChoice_WalksThePartialIndexes_OnAGenericPlan) {
  CreateQueue("plans");
  const std::vector<std::string> fillings = {
      "",
      "INSERT INTO pgmq.q_plans (vt, message, headers) SELECT now() + CASE "
      "WHEN i <= 20000 THEN interval '1 hour' ELSE interval '-1 hour' END, "
      "'{}', jsonb_build_object('sluice_priority', 0, 'sluice_seq', "
      "nextval('sluice.message_seq')) FROM generate_series(1, 20010) AS i; "
      "UPDATE pgmq.q_plans SET read_ct = 1 WHERE msg_id % 100 = 0",
      "DELETE FROM pgmq.q_plans; INSERT INTO pgmq.q_plans (vt, message, "
      "headers) SELECT now() + CASE WHEN i % 2 = 0 THEN interval '1 hour' "
      "ELSE interval '-1 hour' END, '{}', jsonb_build_object("
      "'sluice_priority', i % 10, 'sluice_seq', "
      "nextval('sluice.message_seq')) FROM generate_series(1, 20000) AS i"};
  const postgres_internal::QueueSql queue("plans");
  const std::string now = postgres_internal::FormatTimestamp(absl::Now());
  const std::string later = "2100-01-01 00:00:00+00";
  for (const std::string& filling : fillings) {
    SCOPED_TRACE(filling.empty() ? "empty" : filling.substr(0, 60));
    if (!filling.empty()) Execute(filling);
    Execute("ANALYZE");
    absl::StatusOr<Session> session = GenericPlanSession(db_->url());
    ASSERT_TRUE(session.ok()) << session.status();
    for (const std::string* read :
         {&queue.read_all, &queue.read_no_payloads, &queue.read_with_tasks_all,
          &queue.read_with_tasks_state}) {
      EXPECT_TRUE(postgres_internal::sql::WantsGenericPlan(*read));
      ExpectChoosesByThePartialIndexes(
          GenericPlanText(*session, *read, {now, later, "10", "plans"}));
    }
    EXPECT_TRUE(postgres_internal::sql::WantsGenericPlan(queue.claim));
    ExpectChoosesByThePartialIndexes(
        GenericPlanText(*session, queue.claim,
                        {now, later, "{f}", "{0}", "{2030-01-01 00:01:00+00}",
                         "{2030-01-01 00:01:00+00}", "w", "plans", "10"}));
  }
}

TEST_F(PostgresJobsTest,
       NextVisibleAndListings_WalkIndexes_WithStaleOrFreshStatistics) {
  CreateQueue("plans");
  Execute("ANALYZE");
  // 20,000 messages (priorities 0-9, half of them invisible) and runs, first
  // with statistics that say "empty", then with fresh ones.
  Execute(
      "INSERT INTO pgmq.q_plans (vt, message, headers) SELECT now() + "
      "CASE WHEN i % 2 = 0 THEN interval '1 hour' ELSE interval '-1 hour' "
      "END, '{}', jsonb_build_object('sluice_priority', i % 10, "
      "'sluice_seq', nextval('sluice.message_seq')) FROM "
      "generate_series(1, 20000) AS i; "
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, finished_at, input, external_key) SELECT "
      "gen_random_uuid(), 'f' || (i % 5), 'completed', 0, '', now(), now(), "
      "'{}', 'k' || i FROM generate_series(1, 20000) AS i");
  absl::StatusOr<Session> session =
      SessionPlanning(db_->url(), "force_custom_plan");
  ASSERT_TRUE(session.ok()) << session.status();
  const postgres_internal::QueueSql queue("plans");
  const std::string now = "2100-01-01 00:00:00+00";
  for (bool analyzed : {false, true}) {
    if (analyzed) Execute("ANALYZE");
    SCOPED_TRACE(analyzed ? "fresh statistics" : "stale statistics");
    std::string plan = PlanText(*session, queue.next_visible, {now});
    EXPECT_THAT(plan, HasSubstr("q_plans_sluice_delayed")) << plan;
    EXPECT_THAT(plan, HasSubstr("q_plans_sluice_read")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Sort"))) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;

    plan = PlanText(*session, postgres_internal::sql::kFindRunsByKeyAll.view(),
                    {"f1", "{k1,k6}"});
    EXPECT_THAT(plan, HasSubstr("runs_by_external_key")) << plan;
    // Retention: one walk of each flow's ended runs (decision 0091), in
    // the index's order and stopped at the limit once the statistics show
    // how many there are.
    plan = PlanText(*session, postgres_internal::sql::kFindFinishedRuns.view(),
                    {now, "100"});
    EXPECT_EQ(FlowFinishWalks(plan), 1) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
    if (analyzed) {
      EXPECT_THAT(plan, HasSubstr("Scan using runs_by_flow_finish")) << plan;
    }
    // Listing, unfiltered and by one flow, in every order: the plan walks
    // an index in that order and stops at the limit.
    for (auto order :
         {RunQuery::OrderBy::kStartedAt, RunQuery::OrderBy::kFinishedAt}) {
      for (bool newest_first : {true, false}) {
        for (std::string flows : {"", "'f1'"}) {
          RunQuery query{.order_by = order, .newest_first = newest_first};
          if (!flows.empty()) query.flow_slugs = {"f1"};
          plan = PreparedPlanText(
              *session, postgres_internal::sql::ListRuns(query, Fields::kAll),
              StrCat(flows.empty() ? "" : flows + ", ", "50"));
          EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
          // Unfiltered, it walks each flow's runs (by start, of each
          // status), each walk stopped at the limit, and sorts those first
          // rows.
          // Believing a flow has a few dozen runs (stale statistics), the
          // planner may sort a flow's runs instead; a listing is not a hot
          // path.
          if (flows.empty() && order == RunQuery::OrderBy::kStartedAt) {
            EXPECT_EQ(FlowStatusWalks(plan), 4) << plan;
            EXPECT_THAT(plan, Not(HasSubstr("Aggregate"))) << plan;
          } else if (flows.empty()) {
            // By finish, one walk of each flow's ended runs (decision 0091).
            EXPECT_EQ(FlowFinishWalks(plan), 1) << plan;
            EXPECT_THAT(plan, Not(HasSubstr("Aggregate"))) << plan;
          } else if (analyzed) {
            EXPECT_FALSE(SortsRows(plan)) << plan;
          }
        }
      }
    }
  }
}

// The metrics' count, with stale statistics and fresh ones: it starts from
// the queue's ten live messages and looks each one's task up by message, so
// the queue's 20,000 ended tasks are never read.
TEST_F(PostgresJobsTest, CountInFlight_LooksUpTheTasksOfLiveMessages) {
  CreateQueue("plans");
  Execute("ANALYZE");
  Execute(
      "INSERT INTO sluice.tasks (run_id, step_index, task_index, flow_slug, "
      "status, attempts, error, queue_name, message_id, queued_at, "
      "requeued_count, worker_id, input) SELECT gen_random_uuid(), 0, 0, 'f', "
      "CASE WHEN i <= 20000 THEN 'completed' ELSE 'queued' END, 1, '', "
      "'plans', i, now(), 0, '', '{}' FROM generate_series(1, 20010) AS i; "
      "SELECT setval(pg_get_serial_sequence('pgmq.q_plans', 'msg_id'), "
      "20000); "
      "INSERT INTO pgmq.q_plans (vt, message) SELECT now(), '{}' "
      "FROM generate_series(1, 10)");
  absl::StatusOr<Session> session = Session::Open(db_->url());
  ASSERT_TRUE(session.ok()) << session.status();
  const postgres_internal::QueueSql queue("plans");
  for (bool analyzed : {false, true}) {
    if (analyzed) Execute("ANALYZE");
    SCOPED_TRACE(analyzed ? "fresh statistics" : "stale statistics");
    const std::string plan = PlanText(*session, queue.count_in_flight,
                                      {"plans", "2100-01-01 00:00:00+00"});
    EXPECT_THAT(plan, HasSubstr("using tasks_by_message")) << plan;
    EXPECT_THAT(plan, HasSubstr("message_id = m.msg_id")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan on tasks"))) << plan;
  }
}

// The dashboard's run pages behind many newer runs of another status and
// flow: one status (the failed-runs page), several or every one, of one
// flow, several or every flow, newest or oldest first. Even a generic plan
// (what Postgres settles on for a statement executed often) walks
// runs_by_flow_status_start once per flow and status it covers, each walk
// stopped at the limit (decision 0081), instead of walking or sorting every
// run. Every flow is found by a skip scan: a probe of the same index per
// flow.
TEST_F(PostgresJobsTest, ListRunsByStart_WalksFlowStatusIndex_GenericPlan) {
  Execute(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) SELECT gen_random_uuid(), 'f' || (i % 5), "
      "CASE WHEN i <= 100 THEN 'cancelled' WHEN i <= 200 THEN 'failed' "
      "ELSE 'started' END, 0, '', "
      "now() - make_interval(secs => 30000 - i), '{}' "
      "FROM generate_series(1, 30000) AS i; ANALYZE");
  absl::StatusOr<Session> session =
      SessionPlanning(db_->url(), "force_generic_plan");
  ASSERT_TRUE(session.ok()) << session.status();
  struct Case {
    std::vector<std::string> flows;
    std::vector<RunStatus> statuses;
    std::string params;
    int walks;  // branches of the plan, each run once per flow it covers
    bool skip_scan;
  };
  const std::vector<RunStatus> two = {RunStatus::kFailed,
                                      RunStatus::kCancelled};
  const std::vector<Case> cases = {
      {{"f1"}, {RunStatus::kFailed}, "'f1', 'failed', 50", 1, false},
      {{"f1"}, two, "'f1', '{failed,cancelled}', 50", 4, false},
      {{"f1"}, {}, "'f1', 50", 4, false},
      {{"f1", "f2"}, {RunStatus::kFailed}, "'{f1,f2}', 'failed', 50", 1, false},
      {{"f1", "f2"}, two, "'{f1,f2}', '{failed,cancelled}', 50", 4, false},
      {{}, {RunStatus::kFailed}, "'failed', 50", 1, true},
      {{}, two, "'{failed,cancelled}', 50", 4, true},
      {{}, {}, "50", 4, true}};
  for (const Case& c : cases) {
    for (bool newest_first : {true, false}) {
      RunQuery query{.flow_slugs = c.flows,
                     .statuses = c.statuses,
                     .newest_first = newest_first};
      SCOPED_TRACE(StrCat(c.params, newest_first ? ", newest" : ", oldest"));
      const std::string plan = PreparedPlanText(
          *session,
          postgres_internal::sql::ListRuns(query, Fields::kNoPayloads),
          c.params);
      EXPECT_EQ(FlowStatusWalks(plan), c.walks) << plan;
      // Each walk stops at a limit, and so does the page.
      const bool branched = c.walks > 1 || c.flows.size() != 1;
      EXPECT_GE(Occurrences(plan, "Limit"), c.walks + (branched ? 1 : 0))
          << plan;
      // A skip scan's probe is a min() over the index: planned as anything
      // but one step down the index, it would read every run.
      if (c.skip_scan) {
        EXPECT_THAT(
            plan, HasSubstr("Index Only Scan using runs_by_flow_status_start"))
            << plan;
        EXPECT_THAT(plan, Not(HasSubstr("Aggregate"))) << plan;
      }
      EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
      // One flow's walks merge; several flows' first rows are sorted.
      if (c.flows.size() == 1) {
        EXPECT_FALSE(SortsRows(plan)) << plan;
      }
    }
  }
}

// Before the first ANALYZE, Postgres planned `NOT EXISTS (... runs ...)` as
// an anti-join over every run and `s.run_id = ANY($1)` as a scan of every
// step state: each insert and step-state update read whole tables.
TEST_F(PostgresJobsTest,
       RunChecksAndStepStateWrites_LookUpByKey_AnyStatistics) {
  Execute("ANALYZE");
  Execute(
      "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
      "error, started_at, input) SELECT ('01900000-0000-7000-8000-' || "
      "lpad(i::text, 12, '0'))::uuid, 'f', 'started', 1, '', now(), '{}' "
      "FROM generate_series(1, 20000) AS i; "
      "INSERT INTO sluice.step_states (run_id, step_index, step_slug, status, "
      "remaining_deps, error, skip_reason) SELECT run_id, 0, 's', 'created', "
      "0, '', '' FROM sluice.runs");
  absl::StatusOr<Session> session =
      SessionPlanning(db_->url(), "force_custom_plan");
  ASSERT_TRUE(session.ok()) << session.status();
  namespace sql = postgres_internal::sql;
  const std::string runs =
      "{01900000-0000-7000-8000-000000000007,"
      "01900000-0000-7000-8000-000000000009}";
  const std::string ints = "{0,0}", texts = "{a,b}", times = "{NULL,NULL}";
  const std::string runs_exist =
      StrCat(sql::kRunsMustExist.view(), "SELECT 1 FROM runs_exist");
  for (bool analyzed : {false, true}) {
    if (analyzed) Execute("ANALYZE");
    SCOPED_TRACE(analyzed ? "fresh statistics" : "stale statistics");
    std::string plan = PlanText(*session, runs_exist, {runs});
    EXPECT_THAT(plan, HasSubstr("runs_pkey")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
    plan = PlanText(*session, sql::kAddStepCounters, {runs, ints, ints, ints});
    EXPECT_THAT(plan, HasSubstr("Tid Scan on step_states s")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
    plan = PlanText(*session, sql::kUpdateStepStatesAndCounters,
                    {runs, ints, texts, ints, texts, texts, times, times,
                     "{NULL,NULL}", ints, ints});
    EXPECT_THAT(plan, HasSubstr("Tid Scan on step_states s")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
    plan = PlanText(
        *session, sql::kUpdateStepStates,
        {runs, ints, texts, ints, texts, texts, times, times, "{NULL,NULL}"});
    EXPECT_THAT(plan, HasSubstr("Tid Scan on step_states s")) << plan;
    EXPECT_THAT(plan, Not(HasSubstr("Seq Scan"))) << plan;
  }
}

// Statements marked for a generic plan (pg_sql.h) keep the first plan
// their connection makes, so they must use indexes even when that plan was
// made while the tables looked empty: no table scan, and every index scan
// on a table that grows has an index condition.
TEST_F(PostgresJobsTest,
       GenericPlanStatements_UseIndexConditions_WhenPlannedOnEmptyTables) {
  CreateQueue("plans");
  Execute("ANALYZE");
  namespace sql = postgres_internal::sql;
  const postgres_internal::QueueSql queue("plans");
  const std::string run = "{00000000-0000-0000-0000-000000000001}";
  const std::vector<std::string> task_update = {
      run,         "{0}",    "{0}",    "{started}", "{2}", "{\"\"}",
      "{NULL}",    "{NULL}", "{NULL}", "{0}",       "{w}", "{NULL}",
      "{started}", "{1}",    "{0}",    "{f}",       "{1}", "{f}"};
  const std::string run_check =
      StrCat(sql::kRunsMustExist.view(), "SELECT 1 FROM runs_exist");
  // A single task's update goes in its one-row shape (pg_one_row.h).
  const std::string one_task_update =
      postgres_internal::OneRowShape(sql::kUpdateTasks.view());
  const std::string one_task_update_skip_locked =
      postgres_internal::OneRowShape(sql::kUpdateTasksSkipLocked.view());
  struct Statement {
    std::string_view sql;
    std::vector<std::string> params;
  };
  const std::vector<Statement> statements = {
      {sql::kGetRunsAll.view(), {run}},
      {sql::kLockRunsState.view(), {run}},
      {sql::kUpdateRuns.view(),
       {run, "{started}", "{\"\"}", "{NULL}", "{NULL}", "{f}"}},
      {sql::kAddRunRemainingSteps.view(), {run, "{-1}"}},
      {sql::kUpdateRunsAndCounters.view(),
       {run, "{started}", "{\"\"}", "{NULL}", "{NULL}", "{f}", "{0}"}},
      {sql::kGetStepStatesAll.view(), {run}},
      {sql::kUpdateStepStates.view(),
       {run, "{0}", "{started}", "{NULL}", "{\"\"}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}"}},
      {sql::kAddStepCounters.view(), {run, "{0}", "{-1}", "{0}"}},
      {sql::kUpdateStepStatesAndCounters.view(),
       {run, "{0}", "{started}", "{NULL}", "{\"\"}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}", "{0}", "{0}"}},
      // The counter moves checked on the server (pg_sql_counters.h).
      {sql::kAddRunRemainingStepsChecked.view(), {run, "{-1}", "{0}"}},
      {sql::kUpdateRunsAndCountersChecked.view(),
       {run, "{started}", "{\"\"}", "{NULL}", "{NULL}", "{f}", "{0}", "{0}"}},
      {sql::kAddStepCountersChecked.view(),
       {run, "{0}", "{-1}", "{0}", "{0}", "{0}"}},
      {sql::kUpdateStepStatesAndCountersChecked.view(),
       {run, "{0}", "{started}", "{NULL}", "{\"\"}", "{\"\"}", "{NULL}",
        "{NULL}", "{NULL}", "{0}", "{0}", "{0}", "{0}"}},
      {sql::kGetTasksAll.view(), {run, "{0}", "{0}"}},
      {sql::kUpdateTasks.view(), task_update},
      {sql::kUpdateTasksSkipLocked.view(), task_update},
      {one_task_update, task_update},
      {one_task_update_skip_locked, task_update},
      {sql::kGetAlias.view(), {"alias"}},
      {sql::kExpectAlias.view(), {"alias", "alias_v1"}},
      // The run check that every insert of step states, tasks and
      // attempts starts with.
      {run_check, {run}},
      {sql::kGetTaskOutputs.view(), {run, "{0}"}},
      {queue.send,
       {"2030-01-01 00:00:00+00", "{2030-01-01 00:00:00+00}", "{\"{}\"}",
        "{0}"}},
      {queue.set_visibility, {"{5}", "{2030-01-01 00:00:00+00}", "{t}"}},
      {queue.archive, {"{5}", "2030-01-01 00:00:00+00"}},
      {queue.delete_messages, {"{5}"}},
      {queue.claim,
       {"2030-01-01 00:00:00+00", "2030-01-01 00:00:01+00", "{f}", "{0}",
        "{2030-01-01 00:01:00+00}", "{2030-01-01 00:01:00+00}", "w", "plans",
        "10"}},
  };
  absl::StatusOr<Session> session = GenericPlanSession(db_->url());
  ASSERT_TRUE(session.ok()) << session.status();
  // Each table's unique keys: a lookup by key walks one of them. (An index
  // that merely ends with the key would be walked whole: a plan made on an
  // empty table can pick one, as cheap as the key while there are no rows.)
  const std::vector<std::pair<std::string, std::vector<std::string>>> keys = {
      {" on runs ", {"runs_pkey"}},
      {" on step_states ", {"step_states_pkey"}},
      {" on tasks ", {"tasks_pkey", "tasks_by_message"}},
      {" on q_plans ", {"q_plans_pkey"}},
      {" on aliases ", {"aliases_pkey"}}};
  for (const Statement& statement : statements) {
    EXPECT_TRUE(sql::WantsGenericPlan(statement.sql)) << statement.sql;
    const std::string text =
        GenericPlanText(*session, statement.sql, statement.params);
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::vector<std::string>* allowed = nullptr;
      for (const auto& [table, indexes] : keys) {
        if (absl::StrContains(lines[i], table)) allowed = &indexes;
      }
      if (allowed == nullptr || !absl::StrContains(lines[i], "Scan")) continue;
      // The claim's choice of messages walks them in order
      // (ExpectChoosesByThePartialIndexes).
      if (absl::StrContains(lines[i], " using q_plans_sluice_")) continue;
      bool by_key = absl::StrContains(lines[i], "Tid Scan");
      for (const std::string& index : *allowed) {
        by_key |= absl::StrContains(lines[i], StrCat(" using ", index, " "));
      }
      // The node's own lines follow until the next node. A condition on
      // the queue alone would walk every task of the queue.
      const bool by_message =
          absl::StrContains(lines[i], " using tasks_by_message ");
      bool keyed = false;
      for (size_t j = i + 1; j < lines.size(); ++j) {
        if (absl::StrContains(lines[j], "->")) break;
        keyed |= (absl::StrContains(lines[j], "Index Cond:") &&
                  (!by_message || absl::StrContains(lines[j], "message_id"))) ||
                 absl::StrContains(lines[j], "TID Cond:");
      }
      EXPECT_TRUE(by_key && keyed) << lines[i] << "\n"
                                   << statement.sql << "\n"
                                   << text;
    }
  }
  // The claim updates the task rows it locked by their versions and each
  // message by its id, so no plan can join the batch's messages or tasks
  // in a loop that compares every one with every other (decision 0079).
  // The claim is last above; only its few steps are matched by a filter.
  const std::string claim =
      GenericPlanText(*session, queue.claim, statements.back().params);
  EXPECT_THAT(claim, HasSubstr("Tid Scan on tasks")) << claim;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(claim, '\n'))) {
    if (!absl::StrContains(line, "Join Filter:")) continue;
    EXPECT_THAT(line, Not(HasSubstr("msg_id"))) << claim;
    EXPECT_THAT(line, Not(HasSubstr("run_id"))) << claim;
  }
  // The next visible time is not a lookup by key: it walks each partial vt
  // index from $1 and stops at the first row.
  EXPECT_TRUE(sql::WantsGenericPlan(queue.next_visible));
  const std::string next =
      GenericPlanText(*session, queue.next_visible, {"2030-01-01 00:00:00+00"});
  for (std::string_view index :
       {"q_plans_sluice_delayed", "q_plans_sluice_read"}) {
    EXPECT_THAT(next, HasSubstr(StrCat("using ", index, " "))) << next;
  }
  EXPECT_EQ(Occurrences(next, "Index Cond: (vt > $1)"), 2) << next;
  EXPECT_FALSE(SortsRows(next)) << next;
}

}  // namespace
}  // namespace sluice::testing
