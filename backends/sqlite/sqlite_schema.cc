#include "sqlite_schema.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_join.h"
#include "sluice/internal/status_macros.h"
#include "sluice/internal/strings.h"
#include "sqlite_backend.h"
#include "sqlite_status.h"

namespace sluice::sqlite_internal {
namespace {

// Schema version 1. (No file with an earlier layout was ever deployed, so
// version 1 changed in place when the interface grew batch reads, retention
// and Fields; see docs/decisions/0010-sqlite-backend.md.)
//
// Encoding: JSON as TEXT (NULL = absent, 'null' = JSON null); times as
// INTEGER microseconds since the Unix epoch; run ids as canonical UUID text;
// enums as their ToString() names. Tables keyed by their natural key are
// WITHOUT ROWID, so a key lookup is one b-tree search and there is no second
// rowid b-tree to maintain. JSON payloads are the last columns of their
// rows: a kNoPayloads read stops before them, and a large payload spilling
// onto overflow pages never has to be read for the columns after it.
//
// Hot statements and the index that serves each:
//   read a queue            messages PK (queue_name, message_id), filtered on
//                           visible_at: takes the lowest visible ids in order
//                           and skips only in-flight or delayed messages
//   send                    queues PK: last_message_id is the queue's id
//                           sequence (ids never reused, even after archive)
//   tasks by message        tasks UNIQUE (queue_name, message_id)
//   unfinished tasks        tasks_unfinished (partial: queued or started)
//   stalled tasks           tasks_stalled (partial: started), by stall_at
//   stale reports           outbox_by_created
//   runs of a flow / all    runs_by_flow / runs_by_start, newest first
//   finished runs           runs_finished (partial: finished_at set)
//   a run by id             runs UNIQUE (run_id), once per transaction: the
//                           transaction remembers each run's seq
//   a run by seq            runs' rowid
//   a run's steps / tasks   their PK (run_seq, ...)
//   deleting a run          its tasks by PK; their messages (live and
//                           archived) by (queue_name, message_id); its
//                           reports by a scan of the outbox (see below)
//
// Run ids used to be random UUIDs, and keying step_states and tasks by them
// would put every new row on a random b-tree page. So runs get an
// insertion-ordered `seq` (explicit INTEGER PRIMARY KEY, which VACUUM can't
// renumber), and step_states and tasks are keyed by (run_seq, ...): a run's
// rows sit together at the growing end of each b-tree, and a seq is an
// integer compare where a run id is a 36-byte one. Only runs' run_id index
// is searched by id. Rows keep run_id too, so reads need no join. A step
// state or task therefore needs its run to exist. `seq` also breaks
// started_at and finished_at ties by insertion order. outbox ids come from
// AUTOINCREMENT so a taken report's id is never handed out again.
//
// Partial indexes test cheap conditions: runs_finished holds the runs whose
// finished_at is set (only ended runs have one) rather than testing status
// IN (three names), which SQLite evaluates for the old and the new row of
// every UPDATE of runs; that alone cost more than the index insert
// (measured: about 1.5 us per run).
//
// The outbox has no index on run_id: it holds only reports not yet applied
// (a handful, normally), and such an index would cost every report an
// insert and a delete (about 1 us per job, measured) to serve DeleteRuns,
// which scans the outbox instead and almost never finds anything there.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE flows (
  slug        TEXT PRIMARY KEY,
  definition  TEXT NOT NULL,     -- the canonical FlowShape JSON
  created_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- The queue registry; a queue's messages live in messages/archived_messages.
CREATE TABLE queues (
  name             TEXT PRIMARY KEY,
  owner_flow       TEXT NOT NULL,     -- '' for a shared queue
  created_at       INTEGER NOT NULL,
  last_message_id  INTEGER NOT NULL   -- the last id SendMessages assigned
) WITHOUT ROWID;

CREATE TABLE messages (
  queue_name   TEXT NOT NULL,
  message_id   INTEGER NOT NULL,
  read_count   INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  visible_at   INTEGER NOT NULL,
  body         TEXT NOT NULL,
  PRIMARY KEY (queue_name, message_id)
) WITHOUT ROWID;

CREATE TABLE archived_messages (
  queue_name   TEXT NOT NULL,
  message_id   INTEGER NOT NULL,
  read_count   INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  visible_at   INTEGER NOT NULL,
  archived_at  INTEGER NOT NULL,
  body         TEXT NOT NULL,
  PRIMARY KEY (queue_name, message_id)
) WITHOUT ROWID;

CREATE TABLE runs (
  seq              INTEGER PRIMARY KEY,
  run_id           TEXT NOT NULL UNIQUE,
  flow_slug        TEXT NOT NULL,
  status           TEXT NOT NULL,
  remaining_steps  INTEGER NOT NULL,
  error            TEXT NOT NULL,
  started_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  input            TEXT NOT NULL,
  output           TEXT
);
CREATE INDEX runs_by_flow ON runs (flow_slug, started_at);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX runs_finished ON runs (finished_at)
  WHERE finished_at IS NOT NULL;

CREATE TABLE step_states (
  run_seq          INTEGER NOT NULL,  -- runs.seq of run_id
  run_id           TEXT NOT NULL,
  step_index       INTEGER NOT NULL,
  step_slug        TEXT NOT NULL,
  status           TEXT NOT NULL,
  remaining_deps   INTEGER NOT NULL,
  initial_tasks    INTEGER,
  remaining_tasks  INTEGER,
  error            TEXT NOT NULL,
  skip_reason      TEXT NOT NULL,     -- '' for none
  started_at       INTEGER,
  finished_at      INTEGER,
  output           TEXT,
  PRIMARY KEY (run_seq, step_index)
) WITHOUT ROWID;

CREATE TABLE tasks (
  run_seq         INTEGER NOT NULL,  -- runs.seq of run_id
  run_id          TEXT NOT NULL,
  step_index      INTEGER NOT NULL,
  task_index      INTEGER NOT NULL,
  flow_slug       TEXT NOT NULL,
  status          TEXT NOT NULL,
  attempts        INTEGER NOT NULL,
  error           TEXT NOT NULL,
  queue_name      TEXT NOT NULL,
  message_id      INTEGER NOT NULL,
  queued_at       INTEGER NOT NULL,
  started_at      INTEGER,
  finished_at     INTEGER,
  stall_at        INTEGER,
  requeued_count  INTEGER NOT NULL,
  worker_id       TEXT NOT NULL,
  input           TEXT NOT NULL,
  output          TEXT,
  PRIMARY KEY (run_seq, step_index, task_index),
  UNIQUE (queue_name, message_id)
) WITHOUT ROWID;
CREATE INDEX tasks_unfinished ON tasks (run_seq, step_index, task_index)
  WHERE status IN ('queued', 'started');
CREATE INDEX tasks_stalled ON tasks (stall_at) WHERE status = 'started';

CREATE TABLE outbox (
  report_id   INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      TEXT NOT NULL,
  step_index  INTEGER NOT NULL,
  task_index  INTEGER NOT NULL,
  flow_slug   TEXT NOT NULL,
  kind        TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
CREATE INDEX outbox_by_created ON outbox (created_at);

CREATE TABLE workers (
  worker_id          TEXT PRIMARY KEY,
  queue_name         TEXT NOT NULL,
  flow_slug          TEXT NOT NULL,
  started_at         INTEGER NOT NULL,
  last_heartbeat_at  INTEGER NOT NULL,
  stopped_at         INTEGER
) WITHOUT ROWID;
)sql";

absl::Status Execute(sqlite3* db, const char* sql, std::string_view what) {
  int result = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  return absl::OkStatus();
}

// The first column of the first row `sql` returns, as an integer.
absl::StatusOr<int64_t> QueryInt(sqlite3* db, const char* sql,
                                 std::string_view what) {
  sqlite3_stmt* statement = nullptr;
  int result = sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, what);
  result = sqlite3_step(statement);
  int64_t value = result == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : 0;
  sqlite3_finalize(statement);
  if (result != SQLITE_ROW && result != SQLITE_DONE) {
    return StatusFromSqlite(result, db, what);
  }
  return value;
}

// The names of `db`'s tables or indexes (`type`), SQLite's own left out,
// in order.
absl::StatusOr<std::vector<std::string>> ObjectNames(sqlite3* db,
                                                     std::string_view type) {
  sqlite3_stmt* statement = nullptr;
  int result = sqlite3_prepare_v2(
      db,
      "SELECT name FROM sqlite_schema WHERE type = ?1 AND name NOT LIKE "
      "'sqlite\\_%' ESCAPE '\\' ORDER BY name",
      -1, &statement, nullptr);
  if (result != SQLITE_OK) return StatusFromSqlite(result, db, "read schema");
  sqlite3_bind_text(statement, 1, type.data(), static_cast<int>(type.size()),
                    SQLITE_TRANSIENT);
  std::vector<std::string> names;
  while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
    names.emplace_back(
        reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
  }
  sqlite3_finalize(statement);
  if (result != SQLITE_DONE) return StatusFromSqlite(result, db, "read schema");
  return names;
}

// What `names` lacks of `expected` (both sorted), comma-separated.
std::string Missing(const std::vector<std::string>& expected,
                    const std::vector<std::string>& names) {
  std::vector<std::string> missing;
  std::set_difference(expected.begin(), expected.end(), names.begin(),
                      names.end(), std::back_inserter(missing));
  return absl::StrJoin(missing, ", ");
}

// The tables and indexes kSchemaV1 creates, read from a private in-memory
// database, so the list can't drift from the schema.
struct SchemaObjects {
  std::vector<std::string> tables;
  std::vector<std::string> indexes;
};
absl::StatusOr<SchemaObjects> ExpectedObjects() {
  sqlite3* scratch = nullptr;
  int result = sqlite3_open(":memory:", &scratch);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned(scratch, &sqlite3_close);
  if (result != SQLITE_OK) {
    return StatusFromSqlite(result, scratch, "create scratch schema");
  }
  SLUICE_RETURN_IF_ERROR(Execute(scratch, kSchemaV1, "create scratch schema"));
  SchemaObjects objects;
  SLUICE_ASSIGN_OR_RETURN(objects.tables, ObjectNames(scratch, "table"));
  SLUICE_ASSIGN_OR_RETURN(objects.indexes, ObjectNames(scratch, "index"));
  return objects;
}

// kFailedPrecondition naming each table and index of this version's schema
// that the file lacks (dropped by hand, or a damaged copy).
absl::Status CheckObjects(sqlite3* db) {
  SLUICE_ASSIGN_OR_RETURN(SchemaObjects expected, ExpectedObjects());
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> tables,
                          ObjectNames(db, "table"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> indexes,
                          ObjectNames(db, "index"));
  const std::string missing_tables = Missing(expected.tables, tables);
  const std::string missing_indexes = Missing(expected.indexes, indexes);
  if (missing_tables.empty() && missing_indexes.empty()) {
    return absl::OkStatus();
  }
  std::string message = StrCat("the file has Sluice schema version ",
                               SqliteBackend::kSchemaVersion, " but lacks");
  if (!missing_tables.empty()) StrAppend(&message, " tables ", missing_tables);
  if (!missing_tables.empty() && !missing_indexes.empty()) {
    StrAppend(&message, " and");
  }
  if (!missing_indexes.empty()) {
    StrAppend(&message, " indexes ", missing_indexes);
  }
  StrAppend(&message,
            "; restore it from a backup, or start a new file (nothing was "
            "changed)");
  return absl::FailedPreconditionError(message);
}

absl::Status CreateOrCheck(sqlite3* db) {
  constexpr int kVersion = SqliteBackend::kSchemaVersion;
  SLUICE_ASSIGN_OR_RETURN(int64_t version, QueryInt(db, "PRAGMA user_version",
                                                    "read schema version"));
  if (version == kVersion) return CheckObjects(db);
  if (version > kVersion) {
    return absl::FailedPreconditionError(
        StrCat("schema version ", version, " is newer than version ", kVersion,
               " that this build supports; open it with a newer Sluice"));
  }
  // Only version 0 (never initialised) remains. Refuse to mix our tables
  // into another application's database.
  SLUICE_ASSIGN_OR_RETURN(
      int64_t objects,
      QueryInt(db, "SELECT count(*) FROM sqlite_schema", "inspect schema"));
  if (objects != 0) {
    return absl::FailedPreconditionError(
        StrCat("the file holds tables but no Sluice schema version "
               "(user_version 0, expected ",
               kVersion, "); use a new file for Sluice"));
  }
  SLUICE_RETURN_IF_ERROR(Execute(db, kSchemaV1, "create schema"));
  return Execute(db, StrCat("PRAGMA user_version = ", kVersion).c_str(),
                 "set schema version");
}

}  // namespace

absl::Status EnsureSchema(sqlite3* db) {
  SLUICE_RETURN_IF_ERROR(
      Execute(db, "BEGIN IMMEDIATE", "begin schema transaction"));
  absl::Status status = CreateOrCheck(db);
  if (status.ok()) status = Execute(db, "COMMIT", "commit schema");
  if (!status.ok() && !sqlite3_get_autocommit(db)) {
    Execute(db, "ROLLBACK", "roll back schema").IgnoreError();
  }
  return status;
}

}  // namespace sluice::sqlite_internal
