// Every SQL statement the SQLite backend runs on its hot paths, in one place
// so tests can check each one's query plan (sqlite_backend_plans_test.cc).
// Parameters are numbered (?1...) and always bound, never formatted in.
//
// Statements served by a secondary index name it with INDEXED BY: hot
// queries must use their index whatever the statistics say (after ANALYZE
// over a few rows SQLite preferred a table scan for FindStalledTasks), and
// INDEXED BY turns a lost index into a prepare error instead of a silent
// full scan. Key lookups need no hint: an equality on a whole primary or
// unique key always wins.
//
// Batch statements read their batch from `sluice_rows(?n) AS j`
// (sqlite_bound_rows.h): j.key is a row's position in the batch, j.c0... its
// cells. CROSS JOIN keeps the batch as the outer loop, so each of its rows
// is one index search of the table after it.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_

#include <string>
#include <string_view>

#include "sluice/backend.h"
#include "sqlite_rows.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal::sql {

// A read in two shapes: with the JSON payloads (kAll) or without.
struct ByFields {
  std::string_view all;
  std::string_view no_payloads;

  std::string_view For(Fields fields) const {
    return fields == Fields::kAll ? all : no_payloads;
  }
};

// --- Flows, aliases, queues, workers ---

inline constexpr auto kGetFlow =
    JoinSql("SELECT ", kFlowColumns, " FROM flows WHERE slug = ?1");
inline constexpr auto kInsertFlow = JoinSql("INSERT INTO flows (", kFlowColumns,
                                            ") VALUES (?1, ?2, ?3, ?4, ?5)");
inline constexpr auto kListFlows =
    JoinSql("SELECT ", kFlowColumns, " FROM flows ORDER BY slug");
inline constexpr std::string_view kDeleteFlow =
    "DELETE FROM flows WHERE slug = ?1";
// The alias and creation time are fixed at creation.
inline constexpr std::string_view kUpdateFlow =
    "UPDATE flows SET definition = ?2, generation = ?3 WHERE slug = ?1";
// One row: the flow's runs started, completed, failed, cancelled. Served by
// runs_by_flow, one pass, no grouping; counting versions is an admin read,
// so visiting each run's row for its status is fine.
inline constexpr std::string_view kCountRuns =
    "SELECT count(*) FILTER (WHERE status = 'started'), "
    "count(*) FILTER (WHERE status = 'completed'), "
    "count(*) FILTER (WHERE status = 'failed'), "
    "count(*) FILTER (WHERE status = 'cancelled') "
    "FROM runs INDEXED BY runs_by_flow WHERE flow_slug = ?1";

inline constexpr auto kGetAlias =
    JoinSql("SELECT ", kAliasColumns, " FROM aliases WHERE alias = ?1");
inline constexpr auto kPutAlias = JoinSql(
    "INSERT INTO aliases (", kAliasColumns,
    ") VALUES (?1, ?2, ?3) ON CONFLICT (alias) DO UPDATE SET "
    "active_slug = excluded.active_slug, updated_at = excluded.updated_at");
inline constexpr auto kListAliases =
    JoinSql("SELECT ", kAliasColumns, " FROM aliases ORDER BY alias");

inline constexpr auto kGetQueue =
    JoinSql("SELECT ", kQueueColumns, " FROM queues WHERE name = ?1");
inline constexpr std::string_view kInsertQueue =
    "INSERT INTO queues (name, owner_flow, created_at, paused, "
    "last_message_id, last_seq) VALUES (?1, ?2, ?3, ?4, 0, 0)";
inline constexpr auto kListQueues =
    JoinSql("SELECT ", kQueueColumns, " FROM queues ORDER BY name");
inline constexpr std::string_view kSetQueuePaused =
    "UPDATE queues SET paused = ?2 WHERE name = ?1";
// DeleteQueue: the queue's messages, live and archived (each by its primary
// key's prefix), then its registry row.
inline constexpr std::string_view kDeleteQueueMessages =
    "DELETE FROM messages WHERE queue_name = ?1";
inline constexpr std::string_view kDeleteQueueArchive =
    "DELETE FROM archived_messages WHERE queue_name = ?1";
inline constexpr std::string_view kDeleteQueue =
    "DELETE FROM queues WHERE name = ?1";

