// Every statement the Postgres backend runs on Sluice's own tables, in one
// place. Parameters are numbered ($1...) and always bound; a batch binds one
// array per column and reads it with unnest(...) WITH ORDINALITY, whose
// `ord` says which item of the batch a row answers. The inserts and task
// updates send a batch of one row in a one-row shape of the same statement
// (pg_one_row.h, PgTables::ForRows). Statements on a queue's pgmq tables
// are built per queue (pg_queue_sql.h); those on tasks, the outbox, the
// attempts ledger and the dedupe registry are in pg_sql_tasks.h.
//
// Column lists come in two shapes where a record has JSON payloads: the
// state columns, and the state columns followed by the payloads, so a
// kNoPayloads read never even fetches them (pg_rows.h reads both).
#ifndef SLUICE_BACKENDS_POSTGRES_PG_SQL_H_
#define SLUICE_BACKENDS_POSTGRES_PG_SQL_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/backend.h"

namespace sluice::postgres_internal::sql {

template <size_t N>
struct SqlText {
  char text[N] = {};
  constexpr std::string_view view() const { return {text, N - 1}; }
  constexpr operator std::string_view() const { return view(); }  // NOLINT
};

// Concatenates string literals (and SqlText::text) at compile time.
template <size_t... N>
constexpr SqlText<(N + ...) - sizeof...(N) + 1> Join(
    const char (&... parts)[N]) {
  SqlText<(N + ...) - sizeof...(N) + 1> joined;
  size_t position = 0;
  ((std::copy_n(parts, N - 1, joined.text + position), position += N - 1), ...);
  return joined;
}

// A read in two shapes: with the JSON payloads (kAll) or without.
struct ByFields {
  std::string_view all;
  std::string_view no_payloads;
  std::string_view For(Fields fields) const {
    return fields == Fields::kAll ? all : no_payloads;
  }
};

// Statements that begin with kGenericPlan run on a generic plan, made once
// per connection and kept; the rest are planned for each execution's
// parameters (pg_connection.h switches the session between the two). A
// marked statement reaches every row by key: a lateral primary-key lookup
// per element, `key = ANY($n)`, or a TID, and runs with enable_seqscan off,
// so even a plan made while the tables looked empty keeps using the
// indexes as they grow (postgres_backend_test checks such plans). Planning
// the hot statements for every execution cost as much server time as
// running them (docs/decisions/0056).
inline constexpr char kGenericPlan[] = "/* generic plan */ ";
constexpr bool WantsGenericPlan(std::string_view sql) {
  return sql.starts_with(kGenericPlan);
}
// The session settings of the two modes.
inline constexpr std::string_view kGenericPlans =
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), "
    "set_config('enable_seqscan', 'off', false)";
inline constexpr std::string_view kCustomPlans =
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', false), "
    "set_config('enable_seqscan', 'on', false)";

// --- Column lists (aliases: r runs, s step_states, t tasks, o outbox) ---

inline constexpr char kRunState[] =
    "r.run_id, r.flow_slug, r.status, r.remaining_steps, r.error, "
    "r.started_at, r.finished_at, r.priority, r.external_key, r.metadata, "
    "r.options, r.cancel_requested";
inline constexpr auto kRunAll = Join(kRunState, ", r.input, r.output");
inline constexpr char kStepState[] =
    "s.run_id, s.step_index, s.step_slug, s.status, s.remaining_deps, "
    "s.initial_tasks, s.remaining_tasks, s.error, s.skip_reason, "
    "s.started_at, s.finished_at";
inline constexpr auto kStepAll = Join(kStepState, ", s.output");
inline constexpr char kTaskState[] =
    "t.run_id, t.step_index, t.task_index, t.flow_slug, t.status, "
    "t.attempts, t.error, t.queue_name, t.message_id, t.queued_at, "
    "t.started_at, t.finished_at, t.stall_at, t.requeued_count, t.worker_id, "
    "t.budget_start, t.cancel_requested, t.options";
inline constexpr auto kTaskAll = Join(kTaskState, ", t.input, t.output");
inline constexpr char kReport[] =
    "o.report_id, o.run_id, o.step_index, o.task_index, o.flow_slug, o.kind, "
    "o.created_at";
