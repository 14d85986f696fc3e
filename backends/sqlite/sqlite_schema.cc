#include "sqlite_schema.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
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

// Schema version 3: version 2 (version 1 plus jobs: priorities and FIFO
// sequence numbers on messages, external keys, metadata and options on runs,
// the attempts ledger, the dedupe registry, paused queues; see
// docs/decisions/0020-sqlite-jobs-schema.md) plus versions (flow aliases and
// generations, the aliases table, the steps each worker serves; see
// docs/decisions/0025-sqlite-memory-versions-schema.md). A file of version 1
// or 2 is upgraded in place on open, one version at a time (Migrate below).
//
// Encoding: JSON as TEXT (NULL = absent, 'null' = JSON null; metadata and
// options, which are JSON null when unset, store that as NULL); times as
// INTEGER microseconds since the Unix epoch; run ids as canonical UUID text
// (which sorts like the ids themselves); enums as their ToString() names;
// booleans as 0 or 1. Tables keyed by their natural key are WITHOUT ROWID,
// so a key lookup is one b-tree search and there is no second rowid b-tree
// to maintain. JSON payloads are the last columns of their rows: a
// kNoPayloads read stops before them, and a large payload spilling onto
// overflow pages never has to be read for the columns after it (metadata
// and options are read by every read, so they come before input).
//
// Hot statements and the index that serves each:
//   read a queue            messages_claim (queue_name, priority DESC, seq):
//                           the claim order itself, filtered on visible_at;
//                           skips only in-flight or delayed messages
//   next visible time       messages_visible (queue_name, visible_at)
//   send                    queues PK: last_message_id and last_seq are the
//                           queue's id and FIFO sequences (ids never reused,
//                           even after archive)
//   tasks by message        tasks UNIQUE (queue_name, message_id)
//   unfinished tasks        tasks_unfinished (partial: queued or started)
//   stalled tasks           tasks_stalled (partial: started), by stall_at
//   stale reports           outbox_by_created
//   runs of a flow / all    runs_by_flow / runs_by_start, by (started_at,
//                           run_id): ListRuns pages by (time, run id)
//   finished runs           runs_finished (partial: finished_at set), by
//                           (finished_at, seq): retention takes ties in
//                           insertion order; listing sorts ties by run id
//   runs by external key    runs_by_key (partial: key set), also what makes
//                           (flow_slug, external_key) unique
//   a run by id             runs UNIQUE (run_id), once per transaction: the
//                           transaction remembers each run's seq
//   a run by seq            runs' rowid
//   a run's steps / tasks / its PK (run_seq, ...)
//   attempts
//   deleting a run          its tasks by PK; their messages (live and
//                           archived) by (queue_name, message_id); its
//                           reports by a scan of the outbox (see below)
//   expired dedupe entries  dedupe_expiring (partial: expires_at set)
//
// Run ids used to be random UUIDs, and keying step_states and tasks by them
// would put every new row on a random b-tree page. So runs get an
// insertion-ordered `seq` (explicit INTEGER PRIMARY KEY, which VACUUM can't
// renumber), and step_states, tasks and attempts are keyed by (run_seq,
// ...): a run's rows sit together at the growing end of each b-tree, and a
// seq is an integer compare where a run id is a 36-byte one. Only runs'
// run_id index is searched by id. Rows keep run_id too, so reads need no
// join. A step state, task or attempt therefore needs its run to exist.
// outbox ids come from AUTOINCREMENT so a taken report's id is never handed
// out again.
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
//
// Each table is created by its own text, so the migration rebuilds a table
// with exactly the text a new file gets.
struct TableSchema {
  const char* name;
  const char* create;   // CREATE TABLE
  const char* indexes;  // its CREATE INDEX statements ("" for none)
};

