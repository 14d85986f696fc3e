// The SQLite backend's tables, as the text that creates each, shared by
// creating a new file (sqlite_schema.cc) and upgrading an old one
// (sqlite_schema_upgrade.cc).
//
// Schema version 4: version 3 plus fan-out: child_links (one row per child
// of a parked parent task, in the parent's store) and child_reports (the
// outbox of a child's terminal transitions, in the child's store); tasks
// may be 'waiting' (parked) (see docs/decisions/0036-fan-out-storage.md).
// Version 5 added runs_by_status; version 6 dropped tasks_unfinished
// (docs/decisions/0062-no-unfinished-tasks-index.md); version 8 added
// runs_finished_by_flow_status (docs/decisions/0073).
//
// Schema version 3: version 2 (version 1 plus jobs: priorities and FIFO
// sequence numbers on messages, external keys, metadata and options on runs,
// the attempts ledger, the dedupe registry, paused queues; see
// docs/decisions/0020-sqlite-jobs-schema.md) plus versions (flow aliases and
// generations, the aliases table, the steps each worker serves; see
// docs/decisions/0025-sqlite-memory-versions-schema.md). A file of version 1
// or 2 is upgraded in place on open, one version at a time
// (sqlite_schema_upgrade.cc).
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
//   read a queue            messages_ready (partial: never read, sent
//                           visible), the claim order itself; when a probe
//                           of the next two finds any due, their due ones
//                           too, merged by claim order (decision 0080)
//   next visible time       messages_delayed (partial: never read, sent
//                           for later) and messages_read (partial: read),
//                           by visible_at, one probe each
//   send                    queues PK: last_message_id and last_seq are the
//                           queue's id and FIFO sequences (ids never reused,
//                           even after archive)
//   tasks by message        tasks UNIQUE (queue_name, message_id)
//   unfinished tasks        the run's (or step's) tasks by PK, the ended
//                           ones skipped: no index of their own
//   stalled tasks           their messages, through messages_read by
//                           (queue, visible_at) and tasks UNIQUE
//                           (queue_name, message_id): a task's updates
//                           touch no index (decision 0087)
//   stale reports           outbox_by_created
//   runs of a flow / all    runs_by_flow / runs_by_start, by (started_at,
//                           run_id): ListRuns pages by (time, run id)
//   runs of one status      runs_by_status (status, started_at, run_id)
//   finished runs           runs_finished (partial: finished_at set), by
//                           (finished_at, seq): listing sorts ties by run id
//   finished runs of one    runs_finished_by_flow_status (partial, like
//   flow and outcome        runs_finished): retention's newest ended run of
//                           each outcome, which a walk of runs_finished
//                           looked for past every run of the others
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
//   a parent's child links  child_links PK (parent_run_seq, parent_step,
//                           parent_task, child_index)
//   a parent's link counts  child_links_by_status (the PK prefix, status):
//                           counted from the index alone
//   stale pending links     child_links_pending (partial: pending), by
//                           pending_since
//   cancels owed to         child_links_uncascaded (partial: cancelled and
//   children                not cascaded)
//   child reports           child_reports' rowid (report_id), from `after`
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
#ifndef SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_PARTS_H_
#define SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_PARTS_H_