inline constexpr char kWorker[] =
    "worker_id, queue_name, flow_slug, started_at, last_heartbeat_at, "
    "stopped_at, served";

// --- Flows ---

inline constexpr std::string_view kLockFlowSlug =
    "SELECT pg_advisory_xact_lock(hashtext('sluice.flow:' || $1))";
inline constexpr char kFlow[] =
    "slug, definition, created_at, alias, generation";
inline constexpr auto kGetFlow =
    Join("SELECT ", kFlow, " FROM sluice.flows WHERE slug = $1");
inline constexpr auto kInsertFlow =
    Join("INSERT INTO sluice.flows (", kFlow,
         ") VALUES ($1, $2::json, $3::timestamptz, $4, $5::bigint)");
inline constexpr auto kListFlows =
    Join("SELECT ", kFlow, " FROM sluice.flows ORDER BY slug");
// Rows: (slug) if the flow existed.
inline constexpr std::string_view kDeleteFlow =
    "DELETE FROM sluice.flows WHERE slug = $1 RETURNING slug";
inline constexpr std::string_view kUpdateFlow =
    "UPDATE sluice.flows SET definition = $2::json, generation = $3::bigint "
    "WHERE slug = $1 RETURNING slug";
// One row; runs_by_flow_status_start holds the flow's runs by status.
inline constexpr std::string_view kCountRuns =
    "SELECT count(*) FILTER (WHERE status = 'started'), "
    "count(*) FILTER (WHERE status = 'completed'), "
    "count(*) FILTER (WHERE status = 'failed'), "
    "count(*) FILTER (WHERE status = 'cancelled') "
    "FROM sluice.runs WHERE flow_slug = $1";

// A check: kRequireFound, then `'<what>', <scalar subquery>`, then
// kRequireFoundEnd. One row; it fails the statement with "<what> <value>
// does not exist" (P0002, kNotFound) when the subquery finds a value. The
// function is called only then: a call, with its search_path setting,
// costs about 4 us, more than the check's lookup.
inline constexpr char kRequireFound[] =
    "SELECT CASE WHEN checked.missing IS NULL THEN NULL ELSE "
    "sluice.require_found(checked.what, checked.missing) END FROM (SELECT ";
inline constexpr char kRequireFoundEnd[] = ") AS checked(what, missing)";

// --- Aliases ---

// The two-key form keeps these apart from LockFlowSlug's one-key locks (a
// slug and an alias may share a text) and from kLockDedupeKey's (1936).
inline constexpr std::string_view kLockAlias =
    "SELECT pg_advisory_xact_lock(1937, hashtext($1))";
inline constexpr char kAlias[] = "alias, active_slug, updated_at";
inline constexpr auto kGetAlias = Join(kGenericPlan, "SELECT ", kAlias,
                                       " FROM sluice.aliases WHERE alias = $1");
// Raises (P0002, kNotFound) unless the alias is active at $2.
inline constexpr auto kExpectAlias = Join(
    kGenericPlan, kRequireFound,
    "'alias', (SELECT format('\"%s\" at version \"%s\"', $1::text, "
    "$2::text) WHERE NOT EXISTS (SELECT FROM sluice.aliases WHERE alias = $1 "
    "AND active_slug = $2))",
    kRequireFoundEnd);
inline constexpr auto kPutAlias =
    Join("INSERT INTO sluice.aliases (", kAlias,
         ") VALUES ($1, $2, $3::timestamptz) ON CONFLICT (alias) DO UPDATE "
         "SET active_slug = excluded.active_slug, "
         "updated_at = excluded.updated_at");
inline constexpr auto kListAliases =
    Join("SELECT ", kAlias, " FROM sluice.aliases ORDER BY alias");

// --- Queues, workers ---

inline constexpr char kQueue[] = "name, owner_flow, created_at, paused";
inline constexpr auto kGetQueue =
    Join("SELECT ", kQueue, " FROM sluice.queues WHERE name = $1");
inline constexpr auto kListQueues =
    Join("SELECT ", kQueue, " FROM sluice.queues ORDER BY name");