// alias and generation came with version 3, before the payload (the
// upgrade rebuilds the table).
constexpr TableSchema kFlows{"flows", R"sql(
CREATE TABLE flows (
  slug        TEXT PRIMARY KEY,
  alias       TEXT NOT NULL,     -- fixed at creation
  generation  INTEGER NOT NULL,  -- bumped by a fenced recompilation
  created_at  INTEGER NOT NULL,
  definition  TEXT NOT NULL      -- the canonical FlowShape JSON
) WITHOUT ROWID;
)sql",
                             ""};

// Version 3: each alias and its active concrete slug.
constexpr TableSchema kAliases{"aliases", R"sql(
CREATE TABLE aliases (
  alias        TEXT PRIMARY KEY,
  active_slug  TEXT NOT NULL,
  updated_at   INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
                               ""};

// The queue registry; a queue's messages live in messages/archived_messages.
// paused and last_seq came with version 2, added to the end of the row (the
// defaults are what ALTER TABLE ADD COLUMN needs).
constexpr TableSchema kQueues{"queues", R"sql(
CREATE TABLE queues (
  name             TEXT PRIMARY KEY,
  owner_flow       TEXT NOT NULL,     -- '' for a shared queue
  created_at       INTEGER NOT NULL,
  last_message_id  INTEGER NOT NULL,  -- the last id SendMessages assigned
  paused           INTEGER NOT NULL DEFAULT 0,
  last_seq         INTEGER NOT NULL DEFAULT 0  -- the last FIFO seq assigned
) WITHOUT ROWID;
)sql",
                              ""};

// seq is the FIFO number within a priority: given at send, replaced by a
// new last one when a retry sends a message to the tail.
constexpr TableSchema kMessages{"messages", R"sql(
CREATE TABLE messages (
  queue_name   TEXT NOT NULL,
  message_id   INTEGER NOT NULL,
  priority     INTEGER NOT NULL,
  seq          INTEGER NOT NULL,
  read_count   INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  visible_at   INTEGER NOT NULL,
  body         TEXT NOT NULL,
  PRIMARY KEY (queue_name, message_id)
) WITHOUT ROWID;
)sql",
                                R"sql(
CREATE INDEX messages_claim ON messages (queue_name, priority DESC, seq);
CREATE INDEX messages_visible ON messages (queue_name, visible_at);
)sql"};

constexpr TableSchema kArchivedMessages{"archived_messages", R"sql(
CREATE TABLE archived_messages (
  queue_name   TEXT NOT NULL,
  message_id   INTEGER NOT NULL,
  priority     INTEGER NOT NULL,
  read_count   INTEGER NOT NULL,
  enqueued_at  INTEGER NOT NULL,
  visible_at   INTEGER NOT NULL,
  archived_at  INTEGER NOT NULL,
  body         TEXT NOT NULL,
  PRIMARY KEY (queue_name, message_id)
) WITHOUT ROWID;
)sql",
                                        ""};

constexpr TableSchema kRuns{"runs", R"sql(
CREATE TABLE runs (
  seq               INTEGER PRIMARY KEY,
  run_id            TEXT NOT NULL UNIQUE,
  flow_slug         TEXT NOT NULL,
  status            TEXT NOT NULL,
  remaining_steps   INTEGER NOT NULL,
  error             TEXT NOT NULL,
  started_at        INTEGER NOT NULL,
  finished_at       INTEGER,
  priority          INTEGER NOT NULL,
  external_key      TEXT NOT NULL,     -- '' for none
  cancel_requested  INTEGER NOT NULL,
  metadata          TEXT,              -- NULL for JSON null
  options           TEXT,              -- NULL for JSON null
  input             TEXT NOT NULL,
  output            TEXT
);
)sql",
                            R"sql(
CREATE INDEX runs_by_flow ON runs (flow_slug, started_at, run_id);
CREATE INDEX runs_by_start ON runs (started_at, run_id);
CREATE INDEX runs_finished ON runs (finished_at)
  WHERE finished_at IS NOT NULL;
