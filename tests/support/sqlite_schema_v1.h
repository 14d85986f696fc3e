// Schema version 1 of the SQLite backend, exactly as the builds that
// created version 1 files wrote it (frozen: it must never change), so tests
// can make a version 1 file and open it with this build.
#ifndef SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V1_H_
#define SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V1_H_

namespace sluice::sqlite_testing {

inline constexpr char kSchemaV1[] = R"sql(
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

}  // namespace sluice::sqlite_testing

#endif  // SLUICE_TESTS_SUPPORT_SQLITE_SCHEMA_V1_H_