inline constexpr auto kUpsertWorker = JoinSql(
    "INSERT INTO workers (", kWorkerColumns,
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (worker_id) DO UPDATE "
    "SET queue_name = excluded.queue_name, flow_slug = excluded.flow_slug, "
    "started_at = excluded.started_at, "
    "last_heartbeat_at = excluded.last_heartbeat_at, "
    "stopped_at = excluded.stopped_at, served = excluded.served");
inline constexpr auto kListWorkers =
    JoinSql("SELECT ", kWorkerColumns, " FROM workers ORDER BY worker_id");
// Scans the table on purpose: pruning keeps it to the workers of the last
// retention window, and nothing else searches it by time.
inline constexpr std::string_view kDeleteInactiveWorkers =
    "DELETE FROM workers WHERE worker_id IN (SELECT worker_id FROM workers "
    "WHERE last_heartbeat_at < ?1 AND (stopped_at IS NULL OR stopped_at < ?1) "
    "LIMIT ?2)";

// --- Runs ---

// Rows: (run id). The seq of each run that exists.
inline constexpr std::string_view kFindRunSeqs =
    "SELECT j.key, r.seq FROM sluice_rows(?1) AS j "
    "CROSS JOIN runs AS r ON r.run_id = j.c0";
// New runs get seqs above this (NULL for none yet), assigned by the backend
// so it knows them. A bare max() of the rowid reads the b-tree's last entry;
// NOT INDEXED keeps it so (after ANALYZE over a near-empty table SQLite
// chose to scan a whole index instead), and so does leaving out coalesce(),
// which hides the max() from that optimization.
inline constexpr std::string_view kMaxRunSeq =
    "SELECT max(seq) FROM runs NOT INDEXED";
// Rows: (seq, then kRunColumns).
inline constexpr auto kInsertRuns =
    JoinSql("INSERT INTO runs (seq, ", kRunColumns.text,
            ") SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, "
            "c13, c14 FROM sluice_rows(?1)");
// Rows: (run id).
inline constexpr char kRunsById[] =
    " FROM sluice_rows(?1) AS j CROSS JOIN runs AS r ON r.run_id = j.c0";
inline constexpr auto kGetRunsAll =
    JoinSql("SELECT j.key, r.seq, ", kRunColumns.text, kRunsById);
inline constexpr auto kGetRunsNoPayloads =
    JoinSql("SELECT j.key, r.seq, ", kRunStateColumns, kRunsById);
inline constexpr ByFields kGetRuns{kGetRunsAll.view(),
                                   kGetRunsNoPayloads.view()};
// Batch updates take each row's new values from the batch, sorted by key
// (BoundRows::SortByKey), in a correlated subquery that is a binary search
// of it, while the IN list of keys drives the update: one search of the
// table per batch row, whatever ANALYZE's statistics say. (UPDATE ... FROM
// the batch lets the planner put the table in the outer loop, which it did
// after ANALYZE over a near-empty table, and it copies the joined rows into
// a temporary table first.)
//
// Rows: (seq, status, error, finished_at, cancel_requested, output), one
// per run, sorted.
inline constexpr std::string_view kUpdateRuns =
    "UPDATE runs SET (status, error, finished_at, cancel_requested, output) "
    "= (SELECT c1, c2, c3, c4, c5 FROM sluice_rows(?1) WHERE c0 = runs.seq) "
    "WHERE seq IN (SELECT c0 FROM sluice_rows(?1))";
// UpdateRuns and AddRunRemainingSteps as one write of each run. Rows: (seq,
// status, error, finished_at, cancel_requested, output, delta), sorted.
inline constexpr std::string_view kUpdateRunsAndCounters =
    "UPDATE runs SET (status, error, finished_at, cancel_requested, output, "
    "remaining_steps) = (SELECT c1, c2, c3, c4, c5, runs.remaining_steps + c6 "
    "FROM sluice_rows(?1) WHERE c0 = runs.seq) "
    "WHERE seq IN (SELECT c0 FROM sluice_rows(?1))";
// Counters are added to, then read back, in two statements: SQLite runs
// RETURNING like a trigger, which costs more than the pair. Rows: (seq,
// delta), one per run, sorted.
inline constexpr std::string_view kAddRunRemainingSteps =
    "UPDATE runs SET remaining_steps = remaining_steps + "
    "(SELECT c1 FROM sluice_rows(?1) WHERE c0 = runs.seq) "
    "WHERE seq IN (SELECT c0 FROM sluice_rows(?1))";
