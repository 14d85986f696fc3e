// Every SQL statement the SQLite backend runs on its hot paths, in one place
// so tests can check each one's query plan (sqlite_backend_test.cc).
// Parameters are numbered (?1...) and always bound, never formatted in.
//
// Statements served by a secondary index name it with INDEXED BY: hot
// queries must use their index whatever the statistics say (after ANALYZE
// over a few rows SQLite preferred a table scan for FindStalledTasks), and
// INDEXED BY turns a lost index into a prepare error instead of a silent
// full scan. Key lookups need no hint: an equality on a whole primary or
// unique key always wins.
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_

#include <string_view>

#include "sluice/backend.h"
#include "sqlite_rows.h"
#include "sqlite_statement.h"

namespace sluice::sqlite_internal::sql {

// Step states and tasks are keyed by their run's `seq`, not its random
// UUID, so each run's rows land together at the end of those b-trees instead
// of dirtying a random page per row. Statements take the run id as ?1 and
// resolve it with this subquery (one search of runs' run_id index).
inline constexpr char kRunSeq[] = "(SELECT seq FROM runs WHERE run_id = ?1)";
inline constexpr std::string_view kGetRunSeq =
    "SELECT seq FROM runs WHERE run_id = ?1";

// The ids in a JSON array bound as ?1 (or ?2), for batch statements. IN
// makes a set of them, so a repeated id counts once.
inline constexpr char kIdList[] = "(SELECT value FROM json_each(?1))";
inline constexpr char kIdList2[] = "(SELECT value FROM json_each(?2))";

// --- Flows, queues, runs, step states, workers ---

inline constexpr auto kGetFlow =
    JoinSql("SELECT ", kFlowColumns, " FROM flows WHERE slug = ?1");
inline constexpr auto kInsertFlow =
    JoinSql("INSERT INTO flows (", kFlowColumns, ") VALUES (?1, ?2, ?3)");
inline constexpr auto kListFlows =
    JoinSql("SELECT ", kFlowColumns, " FROM flows ORDER BY slug");

inline constexpr auto kGetQueue =
    JoinSql("SELECT ", kQueueColumns, " FROM queues WHERE name = ?1");
inline constexpr std::string_view kInsertQueue =
    "INSERT INTO queues (name, owner_flow, created_at, last_message_id) "
    "VALUES (?1, ?2, ?3, 0)";

inline constexpr auto kInsertRun =
    JoinSql("INSERT INTO runs (", kRunColumns,
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
inline constexpr auto kGetRun =
    JoinSql("SELECT ", kRunColumns, " FROM runs WHERE run_id = ?1");
inline constexpr std::string_view kUpdateRun =
    "UPDATE runs SET status = ?2, output = ?3, remaining_steps = ?4, "
    "error = ?5, finished_at = ?6 WHERE run_id = ?1";
// Counters are added to, then read back, in two statements: SQLite runs
// RETURNING like a trigger, which costs every such UPDATE a statement
// journal (about 30% more than the pair, measured).
inline constexpr std::string_view kAddRunRemainingSteps =
    "UPDATE runs SET remaining_steps = remaining_steps + ?2 "
    "WHERE run_id = ?1";
inline constexpr std::string_view kGetRunRemainingSteps =
    "SELECT remaining_steps FROM runs WHERE run_id = ?1";
// `seq` breaks started_at ties: the later insert is the newer run.
inline constexpr auto kListRunsOfFlow =
    JoinSql("SELECT ", kRunColumns,
            " FROM runs INDEXED BY runs_by_flow WHERE flow_slug = ?1 "
            "ORDER BY started_at DESC, seq DESC LIMIT ?2");
inline constexpr auto kListAllRuns =
    JoinSql("SELECT ", kRunColumns,
            " FROM runs INDEXED BY runs_by_start "
            "ORDER BY started_at DESC, seq DESC LIMIT ?1");

// ?13 is the run's seq, which the caller looked up (and so knows the run
// exists).
inline constexpr auto kInsertStepState = JoinSql(
    "INSERT INTO step_states (", kStepStateColumns,
    ", run_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
    "?13)");
inline constexpr auto kGetStepStates = JoinSql(
    "SELECT ", kStepStateColumns, " FROM step_states WHERE run_seq = ", kRunSeq,
    " ORDER BY step_index");
inline constexpr auto kUpdateStepState = JoinSql(
    "UPDATE step_states SET status = ?3, initial_tasks = ?4, "
    "remaining_tasks = ?5, output = ?6, error = ?7, skip_reason = ?8, "
    "started_at = ?9, finished_at = ?10 WHERE run_seq = ",
    kRunSeq, " AND step_index = ?2");
// A map step's task count is unknown (NULL) until it starts; adding to it
// before then counts from zero.
inline constexpr auto kAddStepRemainingTasks = JoinSql(
    "UPDATE step_states SET remaining_tasks = coalesce(remaining_tasks, 0) + "
    "?3 WHERE run_seq = ",
    kRunSeq, " AND step_index = ?2");
inline constexpr auto kGetStepRemainingTasks =
    JoinSql("SELECT remaining_tasks FROM step_states WHERE run_seq = ", kRunSeq,
            " AND step_index = ?2");
inline constexpr auto kAddStepRemainingDeps = JoinSql(
    "UPDATE step_states SET remaining_deps = remaining_deps + ?3 "
    "WHERE run_seq = ",
    kRunSeq, " AND step_index = ?2");
inline constexpr auto kGetStepRemainingDeps =
    JoinSql("SELECT remaining_deps FROM step_states WHERE run_seq = ", kRunSeq,
            " AND step_index = ?2");

inline constexpr auto kUpsertWorker = JoinSql(
    "INSERT INTO workers (", kWorkerColumns,
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (worker_id) DO UPDATE SET "
    "queue_name = excluded.queue_name, flow_slug = excluded.flow_slug, "
    "started_at = excluded.started_at, "
    "last_heartbeat_at = excluded.last_heartbeat_at, "
    "stopped_at = excluded.stopped_at");
inline constexpr auto kListWorkers =
    JoinSql("SELECT ", kWorkerColumns, " FROM workers ORDER BY worker_id");

// --- Tasks and the outbox ---

// Every task read comes in two shapes: all columns (kAll) or state only.
struct TaskQuery {
  std::string_view all;
  std::string_view state_only;

  std::string_view For(TaskFields fields) const {
    return fields == TaskFields::kAll ? all : state_only;
  }
};

// ?18 is the run's seq, which the caller looked up.
inline constexpr auto kInsertTask = JoinSql(
    "INSERT INTO tasks (", kTaskColumns.text,
    ", run_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
    "?13, ?14, ?15, ?16, ?17, ?18)");

inline constexpr auto kByKey =
    JoinSql(" FROM tasks WHERE run_seq = ", kRunSeq,
            " AND step_index = ?2 AND task_index = ?3");
inline constexpr auto kGetTaskAll =
    JoinSql("SELECT ", kTaskColumns.text, kByKey.text);
inline constexpr auto kGetTaskState =
    JoinSql("SELECT ", kTaskStateColumns, kByKey.text);
inline constexpr TaskQuery kGetTask{kGetTaskAll.view(), kGetTaskState.view()};

inline constexpr char kByMessage[] =
    " FROM tasks WHERE queue_name = ?1 AND message_id = ?2";
inline constexpr auto kGetTaskByMessageAll =
    JoinSql("SELECT ", kTaskColumns.text, kByMessage);
inline constexpr auto kGetTaskByMessageState =
    JoinSql("SELECT ", kTaskStateColumns, kByMessage);
inline constexpr TaskQuery kGetTaskByMessage{kGetTaskByMessageAll.view(),
                                             kGetTaskByMessageState.view()};

// The status condition repeats tasks_unfinished's WHERE clause word for word,
// which is what lets SQLite use that partial index.
inline constexpr auto kUnfinishedOfRunWhere =
    JoinSql(" FROM tasks INDEXED BY tasks_unfinished WHERE run_seq = ", kRunSeq,
            " AND status IN ('queued', 'started') "
            "ORDER BY step_index, task_index");
inline constexpr auto kUnfinishedOfRunAll =
    JoinSql("SELECT ", kTaskColumns.text, kUnfinishedOfRunWhere.text);
inline constexpr auto kUnfinishedOfRunState =
    JoinSql("SELECT ", kTaskStateColumns, kUnfinishedOfRunWhere.text);
inline constexpr TaskQuery kUnfinishedOfRun{kUnfinishedOfRunAll.view(),
                                            kUnfinishedOfRunState.view()};

inline constexpr auto kUnfinishedOfStepWhere =
    JoinSql(" FROM tasks INDEXED BY tasks_unfinished WHERE run_seq = ", kRunSeq,
            " AND step_index = ?2 AND status IN ('queued', 'started') "
            "ORDER BY task_index");
inline constexpr auto kUnfinishedOfStepAll =
    JoinSql("SELECT ", kTaskColumns.text, kUnfinishedOfStepWhere.text);
inline constexpr auto kUnfinishedOfStepState =
    JoinSql("SELECT ", kTaskStateColumns, kUnfinishedOfStepWhere.text);
inline constexpr TaskQuery kUnfinishedOfStep{kUnfinishedOfStepAll.view(),
                                             kUnfinishedOfStepState.view()};

inline constexpr auto kListTasks = JoinSql(
    "SELECT ", kTaskColumns.text, " FROM tasks WHERE run_seq = ", kRunSeq,
    " ORDER BY step_index, task_index");
inline constexpr auto kGetTaskOutputs =
    JoinSql("SELECT output FROM tasks WHERE run_seq = ", kRunSeq,
            " AND step_index = ?2 ORDER BY task_index");
// tasks_stalled holds (stall_at, then the primary key), so this order is the
// index's own.
inline constexpr auto kFindStalledTasks =
    JoinSql("SELECT ", kTaskColumns.text,
            " FROM tasks INDEXED BY tasks_stalled "
            "WHERE status = 'started' AND stall_at < ?1 "
            "ORDER BY stall_at, run_seq, step_index, task_index LIMIT ?2");

inline constexpr auto kUpdateTask = JoinSql(
    "UPDATE tasks SET status = ?4, attempts = ?5, output = ?6, error = ?7, "
    "started_at = ?8, finished_at = ?9, stall_at = ?10, requeued_count = ?11, "
    "worker_id = ?12 WHERE run_seq = ",
    kRunSeq,
    " AND step_index = ?2 AND task_index = ?3 AND status = ?13 "
    "AND attempts = ?14");

inline constexpr std::string_view kAppendReport =
    "INSERT INTO outbox (run_id, step_index, task_index, flow_slug, kind, "
    "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
// ?1 is a JSON array of ids (BindIdList): one statement takes a whole batch.
inline constexpr auto kTakeReports =
    JoinSql("DELETE FROM outbox WHERE report_id IN ", kIdList, " RETURNING ",
            kReportColumns);
inline constexpr auto kTakeStaleReports = JoinSql(
    "DELETE FROM outbox WHERE report_id IN (SELECT report_id FROM outbox "
    "INDEXED BY outbox_by_created WHERE created_at < ?1 ORDER BY created_at, "
    "report_id LIMIT ?2) "
    "RETURNING ",
    kReportColumns);
inline constexpr std::string_view kCountReports = "SELECT count(*) FROM outbox";

// --- Queue messages ---

// Reserves the next ids in one step and proves the queue exists.
inline constexpr std::string_view kReserveMessageIds =
    "UPDATE queues SET last_message_id = last_message_id + ?2 "
    "WHERE name = ?1 RETURNING last_message_id";
inline constexpr std::string_view kInsertMessage =
    "INSERT INTO messages (queue_name, message_id, read_count, enqueued_at, "
    "visible_at, body) VALUES (?1, ?2, 0, ?3, ?4, ?5)";
// The subquery walks the primary key from the queue's lowest id, so it reads
// only the in-flight or delayed messages ahead of the first visible ones.
inline constexpr auto kReadMessages = JoinSql(
    "UPDATE messages SET visible_at = ?3, read_count = read_count + 1 "
    "WHERE queue_name = ?1 AND message_id IN (SELECT message_id FROM messages "
    "WHERE queue_name = ?1 AND visible_at <= ?2 ORDER BY message_id "
    "LIMIT ?4) RETURNING ",
    kMessageColumns);
inline constexpr std::string_view kSetVisibility =
    "UPDATE messages SET visible_at = ?3 "
    "WHERE queue_name = ?1 AND message_id = ?2";
// Archiving copies the live messages among the ids in ?2 (a JSON array),
// then deletes the same set: two statements per batch.
inline constexpr auto kCopyToArchive = JoinSql(
    "INSERT INTO archived_messages (queue_name, message_id, read_count, "
    "enqueued_at, visible_at, body, archived_at) SELECT queue_name, "
    "message_id, read_count, enqueued_at, visible_at, body, ?3 FROM messages "
    "WHERE queue_name = ?1 AND message_id IN ",
    kIdList2);
inline constexpr auto kDeleteMessages = JoinSql(
    "DELETE FROM messages WHERE queue_name = ?1 AND message_id IN ", kIdList2);
inline constexpr auto kLookupLive =
    JoinSql("SELECT ", kMessageColumns,
            " FROM messages WHERE queue_name = ?1 AND message_id = ?2");
inline constexpr auto kLookupArchived = JoinSql(
    "SELECT ", kMessageColumns,
    " FROM archived_messages WHERE queue_name = ?1 AND message_id = ?2");

}  // namespace sluice::sqlite_internal::sql

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_SQL_H_