// Rows: (name) if the queue is registered.
inline constexpr std::string_view kSetQueuePaused =
    "UPDATE sluice.queues SET paused = $2::bool WHERE name = $1 "
    "RETURNING name";
// The live table of the queue named by the SQL between the two halves, or
// NULL if it does not exist.
inline constexpr char kLiveTableOf[] =
    "to_regclass(format('pgmq.%I', 'q_' || lower(";
inline constexpr char kLiveTableOfEnd[] = ")))";
// A physical queue exists when its live table does (registered or not).
inline constexpr auto kQueueExists =
    Join("SELECT ", kLiveTableOf, "$1", kLiveTableOfEnd, " IS NOT NULL");
inline constexpr std::string_view kInsertQueue =
    "INSERT INTO sluice.queues (name, owner_flow, created_at) "
    "VALUES ($1, $2, $3::timestamptz)";
inline constexpr std::string_view kCreatePhysicalQueue =
    "SELECT sluice.create_queue($1)";
// Rows: one if the queue was registered; its physical queue (if any) goes
// with the registry row.
inline constexpr std::string_view kDeleteQueue =
    "WITH gone AS (DELETE FROM sluice.queues WHERE name = $1 RETURNING name) "
    "SELECT sluice.drop_queue(name) FROM gone";
inline constexpr auto kNotifyQueue =
    Join(kGenericPlan, "SELECT pg_notify($1, '')");
inline constexpr auto kUpsertWorker =
    Join("INSERT INTO sluice.workers (", kWorker,
         ") VALUES ($1, $2, $3, $4::timestamptz, $5::timestamptz, "
         "$6::timestamptz, $7::json) ON CONFLICT (worker_id) DO UPDATE SET "
         "queue_name = excluded.queue_name, flow_slug = excluded.flow_slug, "
         "started_at = excluded.started_at, "
         "last_heartbeat_at = excluded.last_heartbeat_at, "
         "stopped_at = excluded.stopped_at, served = excluded.served");
inline constexpr auto kListWorkers =
    Join("SELECT ", kWorker, " FROM sluice.workers ORDER BY worker_id");
// Scans the table on purpose: pruning keeps it to the workers of the last
// retention window, and nothing else searches it by time.
inline constexpr std::string_view kDeleteInactiveWorkers =
    "WITH gone AS (SELECT worker_id FROM sluice.workers "
    "WHERE last_heartbeat_at < $1::timestamptz "
    "AND (stopped_at IS NULL OR stopped_at < $1::timestamptz) "
    "LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "DELETE FROM sluice.workers AS w USING gone "
    "WHERE w.worker_id = gone.worker_id RETURNING w.worker_id";

// --- Runs ---

inline constexpr auto kInsertRuns = Join(
    kGenericPlan,
    "INSERT INTO sluice.runs (run_id, flow_slug, status, remaining_steps, "
    "error, started_at, finished_at, input, output, priority, external_key, "
    "metadata, options, cancel_requested) "
    "SELECT i.run_id, i.flow_slug, i.status, i.remaining_steps, i.error, "
    "i.started_at, i.finished_at, i.input, i.output, i.priority, "
    "i.external_key, i.metadata, i.options, i.cancel_requested FROM "
    "unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], "
    "$6::timestamptz[], $7::timestamptz[], $8::json[], $9::json[], "
    "$10::int[], $11::text[], $12::json[], $13::json[], $14::bool[]) WITH "
    "ORDINALITY AS i(run_id, flow_slug, status, remaining_steps, error, "
    "started_at, finished_at, input, output, priority, external_key, "
    "metadata, options, cancel_requested, ord) ORDER BY i.ord");

// $1: run ids. Locking reads lock in the order given (LockRows sits above
// the sort). `= ANY($1)` keeps the runs an index condition whichever join
// the plan picks.
inline constexpr char kRunsById[] =
    " FROM unnest($1::uuid[]) WITH ORDINALITY AS u(run_id, ord) "
    "JOIN sluice.runs AS r ON r.run_id = u.run_id "
    "WHERE r.run_id = ANY($1::uuid[]) ORDER BY u.ord";