inline constexpr std::string_view kGetRunRemainingSteps =
    "SELECT j.key, r.remaining_steps FROM sluice_rows(?1) AS j "
    "CROSS JOIN runs AS r ON r.seq = j.c0";
// ListRuns' statement for the shape of `query` (which filters are set, not
// their values, which are bound): a walk of runs_by_flow (one flow, by
// start), runs_by_status (one status across flows, by start),
// runs_by_start, runs_finished_by_flow_status (one flow and one status, by
// finish) or runs_finished in the query's order, which is each index's own
// (the finish indexes' ties, held in insertion order, are sorted by run id
// as they come). Parameters: ?1 the flow (one) or rows (flow slug) (more
// than one); ?2 the status (ListsOneStatusByIndex) or rows (status name);
// ?3 from; ?4 to; ?5 and ?6 the
// `after` position's time and run id. No LIMIT: the caller steps until it has
// `limit` runs that also match the metadata filter. Defined in
// sqlite_tables_listing.cc.
std::string ListRunsSql(const RunQuery& query, Fields fields);
// Whether ListRunsSql's statement for `query` takes its one status as ?2
// (text) rather than as rows: where an index holds that status's runs in
// the query's order.
bool ListsOneStatusByIndex(const RunQuery& query);
// ?1 is the flow; rows: (external key). `external_key <> ''` repeats
// runs_by_key's WHERE clause, which lets SQLite use that partial index.
inline constexpr char kRunsByKey[] =
    " FROM sluice_rows(?2) AS j CROSS JOIN runs AS r INDEXED BY runs_by_key "
    "ON r.flow_slug = ?1 AND r.external_key = j.c0 AND r.external_key <> ''";
inline constexpr auto kFindRunsByKeyAll =
    JoinSql("SELECT j.key, r.seq, ", kRunColumns.text, kRunsByKey);
inline constexpr auto kFindRunsByKeyNoPayloads =
    JoinSql("SELECT j.key, r.seq, ", kRunStateColumns, kRunsByKey);
inline constexpr ByFields kFindRunsByKey{kFindRunsByKeyAll.view(),
                                         kFindRunsByKeyNoPayloads.view()};
// `finished_at IS NOT NULL` repeats runs_finished's WHERE clause, which is
// what lets SQLite use that partial index; the index holds (finished_at,
// seq), so this order (ties in insertion order) is its own. Only ended runs
// have a finished_at; the status test keeps that an assumption about speed, not
// about results.
inline constexpr auto kFindFinishedRuns =
    JoinSql("SELECT ", kRunStateColumns,
            " FROM runs INDEXED BY runs_finished "
            "WHERE finished_at IS NOT NULL AND finished_at < ?1 "
            "AND status IN ('completed', 'failed', 'cancelled') "
            "ORDER BY finished_at, seq LIMIT ?2");

// Deleting runs. Rows: (seq, run id). Messages go first, found through the
// tasks that are deleted next.
inline constexpr char kTasksOfRuns[] =
    "(SELECT t.queue_name, t.message_id FROM sluice_rows(?1) AS j "
    "CROSS JOIN tasks AS t ON t.run_seq = j.c0)";
inline constexpr auto kDeleteRunMessages = JoinSql(
    "DELETE FROM messages WHERE (queue_name, message_id) IN ", kTasksOfRuns);
inline constexpr auto kDeleteRunArchivedMessages =
    JoinSql("DELETE FROM archived_messages WHERE (queue_name, message_id) IN ",
            kTasksOfRuns);
// The one scan: the outbox holds only unapplied reports, and an index on
// run_id would cost every report more than this costs (sqlite_schema_parts.h).
inline constexpr std::string_view kDeleteRunReports =
    "DELETE FROM outbox WHERE run_id IN (SELECT c1 FROM sluice_rows(?1))";
inline constexpr std::string_view kDeleteRunAttempts =
    "DELETE FROM attempts WHERE run_seq IN (SELECT c0 FROM sluice_rows(?1))";
inline constexpr std::string_view kDeleteRunTasks =
    "DELETE FROM tasks WHERE run_seq IN (SELECT c0 FROM sluice_rows(?1))";
inline constexpr std::string_view kDeleteRunStepStates =
    "DELETE FROM step_states WHERE run_seq IN (SELECT c0 FROM "
    "sluice_rows(?1))";