CREATE UNIQUE INDEX runs_by_key ON runs (flow_slug, external_key)
  WHERE external_key <> '';
)sql"};

constexpr TableSchema kStepStates{"step_states", R"sql(
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
)sql",
                                  ""};

constexpr TableSchema kTasks{"tasks", R"sql(
CREATE TABLE tasks (
  run_seq           INTEGER NOT NULL,  -- runs.seq of run_id
  run_id            TEXT NOT NULL,
  step_index        INTEGER NOT NULL,
  task_index        INTEGER NOT NULL,
  flow_slug         TEXT NOT NULL,
  status            TEXT NOT NULL,
  attempts          INTEGER NOT NULL,
  error             TEXT NOT NULL,
  queue_name        TEXT NOT NULL,
  message_id        INTEGER NOT NULL,
  queued_at         INTEGER NOT NULL,
  started_at        INTEGER,
  finished_at       INTEGER,
  stall_at          INTEGER,
  requeued_count    INTEGER NOT NULL,
  worker_id         TEXT NOT NULL,
  budget_start      INTEGER NOT NULL,
  cancel_requested  INTEGER NOT NULL,
  options           TEXT,              -- NULL for JSON null
  input             TEXT NOT NULL,
  output            TEXT,
  PRIMARY KEY (run_seq, step_index, task_index),
  UNIQUE (queue_name, message_id)
) WITHOUT ROWID;
)sql",
                             R"sql(
CREATE INDEX tasks_unfinished ON tasks (run_seq, step_index, task_index)
  WHERE status IN ('queued', 'started');
CREATE INDEX tasks_stalled ON tasks (stall_at) WHERE status = 'started';
)sql"};

// The attempts ledger: one row per ended attempt, kept until its run goes.
constexpr TableSchema kAttempts{"attempts", R"sql(
CREATE TABLE attempts (
  run_seq      INTEGER NOT NULL,  -- runs.seq of run_id
  run_id       TEXT NOT NULL,
  step_index   INTEGER NOT NULL,
  task_index   INTEGER NOT NULL,
  attempt      INTEGER NOT NULL,
  worker_id    TEXT NOT NULL,
  started_at   INTEGER,
  finished_at  INTEGER NOT NULL,
  outcome      TEXT NOT NULL,
  error        TEXT NOT NULL,
  PRIMARY KEY (run_seq, step_index, task_index, attempt)
) WITHOUT ROWID;
)sql",
                                ""};

// The dedupe registry. Entries outlive their runs (DeleteRuns leaves them);
// throttle windows (expires_at set) are swept by dedupe_expiring.
constexpr TableSchema kDedupe{"dedupe", R"sql(
CREATE TABLE dedupe (
  flow_slug   TEXT NOT NULL,
  key         TEXT NOT NULL,
  run_id      TEXT NOT NULL,
  expires_at  INTEGER,
  PRIMARY KEY (flow_slug, key)
) WITHOUT ROWID;
)sql",
                              R"sql(
CREATE INDEX dedupe_expiring ON dedupe (expires_at)
  WHERE expires_at IS NOT NULL;
)sql"};

constexpr TableSchema kOutbox{"outbox", R"sql(
CREATE TABLE outbox (
  report_id   INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      TEXT NOT NULL,
  step_index  INTEGER NOT NULL,
  task_index  INTEGER NOT NULL,
  flow_slug   TEXT NOT NULL,
  kind        TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
)sql",
                              R"sql(
CREATE INDEX outbox_by_created ON outbox (created_at);
)sql"};

constexpr TableSchema kWorkers{"workers", R"sql(
CREATE TABLE workers (
  worker_id          TEXT PRIMARY KEY,
  queue_name         TEXT NOT NULL,
  flow_slug          TEXT NOT NULL,
  started_at         INTEGER NOT NULL,
  last_heartbeat_at  INTEGER NOT NULL,
  stopped_at         INTEGER,
  served             TEXT     -- JSON [{"flow", "steps"}]; NULL for none (v3)
) WITHOUT ROWID;
)sql",
                               ""};

