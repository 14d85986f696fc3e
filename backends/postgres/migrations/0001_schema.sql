-- Sluice schema version 1: the records of flows, runs, step states, tasks,
-- the outbox and workers. Queue messages live in pgmq's tables
-- (pgmq.q_<queue> / pgmq.a_<queue>); before this file runs, the migration
-- runner installs backends/postgres/sql/pgmq_compat.sql if the database has
-- no `pgmq` schema yet (the pgmq extension, when installed, is used as is).
--
-- Encoding: JSON payloads are `json` (kept byte for byte, so key order and
-- scalars round-trip); times are timestamptz to the microsecond; run ids are
-- UUIDv7; enums are their names as text. Runs carry an identity
-- `insert_seq` that breaks started_at / finished_at ties by insertion order.
--
-- Hot statements and the index that serves each:
--   a run / a run's steps / tasks   their primary keys (run_id, ...)
--   tasks by message                tasks_by_message (queue_name, message_id)
--   unfinished tasks of a run       tasks_unfinished (partial)
--   stalled tasks                   tasks_stalled (partial), by stall_at
--   stale reports                   outbox_by_created
--   runs of a flow / all, newest    runs_by_flow / runs_by_start
--   finished runs                   runs_finished (partial)

CREATE TABLE sluice.flows (
  slug        text PRIMARY KEY,
  definition  json NOT NULL,
  created_at  timestamptz NOT NULL
);

-- The queue registry; the physical queue is pgmq's.
CREATE TABLE sluice.queues (
  name        text PRIMARY KEY,
  owner_flow  text NOT NULL,   -- '' for a shared queue
  created_at  timestamptz NOT NULL
);

CREATE TABLE sluice.runs (
  run_id           uuid PRIMARY KEY,
  insert_seq       bigint GENERATED ALWAYS AS IDENTITY,
  flow_slug        text NOT NULL,
  status           text NOT NULL
    CHECK (status IN ('started', 'completed', 'failed', 'cancelled')),
  remaining_steps  integer NOT NULL,
  error            text NOT NULL,
  started_at       timestamptz NOT NULL,
  finished_at      timestamptz,
  input            json NOT NULL,
  output           json
);
CREATE INDEX runs_by_flow ON sluice.runs (flow_slug, started_at, insert_seq);
CREATE INDEX runs_by_start ON sluice.runs (started_at, insert_seq);
CREATE INDEX runs_finished ON sluice.runs (finished_at, insert_seq)
  WHERE finished_at IS NOT NULL;

CREATE TABLE sluice.step_states (
  run_id           uuid NOT NULL REFERENCES sluice.runs (run_id),
  step_index       integer NOT NULL,
  step_slug        text NOT NULL,
  status           text NOT NULL,
  remaining_deps   integer NOT NULL,
  initial_tasks    integer,
  remaining_tasks  integer,
  error            text NOT NULL,
  skip_reason      text NOT NULL,
  started_at       timestamptz,
  finished_at      timestamptz,
  output           json,
  PRIMARY KEY (run_id, step_index)
);

CREATE TABLE sluice.tasks (
  run_id          uuid NOT NULL REFERENCES sluice.runs (run_id),
  step_index      integer NOT NULL,
  task_index      integer NOT NULL,
  flow_slug       text NOT NULL,
  status          text NOT NULL,
  attempts        integer NOT NULL,
  error           text NOT NULL,
  queue_name      text NOT NULL,
  message_id      bigint NOT NULL,
  queued_at       timestamptz NOT NULL,
  started_at      timestamptz,
  finished_at     timestamptz,
  stall_at        timestamptz,
  requeued_count  integer NOT NULL,
  worker_id       text NOT NULL,
  input           json NOT NULL,
  output          json,
  PRIMARY KEY (run_id, step_index, task_index),
  CONSTRAINT tasks_by_message UNIQUE (queue_name, message_id)
);
CREATE INDEX tasks_unfinished ON sluice.tasks (run_id, step_index, task_index)
  WHERE status IN ('queued', 'started');
CREATE INDEX tasks_stalled ON sluice.tasks (stall_at)
  WHERE status = 'started';

-- Reports not yet applied: a handful at a time, so DeleteRuns scans it by
-- run_id rather than every report paying for an index.
CREATE TABLE sluice.outbox (
  report_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id      uuid NOT NULL,
  step_index  integer NOT NULL,
  task_index  integer NOT NULL,
  flow_slug   text NOT NULL,
  kind        text NOT NULL,
  created_at  timestamptz NOT NULL
);
CREATE INDEX outbox_by_created ON sluice.outbox (created_at, report_id);

CREATE TABLE sluice.workers (
  worker_id          text PRIMARY KEY,
  queue_name         text NOT NULL,
  flow_slug          text NOT NULL,
  started_at         timestamptz NOT NULL,
  last_heartbeat_at  timestamptz NOT NULL,
  stopped_at         timestamptz
);

-- Raises "<what> <missing> does not exist" (SQLSTATE P0002, which the
-- backend reports as kNotFound) when `missing` is not null. A pipelined
-- write that must find its rows ends with it, so a missing row aborts the
-- transaction on the server and a later COMMIT cannot apply the rest.
CREATE FUNCTION sluice.require_found(what text, missing text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
  IF missing IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'P0002',
      MESSAGE = what || ' ' || missing || ' does not exist';
  END IF;
END
$$;