inline constexpr std::string_view kDeleteRuns =
    "DELETE FROM runs WHERE seq IN (SELECT c0 FROM sluice_rows(?1))";

// --- Step states ---

// Rows: (run seq, then kStepStateColumns).
inline constexpr auto kInsertStepStates =
    JoinSql("INSERT INTO step_states (run_seq, ", kStepStateColumns.text,
            ") SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 "
            "FROM sluice_rows(?1)");
// Rows: (run seq). A run's states come in primary key (step) order.
inline constexpr char kStepStatesOfRuns[] =
    " FROM sluice_rows(?1) AS j CROSS JOIN step_states AS s "
    "ON s.run_seq = j.c0";
inline constexpr auto kGetStepStatesAll =
    JoinSql("SELECT j.key, ", kStepStateColumns.text, kStepStatesOfRuns);
inline constexpr auto kGetStepStatesNoPayloads =
    JoinSql("SELECT j.key, ", kStepStateStateColumns, kStepStatesOfRuns);
inline constexpr ByFields kGetStepStates{kGetStepStatesAll.view(),
                                         kGetStepStatesNoPayloads.view()};
// One row per execution: rewriting a wide row costs the same either way,
// and the UPDATE ... FROM a batch adds a fixed cost of its own.
inline constexpr std::string_view kUpdateStepState =
    "UPDATE step_states SET status = ?3, initial_tasks = ?4, error = ?5, "
    "skip_reason = ?6, started_at = ?7, finished_at = ?8, output = ?9 "
    "WHERE run_seq = ?1 AND step_index = ?2";
// Rows: (run seq, step index, remaining_tasks delta, remaining_deps delta),
// one per step, sorted. A map step's task count is unknown (NULL) until it
// starts; any delta counts it from zero and sets it (backend.h).
inline constexpr std::string_view kAddStepCounters =
    "UPDATE step_states SET (remaining_tasks, remaining_deps) = "
    "(SELECT coalesce(step_states.remaining_tasks, 0) + c2, "
    "step_states.remaining_deps + c3 FROM sluice_rows(?1) "
    "WHERE c0 = step_states.run_seq AND c1 = step_states.step_index) "
    "WHERE (run_seq, step_index) IN (SELECT c0, c1 FROM sluice_rows(?1))";
inline constexpr std::string_view kGetStepCounters =
    "SELECT j.key, s.remaining_tasks, s.remaining_deps "
    "FROM sluice_rows(?1) AS j CROSS JOIN step_states AS s "
    "ON s.run_seq = j.c0 AND s.step_index = j.c1";

// --- Tasks ---

// Rows: (run seq, then kTaskColumns).
inline constexpr auto kInsertTasks = JoinSql(
    "INSERT INTO tasks (run_seq, ", kTaskColumns.text,
    ") SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, "
    "c14, c15, c16, c17, c18, c19, c20 FROM sluice_rows(?1)");

// Rows: (run seq, step index, task index).
inline constexpr char kTasksByKey[] =
    " FROM sluice_rows(?1) AS j CROSS JOIN tasks AS t ON t.run_seq = j.c0 "
    "AND t.step_index = j.c1 AND t.task_index = j.c2";
inline constexpr auto kGetTasksAll =
    JoinSql("SELECT j.key, ", kTaskColumns.text, kTasksByKey);
inline constexpr auto kGetTasksNoPayloads =
    JoinSql("SELECT j.key, ", kTaskStateColumns, kTasksByKey);
inline constexpr ByFields kGetTasks{kGetTasksAll.view(),
                                    kGetTasksNoPayloads.view()};

// ?1 is the queue; rows: (message id). Each task comes with its run's seq,
// which the claim's task updates then need not look up.
inline constexpr char kTasksByMessage[] =
    " FROM sluice_rows(?2) AS j CROSS JOIN tasks AS t "
    "ON t.queue_name = ?1 AND t.message_id = j.c0";
inline constexpr auto kGetTasksByMessageAll =
    JoinSql("SELECT j.key, t.run_seq, ", kTaskColumns.text, kTasksByMessage);
inline constexpr auto kGetTasksByMessageNoPayloads =
    JoinSql("SELECT j.key, t.run_seq, ", kTaskStateColumns, kTasksByMessage);