constexpr const TableSchema* kSchema[] = {
    &kFlows,  &kAliases,    &kQueues, &kMessages, &kArchivedMessages,
    &kRuns,   &kStepStates, &kTasks,  &kAttempts, &kDedupe,
    &kOutbox, &kWorkers,
};

// Version 1 to 2. Tables whose rows gained columns before their payloads
// are rebuilt with version 2's text, so an upgraded file is laid out
// exactly like a new one; each copy keeps every row and fills the new
// columns: priority 0, no key, no metadata or options, and a message's seq
// its id (its send order, as version 1 read it). Copying costs one pass
// over those tables, once.
//
// The texts these rebuilds and kNewInV2 create are the current ones: none
// of those tables has changed since version 2. A later version that changes
// one of them must freeze its version 2 text here first.
struct Rebuild {
  const TableSchema* table;
  // INSERT INTO <table> ... SELECT ... FROM <table>_v<old version>
  const char* copy;
};
constexpr Rebuild kRebuiltInV2[] = {
    {&kMessages,
     "INSERT INTO messages (queue_name, message_id, priority, seq, "
     "read_count, enqueued_at, visible_at, body) SELECT queue_name, "
     "message_id, 0, message_id, read_count, enqueued_at, visible_at, body "
     "FROM messages_v1"},
    {&kArchivedMessages,
     "INSERT INTO archived_messages (queue_name, message_id, priority, "
     "read_count, enqueued_at, visible_at, archived_at, body) SELECT "
     "queue_name, message_id, 0, read_count, enqueued_at, visible_at, "
     "archived_at, body FROM archived_messages_v1"},
    {&kRuns,
     "INSERT INTO runs (seq, run_id, flow_slug, status, remaining_steps, "
     "error, started_at, finished_at, priority, external_key, "
     "cancel_requested, metadata, options, input, output) SELECT seq, "
     "run_id, flow_slug, status, remaining_steps, error, started_at, "
     "finished_at, 0, '', 0, NULL, NULL, input, output FROM runs_v1"},
    {&kTasks,
     "INSERT INTO tasks (run_seq, run_id, step_index, task_index, flow_slug, "
     "status, attempts, error, queue_name, message_id, queued_at, "
     "started_at, finished_at, stall_at, requeued_count, worker_id, "
     "budget_start, cancel_requested, options, input, output) SELECT "
     "run_seq, run_id, step_index, task_index, flow_slug, status, attempts, "
     "error, queue_name, message_id, queued_at, started_at, finished_at, "
     "stall_at, requeued_count, worker_id, 0, 0, NULL, input, output FROM "
     "tasks_v1"},
};
constexpr const TableSchema* kNewInV2[] = {&kAttempts, &kDedupe};
constexpr char kQueuesV2[] = R"sql(
ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE queues SET last_seq = last_message_id;
)sql";

// Version 2 to 3 (aliases and versions; see
// docs/decisions/0025-sqlite-memory-versions-schema.md). flows is rebuilt
// with each flow its own alias at generation 1; every flow becomes the
// active version of that alias (its alias row dated from the flow's
// creation, the last time it changed); workers gain the steps they serve,
// unknown (NULL) for the rows of earlier builds.
constexpr Rebuild kRebuiltInV3[] = {
    {&kFlows,
     "INSERT INTO flows (slug, alias, generation, created_at, definition) "
     "SELECT slug, slug, 1, created_at, definition FROM flows_v2"},
};
constexpr const TableSchema* kNewInV3[] = {&kAliases};
constexpr char kFillV3[] = R"sql(
INSERT INTO aliases (alias, active_slug, updated_at)
  SELECT slug, slug, created_at FROM flows;
ALTER TABLE workers ADD COLUMN served TEXT;
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