inline constexpr char kForUpdate[] = " FOR NO KEY UPDATE OF r";
inline constexpr auto kGetRunsAll =
    Join(kGenericPlan, "SELECT u.ord, ", kRunAll.text, kRunsById);
inline constexpr auto kGetRunsState =
    Join(kGenericPlan, "SELECT u.ord, ", kRunState, kRunsById);
inline constexpr auto kLockRunsAll = Join(kGetRunsAll.text, kForUpdate);
inline constexpr auto kLockRunsState = Join(kGetRunsState.text, kForUpdate);
inline constexpr char kSkipLocked[] = " SKIP LOCKED";
inline constexpr auto kTryLockRunsAll = Join(kLockRunsAll.text, kSkipLocked);
inline constexpr auto kTryLockRunsState =
    Join(kLockRunsState.text, kSkipLocked);
inline constexpr ByFields kGetRuns{kGetRunsAll, kGetRunsState};
inline constexpr ByFields kLockRuns{kLockRunsAll, kLockRunsState};
inline constexpr ByFields kTryLockRuns{kTryLockRunsAll, kTryLockRunsState};

// One row per run (the last write of a batch wins; the caller dedupes).
inline constexpr auto kUpdateRuns = Join(
    kGenericPlan,
    "WITH i AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], "
    "$4::timestamptz[], $5::json[], $6::bool[]) AS i(run_id, status, error, "
    "finished_at, output, cancel_requested)), updated AS (UPDATE sluice.runs "
    "AS r SET status = i.status, error = i.error, finished_at = "
    "i.finished_at, output = i.output, cancel_requested = i.cancel_requested "
    "FROM i "
    "WHERE r.run_id = i.run_id AND r.run_id = ANY($1::uuid[]) "
    "RETURNING r.run_id) ",
    kRequireFound,
    "'run', (SELECT min(i.run_id::text) FROM i WHERE i.run_id NOT IN "
    "(SELECT run_id FROM updated))",
    kRequireFoundEnd);
// One row per run, deltas summed. Rows: (slot, new value).
inline constexpr auto kAddRunRemainingSteps = Join(
    kGenericPlan,
    "UPDATE sluice.runs AS r SET remaining_steps = r.remaining_steps + "
    "d.delta FROM unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS d(run_id, "
    "delta, slot) WHERE r.run_id = d.run_id AND r.run_id = ANY($1::uuid[]) "
    "RETURNING d.slot, "
    "r.remaining_steps");
// UpdateRuns and AddRunRemainingSteps as one row write, one row per run
// (the caller sums deltas). Rows: (slot, new remaining_steps).
inline constexpr auto kUpdateRunsAndCounters = Join(
    kGenericPlan,
    "UPDATE sluice.runs AS r SET status = i.status, error = i.error, "
    "finished_at = i.finished_at, output = i.output, cancel_requested = "
    "i.cancel_requested, remaining_steps = r.remaining_steps + i.delta "
    "FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], "
    "$5::json[], $6::bool[], $7::int[]) WITH ORDINALITY AS i(run_id, status, "
    "error, finished_at, output, cancel_requested, delta, slot) "
    "WHERE r.run_id = i.run_id AND r.run_id = ANY($1::uuid[]) "
    "RETURNING i.slot, r.remaining_steps");

// The ListRuns statement for `query`'s shape (which filters it has, its
// order) and `fields`, built once per shape: a plan made for one shape,
// even a generic one, walks the index that serves its filters and order.
// Parameters are numbered densely in this order, present filters only:
// flow slug(s), status(es), metadata, from, to, the position to resume
// after (time, run id), the limit. One flow or status is a text, several
// an array.
const std::string& ListRuns(const RunQuery& query, Fields fields);

// $1 flow slug, $2 external keys. A key finds its run by the partial
// unique index; an empty key finds none.
inline constexpr char kRunsByKey[] =
    " FROM unnest($2::text[]) WITH ORDINALITY AS u(external_key, ord) "
    "CROSS JOIN LATERAL (SELECT r.* FROM sluice.runs AS r WHERE "
    "r.flow_slug = $1 AND r.external_key = u.external_key AND "
    "r.external_key <> '' LIMIT 1) AS r";
