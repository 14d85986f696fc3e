// Schema version 3 of the SQLite backend, exactly as the builds that
// created version 3 files wrote it (frozen: it must never change), so tests
// can make a version 3 file and open it with this build.
#ifndef SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V3_H_
#define SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V3_H_

namespace sluice::sqlite_testing {

inline constexpr char kSchemaV3[] = R"sql(
CREATE TABLE flows (
  slug        TEXT PRIMARY KEY,
  alias       TEXT NOT NULL,     -- fixed at creation
  generation  INTEGER NOT NULL,  -- bumped by a fenced recompilation
  created_at  INTEGER NOT NULL,
  definition  TEXT NOT NULL      -- the canonical FlowShape JSON
) WITHOUT ROWID;

CREATE TABLE aliases (
  alias        TEXT PRIMARY KEY,
  active_slug  TEXT NOT NULL,
  updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE queues (
  name             TEXT PRIMARY KEY,
  owner_flow       TEXT NOT NULL,     -- '' for a shared queue
  created_at       INTEGER NOT NULL,
  last_message_id  INTEGER NOT NULL,  -- the last id SendMessages assigned
  paused           INTEGER NOT NULL DEFAULT 0,
  last_seq         INTEGER NOT NULL DEFAULT 0  -- the last FIFO seq assigned
) WITHOUT ROWID;

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
CREATE INDEX messages_claim ON messages (queue_name, priority DESC, seq);
CREATE INDEX messages_visible ON messages (queue_name, visible_at);

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
CREATE INDEX runs_by_flow ON runs (flow_slug, started_at, run_id);
CREATE INDEX runs_by_start ON runs (started_at, run_id);
CREATE INDEX runs_finished ON runs (finished_at)
  WHERE finished_at IS NOT NULL;
CREATE UNIQUE INDEX runs_by_key ON runs (flow_slug, external_key)
  WHERE external_key <> '';

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
CREATE INDEX tasks_unfinished ON tasks (run_seq, step_index, task_index)
  WHERE status IN ('queued', 'started');
CREATE INDEX tasks_stalled ON tasks (stall_at) WHERE status = 'started';

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

CREATE TABLE dedupe (
  flow_slug   TEXT NOT NULL,
  key         TEXT NOT NULL,
  run_id      TEXT NOT NULL,
  expires_at  INTEGER,
  PRIMARY KEY (flow_slug, key)
) WITHOUT ROWID;
CREATE INDEX dedupe_expiring ON dedupe (expires_at)
  WHERE expires_at IS NOT NULL;

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
  stopped_at         INTEGER,
  served             TEXT     -- JSON [{"flow", "steps"}]; NULL for none (v3)
) WITHOUT ROWID;
)sql";

}  // namespace sluice::sqlite_testing

#endif  // SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V3_H_