inline constexpr ByFields kGetTasksByMessage{
    kGetTasksByMessageAll.view(), kGetTasksByMessageNoPayloads.view()};

// One row per execution: updates of one call apply in order, and a later
// one may expect what an earlier one wrote (compare-and-set).
inline constexpr char kUpdateTaskSet[] =
    "UPDATE tasks SET status = ?4, attempts = ?5, error = ?6, "
    "started_at = ?7, finished_at = ?8, stall_at = ?9, requeued_count = ?10, "
    "worker_id = ?11, output = ?12, budget_start = ?15, "
    "cancel_requested = ?16";
inline constexpr char kUpdateTaskWhere[] =
    " WHERE run_seq = ?1 AND step_index = ?2 AND task_index = ?3 "
    "AND status = ?13 AND attempts = ?14 "
    "AND (?18 IS NULL OR cancel_requested = ?18)";
// SQLite rewrites an index entry for every column the SET names, whether
// or not its value changes. A task keeps its message except when RetryRun
// gives it a new one, so the update is first tried for the same message
// without naming message_id: the UNIQUE (queue_name, message_id) entry
// stays as it is. Only if that changes no row is the full update run.
inline constexpr auto kUpdateTaskSameMessage =
    JoinSql(kUpdateTaskSet, kUpdateTaskWhere, " AND message_id = ?17");
inline constexpr auto kUpdateTask =
    JoinSql(kUpdateTaskSet, ", message_id = ?17", kUpdateTaskWhere);

// ?1 is the run's seq. The run's (or step's) tasks are read by primary key
// and the finished ones skipped: no index of unfinished tasks, whose upkeep
// every task's status change paid for (decision 0062).
inline constexpr char kTaskUnfinished[] =
    "status IN ('queued', 'started', 'waiting')";
inline constexpr auto kUnfinishedOfRunWhere =
    JoinSql(" FROM tasks WHERE run_seq = ?1 AND ", kTaskUnfinished,
            " ORDER BY step_index, task_index");
inline constexpr auto kUnfinishedOfRunAll =
    JoinSql("SELECT ", kTaskColumns.text, kUnfinishedOfRunWhere.text);
inline constexpr auto kUnfinishedOfRunNoPayloads =
    JoinSql("SELECT ", kTaskStateColumns, kUnfinishedOfRunWhere.text);
inline constexpr ByFields kUnfinishedOfRun{kUnfinishedOfRunAll.view(),
                                           kUnfinishedOfRunNoPayloads.view()};

inline constexpr auto kUnfinishedOfStepWhere =
    JoinSql(" FROM tasks WHERE run_seq = ?1 AND step_index = ?2 AND ",
            kTaskUnfinished, " ORDER BY task_index");
inline constexpr auto kUnfinishedOfStepAll =
    JoinSql("SELECT ", kTaskColumns.text, kUnfinishedOfStepWhere.text);
inline constexpr auto kUnfinishedOfStepNoPayloads =
    JoinSql("SELECT ", kTaskStateColumns, kUnfinishedOfStepWhere.text);
inline constexpr ByFields kUnfinishedOfStep{kUnfinishedOfStepAll.view(),
                                            kUnfinishedOfStepNoPayloads.view()};

// ?1 is the run's seq.
inline constexpr auto kListTasks =
    JoinSql("SELECT ", kTaskColumns.text,
            " FROM tasks WHERE run_seq = ?1 ORDER BY step_index, task_index");
// Rows: (run seq, step index). A step's tasks come in primary key (task)
// order.
inline constexpr std::string_view kGetTaskOutputs =
    "SELECT j.key, t.task_index, t.output FROM sluice_rows(?1) AS j "
    "CROSS JOIN tasks AS t ON t.run_seq = j.c0 AND t.step_index = j.c1";
// A started task's message has been read and is visible by ?3 at the latest
// (the engine's lease rule, decision 0064), so the stalled tasks are among
// the read messages due by ?3: one range of messages_read per queue, each
// message's task by tasks' UNIQUE (queue_name, message_id) (decision 0087).
// The few found are sorted by stall time, run insertion and key.
inline constexpr char kDueReadMessages[] =
    "WITH due (q, id) AS (SELECT queue_name, message_id "
    "FROM messages INDEXED BY messages_read "
    "WHERE queue_name IN (SELECT name FROM queues) AND read_count > 0 "
    "AND visible_at <= ?3) SELECT ";