// Creates every table and index of this version's schema.
absl::Status CreateSchema(sqlite3* db, std::string_view what) {
  for (const TableSchema* table : kSchema) {
    SLUICE_RETURN_IF_ERROR(Execute(db, table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, table->indexes, what));
  }
  return absl::OkStatus();
}

// Renames each table of `rebuilds` to <name>_v<from>, creates it again with
// the current text, copies its rows over and drops the old one; then creates
// `created`. The caller's transaction makes it all or nothing.
absl::Status RebuildAndCreate(sqlite3* db, std::span<const Rebuild> rebuilds,
                              std::span<const TableSchema* const> created,
                              int from, std::string_view what) {
  for (const Rebuild& rebuild : rebuilds) {
    const std::string old_name = StrCat(rebuild.table->name, "_v", from);
    SLUICE_RETURN_IF_ERROR(Execute(
        db,
        StrCat("ALTER TABLE ", rebuild.table->name, " RENAME TO ", old_name)
            .c_str(),
        what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.copy, what));
    // Dropping the old table drops its indexes, whose names the new ones
    // take.
    SLUICE_RETURN_IF_ERROR(
        Execute(db, StrCat("DROP TABLE ", old_name).c_str(), what));
    SLUICE_RETURN_IF_ERROR(Execute(db, rebuild.table->indexes, what));
  }
  for (const TableSchema* table : created) {
    SLUICE_RETURN_IF_ERROR(Execute(db, table->create, what));
    SLUICE_RETURN_IF_ERROR(Execute(db, table->indexes, what));
  }
  return absl::OkStatus();
}

// Version 1 to 2 (see kRebuiltInV2).
absl::Status MigrateV1ToV2(sqlite3* db) {
  constexpr std::string_view kWhat = "upgrade schema version 1 to 2";
  SLUICE_RETURN_IF_ERROR(
      RebuildAndCreate(db, kRebuiltInV2, kNewInV2, 1, kWhat));
  return Execute(db, kQueuesV2, kWhat);
}

// Version 2 to 3 (see kRebuiltInV3).
absl::Status MigrateV2ToV3(sqlite3* db) {
  constexpr std::string_view kWhat = "upgrade schema version 2 to 3";
  SLUICE_RETURN_IF_ERROR(
      RebuildAndCreate(db, kRebuiltInV3, kNewInV3, 2, kWhat));
  return Execute(db, kFillV3, kWhat);
}

// Upgrades a file of an earlier version (1 or 2) step by step.
absl::Status Migrate(sqlite3* db, int64_t version) {
  if (version == 1) SLUICE_RETURN_IF_ERROR(MigrateV1ToV2(db));
  return MigrateV2ToV3(db);
}

// The tables and indexes of this version's schema, read from a private
// in-memory database, so the list can't drift from the schema.
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
  SLUICE_RETURN_IF_ERROR(CreateSchema(scratch, "create scratch schema"));
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
  static_assert(kVersion == 3, "add the migration to the new version");
  SLUICE_ASSIGN_OR_RETURN(int64_t version, QueryInt(db, "PRAGMA user_version",
                                                    "read schema version"));
  if (version == kVersion) return CheckObjects(db);
  if (version > kVersion) {
    return absl::FailedPreconditionError(
        StrCat("schema version ", version, " is newer than version ", kVersion,
               " that this build supports; open it with a newer Sluice"));
  }
  if (version >= 1) {
    if (absl::Status migrated = Migrate(db, version); !migrated.ok()) {
      return absl::FailedPreconditionError(StrCat(
          "could not upgrade the file from schema version ", version, " to ",
          kVersion, " (nothing was changed): ", migrated.message()));
    }
    SLUICE_RETURN_IF_ERROR(
        Execute(db, StrCat("PRAGMA user_version = ", kVersion).c_str(),
                "set schema version"));
    return CheckObjects(db);
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
  SLUICE_RETURN_IF_ERROR(CreateSchema(db, "create schema"));
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