inline constexpr auto kFindRunsByKeyAll =
    Join("SELECT u.ord, ", kRunAll.text, kRunsByKey);
inline constexpr auto kFindRunsByKeyState =
    Join("SELECT u.ord, ", kRunState, kRunsByKey);
inline constexpr ByFields kFindRunsByKey{kFindRunsByKeyAll,
                                         kFindRunsByKeyState};
// Every flow that has runs, in order (the last row is NULL): a skip scan,
// one probe of an index that leads with flow_slug per flow.
inline constexpr char kFlowsWithRuns[] =
    "WITH RECURSIVE flows(flow_slug) AS (SELECT min(flow_slug) FROM "
    "sluice.runs UNION ALL SELECT (SELECT min(r.flow_slug) FROM sluice.runs "
    "AS r WHERE r.flow_slug > flows.flow_slug) FROM flows WHERE "
    "flows.flow_slug IS NOT NULL) ";
// Retention walks runs_by_flow_finish once per flow (migration 0021): the
// $2 earliest finishes of each, with any that tie the last. The earliest $2
// of those, again with ties, are read whole and sorted by finish and
// insertion, so exactly the $2 earliest are chosen, and locked, skipping
// runs other transactions hold. The walks check each run's status: a run
// with a finish time that has not ended is passed over, not counted.
inline constexpr auto kFindFinishedRuns =
    Join(kFlowsWithRuns, "SELECT ", kRunState,
         " FROM sluice.runs AS r WHERE r.run_id = ANY(ARRAY(SELECT w.run_id "
         "FROM flows AS f CROSS JOIN LATERAL (SELECT r.run_id, r.finished_at "
         "FROM sluice.runs AS r WHERE r.flow_slug = f.flow_slug "
         "AND r.finished_at IS NOT NULL AND r.finished_at < $1::timestamptz "
         "AND r.status IN ('completed', 'failed', 'cancelled') "
         "ORDER BY r.finished_at FETCH FIRST ($2) ROWS WITH TIES) AS w "
         "ORDER BY w.finished_at FETCH FIRST ($2) ROWS WITH TIES)) "
         "ORDER BY r.finished_at, r.insert_seq LIMIT $2 "
         "FOR UPDATE OF r SKIP LOCKED");

// Deleting runs ($1: run ids): the queues their tasks' messages are on
// (each queue's messages go by pg_queue_sql.h), then the rest.
// Locks the runs DeleteRuns deletes, before it reads or deletes anything
// that hangs off them: rows are added to a run only in the transaction that
// creates it or under its lock, so those transactions finish first and the
// deletes that follow (each its own snapshot) see their rows.
inline constexpr std::string_view kLockRunsToDelete =
    "SELECT 1 FROM sluice.runs WHERE run_id = ANY($1::uuid[]) "
    "ORDER BY run_id FOR UPDATE";
inline constexpr std::string_view kQueuesOfRuns =
    "SELECT DISTINCT queue_name FROM sluice.tasks "
    "WHERE run_id = ANY($1::uuid[])";
inline constexpr std::string_view kDeleteRunReports =
    "DELETE FROM sluice.outbox WHERE run_id = ANY($1::uuid[])";
inline constexpr std::string_view kDeleteRunTasks =
    "DELETE FROM sluice.tasks WHERE run_id = ANY($1::uuid[])";
inline constexpr std::string_view kDeleteRunAttempts =
    "DELETE FROM sluice.attempts WHERE run_id = ANY($1::uuid[])";
inline constexpr std::string_view kDeleteRunStepStates =
    "DELETE FROM sluice.step_states WHERE run_id = ANY($1::uuid[])";
inline constexpr std::string_view kDeleteRuns =
    "DELETE FROM sluice.runs WHERE run_id = ANY($1::uuid[])";