inline constexpr char kStalledWhere[] =
    " FROM due CROSS JOIN tasks ON queue_name = due.q AND message_id = due.id "
    "WHERE status = 'started' AND stall_at < ?1 "
    "ORDER BY stall_at, run_seq, step_index, task_index LIMIT ?2";
inline constexpr auto kFindStalledTasksAll =
    JoinSql(kDueReadMessages, kTaskColumns.text, kStalledWhere);
inline constexpr auto kFindStalledTasksNoPayloads =
    JoinSql(kDueReadMessages, kTaskStateColumns, kStalledWhere);
inline constexpr ByFields kFindStalledTasks{kFindStalledTasksAll.view(),
                                            kFindStalledTasksNoPayloads.view()};

// A queue's tasks by state, in one pass over the queue's tasks through
// tasks' UNIQUE (queue_name, message_id); a queued task's message (by its
// primary key) says whether it is waiting (visible at ?2) or delayed. A
// queued task without a live message can't be claimed: it counts as
// delayed. Conditional sums rather than GROUP BY, which would sort. A
// waiting (parked) task counts as parked.
inline constexpr std::string_view kCountTasks =
    "SELECT sum(t.status = 'queued' AND m.visible_at <= ?2), "
    "sum(t.status = 'queued' AND (m.visible_at IS NULL OR m.visible_at > ?2)), "
    "sum(t.status = 'started'), sum(t.status = 'completed'), "
    "sum(t.status = 'failed'), sum(t.status = 'cancelled'), "
    "sum(t.status = 'skipped'), sum(t.status = 'waiting'), "
    "min(CASE WHEN t.status = 'queued' AND m.visible_at <= ?2 "
    "THEN m.visible_at END) FROM tasks AS t LEFT JOIN messages AS m "
    "ON t.status = 'queued' AND m.queue_name = t.queue_name "
    "AND m.message_id = t.message_id WHERE t.queue_name = ?1";
// The same first three counts and the oldest wait, in one pass over the
// queue's live messages (by primary key) and each one's task
// through tasks' UNIQUE (queue_name, message_id): ended tasks, which have no
// live message, cost nothing. CROSS JOIN keeps the messages outer.
inline constexpr std::string_view kCountTasksInFlight =
    "SELECT sum(t.status = 'queued' AND m.visible_at <= ?2), "
    "sum(t.status = 'queued' AND m.visible_at > ?2), "
    "sum(t.status = 'started'), "
    "min(CASE WHEN t.status = 'queued' AND m.visible_at <= ?2 "
    "THEN m.visible_at END) FROM messages AS m CROSS JOIN tasks AS t "
    "WHERE m.queue_name = ?1 AND t.queue_name = m.queue_name "
    "AND t.message_id = m.message_id";

// --- The attempts ledger ---

// Rows: (run seq, then kAttemptColumns).
inline constexpr auto kAppendAttempts =
    JoinSql("INSERT INTO attempts (run_seq, ", kAttemptColumns,
            ") SELECT c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 "
            "FROM sluice_rows(?1)");
// ?1 is the run's seq; the primary key's order.
inline constexpr auto kListAttempts =
    JoinSql("SELECT ", kAttemptColumns,
            " FROM attempts WHERE run_seq = ?1 "
            "ORDER BY step_index, task_index, attempt");

// --- The dedupe registry ---

inline constexpr auto kGetDedupe =
    JoinSql("SELECT ", kDedupeColumns,
            " FROM dedupe WHERE flow_slug = ?1 AND key = ?2");
inline constexpr auto kPutDedupe = JoinSql(
    "INSERT INTO dedupe (", kDedupeColumns,
    ") VALUES (?1, ?2, ?3, ?4) ON CONFLICT (flow_slug, key) DO UPDATE SET "
    "run_id = excluded.run_id, expires_at = excluded.expires_at");
inline constexpr std::string_view kDeleteDedupe =
    "DELETE FROM dedupe WHERE flow_slug = ?1 AND key = ?2 AND run_id = ?3";
// `expires_at IS NOT NULL` repeats dedupe_expiring's WHERE clause, which
// lets SQLite use that partial index.
inline constexpr std::string_view kDeleteExpiredDedupe =
    "DELETE FROM dedupe WHERE (flow_slug, key) IN (SELECT flow_slug, key "
    "FROM dedupe INDEXED BY dedupe_expiring WHERE expires_at IS NOT NULL "
    "AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2)";