#include <sqlite3.h>

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace sluice::sqlite_internal {

// Each table is created by its own text, so the migration rebuilds a table
// with exactly the text a new file gets.
struct TableSchema {
  const char* name;
  const char* create;   // CREATE TABLE
  const char* indexes;  // its CREATE INDEX statements ("" for none)
};

// alias and generation came with version 3, before the payload (the
// upgrade rebuilds the table).
inline constexpr TableSchema kFlows{"flows", R"sql(
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
inline constexpr TableSchema kAliases{"aliases", R"sql(
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
inline constexpr TableSchema kQueues{"queues", R"sql(
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
// new last one when a retry sends a message to the tail. Each message is in
// exactly one of the three partial indexes: ready (never read, sent
// visible: a claim takes it at once), delayed (never read, sent for later)
// or read. A claim reads a message, so it leaves the claim order, and later
// claims walk only what they can take (decision 0080).
inline constexpr TableSchema kMessages{"messages", R"sql(
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
CREATE INDEX messages_ready ON messages (queue_name, priority DESC, seq)
  WHERE read_count = 0 AND visible_at <= enqueued_at;
CREATE INDEX messages_delayed ON messages (queue_name, visible_at)
  WHERE read_count = 0 AND visible_at > enqueued_at;
CREATE INDEX messages_read ON messages (queue_name, visible_at)
  WHERE read_count > 0;
)sql"};

inline constexpr TableSchema kArchivedMessages{"archived_messages", R"sql(
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

inline constexpr TableSchema kRuns{"runs", R"sql(
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
-- A page of one status (the dashboard's filter) in start order.
CREATE INDEX runs_by_status ON runs (status, started_at, run_id);
CREATE INDEX runs_finished ON runs (finished_at)
  WHERE finished_at IS NOT NULL;
-- Retention's ended runs of one flow and outcome (decision 0073).
CREATE INDEX runs_finished_by_flow_status
  ON runs (flow_slug, status, finished_at) WHERE finished_at IS NOT NULL;
CREATE UNIQUE INDEX runs_by_key ON runs (flow_slug, external_key)
  WHERE external_key <> '';
)sql"};

inline constexpr TableSchema kStepStates{"step_states", R"sql(
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

inline constexpr TableSchema kTasks{"tasks", R"sql(
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
                                    ""};

// The attempts ledger: one row per ended attempt, kept until its run goes.
inline constexpr TableSchema kAttempts{"attempts", R"sql(
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
inline constexpr TableSchema kDedupe{"dedupe", R"sql(
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

inline constexpr TableSchema kOutbox{"outbox", R"sql(
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

inline constexpr TableSchema kWorkers{"workers", R"sql(
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

// Version 4: one row per child of a fanned-out (waiting) parent task, in the
// parent's store, keyed like tasks by the parent run's seq. Only 'pending'
// rows move, once. pending_since is re-armed by each sweep that looks at
// the row. spec is the child's full request, opaque to the store.
inline constexpr TableSchema kChildLinks{"child_links", R"sql(
CREATE TABLE child_links (
  parent_run_seq  INTEGER NOT NULL,  -- runs.seq of parent_run_id
  parent_run_id   TEXT NOT NULL,
  parent_step     INTEGER NOT NULL,
  parent_task     INTEGER NOT NULL,
  child_index     INTEGER NOT NULL,
  child_store     TEXT NOT NULL,     -- '' for the parent's own store
  child_run_id    TEXT NOT NULL,
  status          TEXT NOT NULL,
  error           TEXT NOT NULL,
  cascaded        INTEGER NOT NULL,
  pending_since   INTEGER NOT NULL,
  output          TEXT,
  spec            TEXT NOT NULL,
  PRIMARY KEY (parent_run_seq, parent_step, parent_task, child_index)
) WITHOUT ROWID;
)sql",
                                         R"sql(
CREATE INDEX child_links_by_status
  ON child_links (parent_run_seq, parent_step, parent_task, status);
CREATE INDEX child_links_pending ON child_links (pending_since)
  WHERE status = 'pending';
CREATE INDEX child_links_uncascaded
  ON child_links (parent_run_seq, parent_step, parent_task, child_index)
  WHERE status = 'cancelled' AND cascaded = 0;
)sql"};

// Version 4: a child run's terminal transitions, in the child's store,
// until the relay has applied them to the parent's store and deletes them.
// The parent may live in another store, so it is named by run id, not seq.
// AUTOINCREMENT: a deleted report's id is never handed out again, so a
// relay's `after` cursor never skips a new report.
inline constexpr TableSchema kChildReports{"child_reports", R"sql(
CREATE TABLE child_reports (
  report_id      INTEGER PRIMARY KEY AUTOINCREMENT,
  parent_store   TEXT NOT NULL,     -- '' for the child's own store
  parent_run_id  TEXT NOT NULL,
  parent_step    INTEGER NOT NULL,
  parent_task    INTEGER NOT NULL,
  child_index    INTEGER NOT NULL,
  child_run_id   TEXT NOT NULL,
  outcome        TEXT NOT NULL,
  error          TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  output         TEXT
);
)sql",
                                           ""};

// Version 4: cron schedules by (group, name) (docs/decisions/0031). The
// engine's encoded spec is one JSON text; the cursor (every fire time at or
// before it is handled) moves by compare-and-set. The primary key serves
// listing a group.
inline constexpr TableSchema kSchedules{"schedules", R"sql(
CREATE TABLE schedules (
  group_name  TEXT NOT NULL,
  name        TEXT NOT NULL,
  cursor      INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL,
  definition  TEXT NOT NULL,
  PRIMARY KEY (group_name, name)
) WITHOUT ROWID;
)sql",
                                        ""};

inline constexpr const TableSchema* kSchema[] = {
    &kFlows,  &kAliases,    &kQueues,     &kMessages,     &kArchivedMessages,
    &kRuns,   &kStepStates, &kTasks,      &kAttempts,     &kDedupe,
    &kOutbox, &kWorkers,    &kChildLinks, &kChildReports, &kSchedules,
};

// Runs `sql` (any number of statements); a failure names `what`.
absl::Status ExecuteSchemaSql(sqlite3* db, const char* sql,
                              std::string_view what);

// Upgrades a file of schema version 1, 2 or 3 to this build's version, step by
// step, in the caller's transaction (sqlite_schema_upgrade.cc).
absl::Status UpgradeSchema(sqlite3* db, int64_t version);

}  // namespace sluice::sqlite_internal

#endif  // SLUICE_BACKENDS_SQLITE_SQLITE_SCHEMA_PARTS_H_