// The head of an insert whose rows name runs in $1: fails the statement
// with "run ... does not exist" (kNotFound) if one has no run, as a foreign
// key would, without a query and a row lock per inserted row (migration
// 0009). The insert's FROM cross-joins runs_exist so it runs first. The
// runs are read by `run_id = ANY($1)`, one probe of runs_pkey per distinct
// id, and joined to the batch: NOT EXISTS became an anti-join, planned
// from the statistics as a scan of every run. The read takes insert_seq,
// which no index holds: answered from an index alone, it could walk any
// index that ends with run_id, and a generic plan made on an empty table
// picked one (decision 0056).
inline constexpr auto kRunsMustExist =
    Join(kGenericPlan, "WITH runs_exist AS MATERIALIZED (", kRequireFound,
         "'run', (SELECT min(d.run_id::text) FROM unnest($1::uuid[]) AS "
         "d(run_id) LEFT JOIN (SELECT r.run_id, r.insert_seq FROM sluice.runs "
         "AS r WHERE r.run_id = ANY($1::uuid[])) AS r ON r.run_id = d.run_id "
         "WHERE r.insert_seq IS NULL)",
         kRequireFoundEnd, ") ");
// An insert's end, after its unnest `i`: with the check joined in (so it
// runs first), or without it.
inline constexpr char kCheckedRowsInOrder[] =
    " CROSS JOIN runs_exist ORDER BY i.ord";
inline constexpr char kRowsInOrder[] = " ORDER BY i.ord";

// An insert of rows that name runs, in two shapes: with kRunsMustExist, and
// without it for rows whose runs the same transaction inserted. Those need
// no check: no other transaction can see a run before its insert commits,
// so none can have deleted it.
struct ByRunCheck {
  std::string_view checked;
  std::string_view unchecked;
  std::string_view For(bool runs_inserted_here) const {
    return runs_inserted_here ? unchecked : checked;
  }
};

// --- Step states ---

inline constexpr char kInsertStepStatesBody[] =
    "INSERT INTO sluice.step_states (run_id, step_index, step_slug, status, "
    "remaining_deps, initial_tasks, remaining_tasks, error, skip_reason, "
    "started_at, finished_at, output) SELECT i.run_id, i.step_index, "
    "i.step_slug, i.status, i.remaining_deps, i.initial_tasks, "
    "i.remaining_tasks, i.error, i.skip_reason, i.started_at, i.finished_at, "
    "i.output FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], "
    "$5::int[], $6::int[], $7::int[], $8::text[], $9::text[], "
    "$10::timestamptz[], $11::timestamptz[], $12::json[]) WITH ORDINALITY "
    "AS i(run_id, step_index, step_slug, status, remaining_deps, "
    "initial_tasks, remaining_tasks, error, skip_reason, started_at, "
    "finished_at, output, ord)";
inline constexpr auto kInsertStepStatesChecked =
    Join(kRunsMustExist.text, kInsertStepStatesBody, kCheckedRowsInOrder);
inline constexpr auto kInsertStepStatesUnchecked =
    Join(kGenericPlan, kInsertStepStatesBody, kRowsInOrder);
inline constexpr ByRunCheck kInsertStepStates{kInsertStepStatesChecked,
                                              kInsertStepStatesUnchecked};
// The subquery's ORDER BY keeps it a lookup per run (not flattened into a
// join planned from stale statistics).
inline constexpr char kStepsOfRuns[] =
    " FROM unnest($1::uuid[]) WITH ORDINALITY AS u(run_id, ord) "
    "CROSS JOIN LATERAL (SELECT s.* FROM sluice.step_states AS s "
    "WHERE s.run_id = u.run_id ORDER BY s.step_index) AS s "
    "ORDER BY u.ord, s.step_index";
inline constexpr auto kGetStepStatesAll =
    Join(kGenericPlan, "SELECT u.ord, ", kStepAll.text, kStepsOfRuns);
inline constexpr auto kGetStepStatesState =
    Join(kGenericPlan, "SELECT u.ord, ", kStepState, kStepsOfRuns);
inline constexpr ByFields kGetStepStates{kGetStepStatesAll,
                                         kGetStepStatesState};