// --- The outbox ---

// Rows: (run id, step index, task index, flow, kind, created_at). Inserted
// in batch order, so AUTOINCREMENT hands out consecutive ids in that order.
inline constexpr std::string_view kAppendReports =
    "INSERT INTO outbox (run_id, step_index, task_index, flow_slug, kind, "
    "created_at) SELECT c0, c1, c2, c3, c4, c5 FROM sluice_rows(?1) "
    "ORDER BY key";
// Rows: (report id).
inline constexpr auto kTakeReports = JoinSql(
    "DELETE FROM outbox WHERE report_id IN (SELECT c0 FROM "
    "sluice_rows(?1)) RETURNING ",
    kReportColumns);
inline constexpr auto kTakeStaleReports = JoinSql(
    "DELETE FROM outbox WHERE report_id IN (SELECT report_id FROM outbox "
    "INDEXED BY outbox_by_created WHERE created_at < ?1 ORDER BY created_at, "
    "report_id LIMIT ?2) "
    "RETURNING ",
    kReportColumns);
inline constexpr std::string_view kCountReports = "SELECT count(*) FROM outbox";

// --- Queue messages ---

// Reserves the next ids and FIFO seqs in one step and proves the queue
// exists.
inline constexpr std::string_view kReserveMessageIds =
    "UPDATE queues SET last_message_id = last_message_id + ?2, "
    "last_seq = last_seq + ?2 WHERE name = ?1 "
    "RETURNING last_message_id, last_seq";
// Reserves the next FIFO seqs, for messages sent to the tail.
inline constexpr std::string_view kReserveSeqs =
    "UPDATE queues SET last_seq = last_seq + ?2 WHERE name = ?1 "
    "RETURNING last_seq";
// ?1 is the queue, ?2 the send time; rows: (message id, seq, priority,
// visible_at, body).
inline constexpr std::string_view kInsertMessages =
    "INSERT INTO messages (queue_name, message_id, seq, priority, "
    "read_count, enqueued_at, visible_at, body) "
    "SELECT ?1, c0, c1, c2, 0, ?2, c3, c4 FROM sluice_rows(?3)";
// A claim's read of messages: the ready ones walked in claim order from
// the queue's first entry (never sorted: each is visible, and none is in
// flight or delayed), then, if a probe finds any delayed or read message
// due at ?2, those due ones too, each kind in claim order; the caller
// merges them (decision 0080). ?1 the queue, ?2 now, ?3 the limit; rows:
// seq, then the message's columns. A last statement hides what was chosen:
// ?1 the queue, ?2 the new visible_at. One UPDATE ... RETURNING did both,
// but SQLite runs RETURNING like a trigger, through a table of its own,
// and the claim's read then cost about 40% more instructions (decision
// 0074).
inline constexpr char kChooseReadyFrom[] =
    " FROM messages INDEXED BY messages_ready WHERE queue_name = ?1 AND "
    "read_count = 0 AND visible_at <= enqueued_at ORDER BY priority DESC, "
    "seq LIMIT ?3";
// A queue's (?1) delayed and read messages, through their partial indexes,
// whose predicates each spells as the index does (sqlite_schema_parts.h).
inline constexpr char kDelayedMessages[] =
    "messages INDEXED BY messages_delayed WHERE queue_name = ?1 AND "
    "read_count = 0 AND visible_at > enqueued_at";
inline constexpr char kReadMessages[] =
    "messages INDEXED BY messages_read WHERE queue_name = ?1 AND "
    "read_count > 0";
// The due delayed and read messages: at most 10,000 of each, the earliest
// due first, then in claim order, so that a storm of due retries or of
// jobs scheduled for one moment costs each claim that many lookups, not a
// sort of them all (decision 0080).
inline constexpr char kDueIn[] =
    " FROM messages WHERE queue_name = ?1 AND message_id IN (SELECT "
    "message_id FROM ";
inline constexpr char kDueFirst[] =
    " AND visible_at <= ?2 ORDER BY visible_at LIMIT 10000) ORDER BY "
    "priority DESC, seq LIMIT ?3";
inline constexpr auto kChooseDelayedFrom =
    JoinSql(kDueIn, kDelayedMessages, kDueFirst);
