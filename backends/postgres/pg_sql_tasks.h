// The Postgres backend's statements on tasks, the outbox, the attempts
// ledger and the dedupe registry, kept beside pg_sql.h under its rules.
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SQL_TASKS_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SQL_TASKS_H_

#include <string_view>

#include "pg_sql.h"

namespace sluice::postgres_internal::sql {

// --- Tasks ---

// The task insert, in two parts around the message id column's source:
// $1..$20 are the columns, `i` their unnest (with `ord`).
inline constexpr char kInsertTasksHead[] =
    "INSERT INTO sluice.tasks (run_id, step_index, task_index, flow_slug, "
    "status, attempts, error, queue_name, message_id, queued_at, started_at, "
    "finished_at, stall_at, requeued_count, worker_id, input, output, "
    "budget_start, cancel_requested, options) "
    "SELECT i.run_id, i.step_index, i.task_index, i.flow_slug, i.status, "
    "i.attempts, i.error, i.queue_name, ";
inline constexpr char kInsertTasksTail[] =
    ", i.queued_at, "
    "i.started_at, i.finished_at, i.stall_at, i.requeued_count, i.worker_id, "
    "i.input, i.output, i.budget_start, i.cancel_requested, i.options "
    "FROM unnest($1::uuid[], $2::int[], $3::int[], "
    "$4::text[], $5::text[], $6::int[], $7::text[], $8::text[], "
    "$9::bigint[], $10::timestamptz[], $11::timestamptz[], "
    "$12::timestamptz[], $13::timestamptz[], $14::int[], $15::text[], "
    "$16::json[], $17::json[], $18::int[], $19::bool[], $20::json[]) WITH "
    "ORDINALITY AS i(run_id, step_index, "
    "task_index, flow_slug, status, attempts, error, queue_name, message_id, "
    "queued_at, started_at, finished_at, stall_at, requeued_count, "
    "worker_id, input, output, budget_start, cancel_requested, options, ord)";
inline constexpr auto kInsertTasksChecked =
    Join(kRunsMustExist.text, kInsertTasksHead, "i.message_id",
         kInsertTasksTail, kCheckedRowsInOrder);
inline constexpr auto kInsertTasksUnchecked =
    Join(kGenericPlan, kInsertTasksHead, "i.message_id", kInsertTasksTail,
         kRowsInOrder);
inline constexpr ByRunCheck kInsertTasks{kInsertTasksChecked,
                                         kInsertTasksUnchecked};
// LIMIT 1 keeps the subquery a primary-key lookup per element (the
// planner can't flatten it into a join planned from stale statistics).
inline constexpr char kTasksByKey[] =
    " FROM unnest($1::uuid[], $2::int[], $3::int[]) WITH ORDINALITY "
    "AS u(run_id, step_index, task_index, ord) CROSS JOIN LATERAL (SELECT "
    "t.* FROM sluice.tasks AS t WHERE t.run_id = u.run_id AND "
    "t.step_index = u.step_index AND t.task_index = u.task_index LIMIT 1) "
    "AS t";
inline constexpr auto kGetTasksAll =
    Join(kGenericPlan, "SELECT u.ord, ", kTaskAll.text, kTasksByKey);
inline constexpr auto kGetTasksState =
    Join(kGenericPlan, "SELECT u.ord, ", kTaskState, kTasksByKey);
inline constexpr ByFields kGetTasks{kGetTasksAll, kGetTasksState};
// Both columns are index conditions of tasks_by_message whatever the
// statistics say; the caller puts the rows in the order of $2.
inline constexpr char kTasksByMessage[] =
    " FROM sluice.tasks AS t WHERE t.queue_name = $1 "
    "AND t.message_id = ANY($2::bigint[])";
inline constexpr auto kGetTasksByMessageAll =
    Join("SELECT ", kTaskAll.text, kTasksByMessage);
inline constexpr auto kGetTasksByMessageState =
    Join("SELECT ", kTaskState, kTasksByMessage);
inline constexpr ByFields kGetTasksByMessage{kGetTasksByMessageAll,
                                             kGetTasksByMessageState};

// Compare-and-set, one row per task (a batch touching a task twice runs in
// rounds). Rows: (ord) of each update that applied.
//
// `u` locks each task with a lookup by primary key (a parameterized index
// scan, whatever the statistics say). The caller sends a batch in key
// order, so rows are locked in key order and two batches touching the same
// tasks never wait on each other in a cycle. The UPDATE then reaches each
// locked row by key, not by the ctid the lock returned: when the lock waited
// for another transaction's update, that ctid names the version it
// committed, which this statement's snapshot cannot see, so a TID scan would
// miss the row; a scan by key finds the version the snapshot sees and
// rechecks the compare-and-set on the latest one (decision 0059).
// kUpdateTasksSkipLocked skips tasks other transactions hold: the claim path
// never waits for a task lock while it holds message locks.
inline constexpr auto kUpdateTasksInput = Join(
    kGenericPlan,
    "WITH u AS MATERIALIZED (SELECT u.* FROM unnest($1::uuid[], "
    "$2::int[], $3::int[], $4::text[], $5::int[], $6::text[], "
    "$7::timestamptz[], $8::timestamptz[], $9::timestamptz[], $10::int[], "
    "$11::text[], $12::json[], $13::text[], $14::int[], $15::int[], "
    "$16::bool[], $17::bigint[], $18::bool[]) WITH ORDINALITY AS "
    "u(run_id, step_index, task_index, status, attempts, error, started_at, "
    "finished_at, stall_at, requeued_count, worker_id, output, "
    "expected_status, expected_attempts, budget_start, cancel_requested, "
    "message_id, expected_cancel, ord) "
    "CROSS JOIN LATERAL (SELECT "
    "1 AS locked FROM sluice.tasks AS t WHERE t.run_id = u.run_id AND "
    "t.step_index = u.step_index AND t.task_index = u.task_index "
    "FOR NO KEY UPDATE OF t");
inline constexpr char kUpdateTasksSet[] =
    ") AS l) UPDATE sluice.tasks AS t SET status = u.status, attempts = "
    "u.attempts, error = u.error, started_at = u.started_at, finished_at = "
    "u.finished_at, stall_at = u.stall_at, requeued_count = "
    "u.requeued_count, worker_id = u.worker_id, output = u.output, "
    "budget_start = u.budget_start, cancel_requested = u.cancel_requested, "
    "message_id = u.message_id FROM u "
    "WHERE t.run_id = u.run_id AND t.step_index = u.step_index AND "
    "t.task_index = u.task_index AND t.run_id = ANY($1::uuid[]) AND "
    "t.status = u.expected_status AND "
    "t.attempts = u.expected_attempts AND (u.expected_cancel IS NULL OR "
    "t.cancel_requested = u.expected_cancel) RETURNING u.ord";
inline constexpr auto kUpdateTasks =
    Join(kUpdateTasksInput.text, kUpdateTasksSet);
inline constexpr auto kUpdateTasksSkipLocked =
    Join(kUpdateTasksInput.text, " SKIP LOCKED", kUpdateTasksSet);

// A run's (or step's) tasks by primary key, the ended ones skipped: no index
// holds only unfinished tasks (migration 0011, decision 0062).
inline constexpr char kTaskUnfinished[] =
    "t.status IN ('queued', 'started', 'waiting')";
inline constexpr auto kUnfinishedOfRun =
    Join(" FROM sluice.tasks AS t WHERE t.run_id = $1 AND ", kTaskUnfinished,
         " ORDER BY t.step_index, t.task_index FOR NO KEY UPDATE OF t");
inline constexpr auto kUnfinishedOfStep = Join(
    " FROM sluice.tasks AS t WHERE t.run_id = $1 AND t.step_index = $2 "
    "AND ",
    kTaskUnfinished, " ORDER BY t.task_index FOR NO KEY UPDATE OF t");
inline constexpr auto kUnfinishedOfRunAll =
    Join("SELECT ", kTaskAll.text, kUnfinishedOfRun.text);
inline constexpr auto kUnfinishedOfRunState =
    Join("SELECT ", kTaskState, kUnfinishedOfRun.text);
inline constexpr auto kUnfinishedOfStepAll =
    Join("SELECT ", kTaskAll.text, kUnfinishedOfStep.text);
inline constexpr auto kUnfinishedOfStepState =
    Join("SELECT ", kTaskState, kUnfinishedOfStep.text);
inline constexpr ByFields kUnfinishedOfRunSql{kUnfinishedOfRunAll,
                                              kUnfinishedOfRunState};
inline constexpr ByFields kUnfinishedOfStepSql{kUnfinishedOfStepAll,
                                               kUnfinishedOfStepState};
inline constexpr auto kListTasks =
    Join("SELECT ", kTaskAll.text,
         " FROM sluice.tasks AS t WHERE t.run_id = $1 "
         "ORDER BY t.step_index, t.task_index");
inline constexpr auto kGetTaskOutputs =
    Join(kGenericPlan,
         "SELECT u.ord, t.output FROM unnest($1::uuid[], $2::int[]) WITH "
         "ORDINALITY AS u(run_id, step_index, ord) JOIN sluice.tasks AS t ON "
         "t.run_id = u.run_id AND t.step_index = u.step_index "
         "WHERE t.run_id = ANY($1::uuid[]) ORDER BY u.ord, t.task_index");
// FindStalledTasks: pg_queue_sql.h FindStalledSql, over the registered
// queues' names (rows: name). A queue whose table is gone (dropped by hand)
// is left out, so it cannot fail the sweep of every other queue.
inline constexpr auto kQueueNames =
    Join("SELECT name FROM sluice.queues WHERE ", kLiveTableOf, "name",
         kLiveTableOfEnd, " IS NOT NULL ORDER BY name");

// --- The outbox ---

// Rows: (report id), one per report, inserted in batch order.
inline constexpr std::string_view kAppendReports =
    "INSERT INTO sluice.outbox (run_id, step_index, task_index, flow_slug, "
    "kind, created_at) SELECT i.run_id, i.step_index, i.task_index, "
    "i.flow_slug, i.kind, i.created_at FROM unnest($1::uuid[], $2::int[], "
    "$3::int[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY "
    "AS i(run_id, step_index, task_index, flow_slug, kind, created_at, ord) "
    "ORDER BY i.ord RETURNING report_id";
inline constexpr auto kTakeReports = Join(
    "DELETE FROM sluice.outbox AS o WHERE o.report_id IN (SELECT "
    "report_id FROM sluice.outbox WHERE report_id = ANY($1::bigint[]) "
    "FOR UPDATE SKIP LOCKED) RETURNING ",
    kReport);
inline constexpr auto kTakeStaleReports = Join(
    "DELETE FROM sluice.outbox AS o WHERE o.report_id IN (SELECT "
    "report_id FROM sluice.outbox WHERE created_at < $1::timestamptz "
    "ORDER BY created_at, report_id LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "RETURNING ",
    kReport);
inline constexpr std::string_view kCountReports =
    "SELECT count(*) FROM sluice.outbox";

// --- The attempts ledger and the dedupe registry ---

inline constexpr auto kAppendAttempts = Join(
    kRunsMustExist.text,
    "INSERT INTO sluice.attempts (run_id, step_index, task_index, attempt, "
    "worker_id, started_at, finished_at, outcome, error) SELECT i.run_id, "
    "i.step_index, i.task_index, i.attempt, i.worker_id, i.started_at, "
    "i.finished_at, i.outcome, i.error FROM unnest($1::uuid[], $2::int[], "
    "$3::int[], $4::int[], $5::text[], $6::timestamptz[], $7::timestamptz[], "
    "$8::text[], $9::text[]) WITH ORDINALITY AS i(run_id, step_index, "
    "task_index, attempt, worker_id, started_at, finished_at, outcome, "
    "error, ord) CROSS JOIN runs_exist ORDER BY i.ord");
inline constexpr std::string_view kListAttempts =
    "SELECT run_id, step_index, task_index, attempt, worker_id, started_at, "
    "finished_at, outcome, error FROM sluice.attempts WHERE run_id = $1 "
    "ORDER BY step_index, task_index, attempt";

// Serializes transactions over one (flow, key), whether or not it has an
// entry yet (FOR UPDATE alone locks only a row that exists), so two
// enqueues of one key never both see it free. The two-key form keeps these
// apart from LockFlowSlug's one-key locks.
inline constexpr std::string_view kLockDedupeKey =
    "SELECT pg_advisory_xact_lock(1936, hashtext($1 || ':' || $2))";
inline constexpr char kDedupe[] = "flow_slug, key, run_id, expires_at";
inline constexpr auto kGetDedupe =
    Join("SELECT ", kDedupe,
         " FROM sluice.dedupe WHERE flow_slug = $1 AND key = $2 FOR UPDATE");
inline constexpr auto kPutDedupe =
    Join("INSERT INTO sluice.dedupe (", kDedupe,
         ") VALUES ($1, $2, $3::uuid, $4::timestamptz) ON CONFLICT "
         "(flow_slug, key) DO UPDATE SET run_id = excluded.run_id, "
         "expires_at = excluded.expires_at");
inline constexpr std::string_view kDeleteDedupe =
    "DELETE FROM sluice.dedupe WHERE flow_slug = $1 AND key = $2 AND "
    "run_id = $3::uuid RETURNING run_id";
inline constexpr std::string_view kDeleteExpiredDedupe =
    "WITH gone AS (SELECT flow_slug, key FROM sluice.dedupe "
    "WHERE expires_at <= $1::timestamptz ORDER BY expires_at "
    "LIMIT $2 FOR UPDATE SKIP LOCKED) DELETE FROM sluice.dedupe AS d "
    "USING gone WHERE d.flow_slug = gone.flow_slug AND d.key = gone.key "
    "RETURNING d.key";

}  // namespace sluice::postgres_internal::sql

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SQL_TASKS_H_