// Follows the unnest `i` of an update of step states: each element's row
// by one primary-key lookup (LIMIT 1 keeps the lateral from being
// flattened into a join), as `row_ctid`, NULL where there is none; the
// UPDATE then reaches the row by TID. A join on the key with
// `s.run_id = ANY($1)` left the choice to the statistics, and before the
// first ANALYZE Postgres scanned every step state for it. Step states
// change only under their run's lock, so the TID still names the row when
// the UPDATE reaches it.
inline constexpr char kStepStateTid[] =
    " LEFT JOIN LATERAL (SELECT x.ctid AS row_ctid FROM sluice.step_states "
    "AS x WHERE x.run_id = i.run_id AND x.step_index = i.step_index LIMIT 1) "
    "AS l ON true";
// One row per step (the caller dedupes, the last write winning).
inline constexpr auto kUpdateStepStates =
    Join(kGenericPlan,
         "WITH i AS (SELECT i.*, l.row_ctid FROM unnest($1::uuid[], $2::int[], "
         "$3::text[], $4::int[], $5::text[], $6::text[], $7::timestamptz[], "
         "$8::timestamptz[], $9::json[]) AS i(run_id, step_index, status, "
         "initial_tasks, error, skip_reason, started_at, finished_at, output)",
         kStepStateTid,
         "), updated AS (UPDATE sluice.step_states AS s SET status = i.status, "
         "initial_tasks = i.initial_tasks, error = i.error, "
         "skip_reason = i.skip_reason, started_at = i.started_at, "
         "finished_at = i.finished_at, output = i.output FROM i "
         "WHERE s.ctid = i.row_ctid RETURNING s.run_id, s.step_index) ",
         kRequireFound,
         "'step', (SELECT min(format('%s of run %s', i.step_index, i.run_id)) "
         "FROM i WHERE (i.run_id, i.step_index) NOT IN (SELECT run_id, "
         "step_index FROM updated))",
         kRequireFoundEnd);
// One row per step, deltas summed. Rows: (slot, remaining_tasks,
// remaining_deps). An unset remaining_tasks counts from 0 (backend.h).
inline constexpr auto kAddStepCounters = Join(
    kGenericPlan,
    "UPDATE sluice.step_states AS s SET remaining_tasks = "
    "coalesce(s.remaining_tasks, 0) + i.tasks, remaining_deps = "
    "s.remaining_deps + i.deps FROM (SELECT i.*, l.row_ctid FROM "
    "unnest($1::uuid[], $2::int[], $3::int[], $4::int[]) WITH ORDINALITY AS "
    "i(run_id, step_index, tasks, deps, slot)",
    kStepStateTid,
    ") AS i WHERE s.ctid = i.row_ctid "
    "RETURNING i.slot, s.remaining_tasks, s.remaining_deps");
// UpdateStepStates and AddStepCounters as one row write, one row per step
// (the caller sums deltas). Rows: (slot, remaining_tasks, remaining_deps).
inline constexpr auto kUpdateStepStatesAndCounters = Join(
    kGenericPlan,
    "UPDATE sluice.step_states AS s SET status = i.status, "
    "initial_tasks = i.initial_tasks, error = i.error, "
    "skip_reason = i.skip_reason, started_at = i.started_at, "
    "finished_at = i.finished_at, output = i.output, "
    "remaining_tasks = coalesce(s.remaining_tasks, 0) + i.tasks, "
    "remaining_deps = s.remaining_deps + i.deps "
    "FROM (SELECT i.*, l.row_ctid FROM unnest($1::uuid[], $2::int[], "
    "$3::text[], $4::int[], $5::text[], $6::text[], $7::timestamptz[], "
    "$8::timestamptz[], $9::json[], $10::int[], $11::int[]) WITH ORDINALITY "
    "AS i(run_id, step_index, status, initial_tasks, error, skip_reason, "
    "started_at, finished_at, output, tasks, deps, slot)",
    kStepStateTid,
    ") AS i WHERE s.ctid = i.row_ctid "
    "RETURNING i.slot, s.remaining_tasks, s.remaining_deps");

}  // namespace sluice::postgres_internal::sql

#endif  // SLUICE_BACKENDS_POSTGRES_PG_SQL_H_