inline constexpr auto kChooseReadFrom =
    JoinSql(kDueIn, kReadMessages, kDueFirst);
inline constexpr auto kChooseReadyAll =
    JoinSql("SELECT seq, ", kMessageColumns.text, kChooseReadyFrom);
inline constexpr auto kChooseReadyNoPayloads =
    JoinSql("SELECT seq, ", kMessageStateColumns, kChooseReadyFrom);
inline constexpr auto kChooseDelayedAll =
    JoinSql("SELECT seq, ", kMessageColumns.text, kChooseDelayedFrom.text);
inline constexpr auto kChooseDelayedNoPayloads =
    JoinSql("SELECT seq, ", kMessageStateColumns, kChooseDelayedFrom.text);
inline constexpr auto kChooseReadAll =
    JoinSql("SELECT seq, ", kMessageColumns.text, kChooseReadFrom.text);
inline constexpr auto kChooseReadNoPayloads =
    JoinSql("SELECT seq, ", kMessageStateColumns, kChooseReadFrom.text);
inline constexpr ByFields kChooseReady{kChooseReadyAll.view(),
                                       kChooseReadyNoPayloads.view()};
inline constexpr ByFields kChooseDelayed{kChooseDelayedAll.view(),
                                         kChooseDelayedNoPayloads.view()};
inline constexpr ByFields kChooseRead{kChooseReadAll.view(),
                                      kChooseReadNoPayloads.view()};
// 1 if any delayed or read message of queue ?1 is due at ?2: one probe of
// each index.
inline constexpr auto kAnyDue =
    JoinSql("SELECT EXISTS (SELECT 1 FROM ", kDelayedMessages,
            " AND visible_at <= ?2) OR EXISTS (SELECT 1 FROM ", kReadMessages,
            " AND visible_at <= ?2)");
inline constexpr std::string_view kHideMessages =
    "UPDATE messages SET visible_at = ?2, read_count = read_count + 1 "
    "WHERE queue_name = ?1 AND message_id IN (SELECT c0 FROM sluice_rows(?3))";
inline constexpr std::string_view kSetVisibility =
    "UPDATE messages SET visible_at = ?3 "
    "WHERE queue_name = ?1 AND message_id = ?2";
inline constexpr std::string_view kSetVisibilityToTail =
    "UPDATE messages SET visible_at = ?3, seq = ?4 "
    "WHERE queue_name = ?1 AND message_id = ?2";
// The earlier of the first entries after ?2 of messages_delayed and
// messages_read (a ready message was visible when sent); the aggregate
// min() skips a NULL from an index with none.
inline constexpr auto kNextVisibleAt = JoinSql(
    "SELECT min(v) FROM (SELECT (SELECT visible_at FROM ", kDelayedMessages,
    " AND visible_at > ?2 ORDER BY visible_at LIMIT 1) AS v UNION ALL SELECT "
    "(SELECT visible_at FROM ",
    kReadMessages, " AND visible_at > ?2 ORDER BY visible_at LIMIT 1))");
// Archiving copies the live messages among the ids (rows: (message id)
// bound as ?2), then deletes the same set: two statements per batch.
inline constexpr std::string_view kCopyToArchive =
    "INSERT INTO archived_messages (queue_name, message_id, priority, "
    "read_count, enqueued_at, visible_at, archived_at, body) SELECT "
    "queue_name, message_id, priority, read_count, enqueued_at, visible_at, "
    "?3, body FROM messages "
    "WHERE queue_name = ?1 AND message_id IN (SELECT c0 FROM sluice_rows(?2))";
inline constexpr std::string_view kDeleteMessages =
    "DELETE FROM messages WHERE queue_name = ?1 AND message_id IN "
    "(SELECT c0 FROM sluice_rows(?2))";
// Both lookups read kMessageColumns, then archived_at (NULL when live).
inline constexpr auto kLookupLive =
    JoinSql("SELECT ", kMessageColumns.text,
            ", NULL FROM messages WHERE queue_name = ?1 AND message_id = ?2");
inline constexpr auto kLookupArchived =
    JoinSql("SELECT ", kMessageColumns.text,
            ", archived_at FROM archived_messages "
            "WHERE queue_name = ?1 AND message_id = ?2");

}  // namespace sluice::sqlite_internal::sql

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_
