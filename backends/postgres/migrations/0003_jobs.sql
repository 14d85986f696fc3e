-- Sluice schema version 3: jobs (backend interface v4).
--
-- Runs gain a priority, an external key (a job's explicit id or a run's
-- idempotency key, unique per flow when not empty), metadata and
-- engine-owned options (json, kept byte for byte like every payload; NULL
-- for none; listings filter metadata as jsonb) and a cancel request. Tasks gain the start of
-- their attempt budget, a cancel request and options. Queues can be paused.
-- New tables: the attempts ledger and the dedupe registry.
--
-- Message claim order, (priority DESC, seq), lives in each message's pgmq
-- `headers` as {"sluice_priority": int, "sluice_seq": bigint}, not in extra
-- columns: pgmq's own pop() and set_vt() return `RETURNING *` as
-- pgmq.message_record, which fails on a queue table with more columns.
-- sluice.create_queue() adds the claim index; this migration adds it, and
-- the headers, to queues that already exist (their messages keep FIFO order:
-- seq = msg_id).
--
-- Hot statements and the index that serves each:
--   claim (ReadMessages)            q_<queue>_sluice_claim, in claim order
--   next visible time               pgmq's q_<queue>_vt_idx
--   runs by external key            runs_by_external_key (partial, unique)
--   listing by start / by finish    runs_by_flow_start / runs_by_start_id /
--                                   runs_by_flow_finish / runs_by_finish_id
--   a run's ledger                  attempts primary key
--   expired throttle windows        dedupe_expiring (partial)

ALTER TABLE sluice.queues ADD COLUMN paused boolean NOT NULL DEFAULT false;

ALTER TABLE sluice.runs
  ADD COLUMN priority integer NOT NULL DEFAULT 0,
  ADD COLUMN external_key text NOT NULL DEFAULT '',
  ADD COLUMN metadata json,
  ADD COLUMN options json,
  ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX runs_by_external_key ON sluice.runs (flow_slug, external_key)
  WHERE external_key <> '';
-- Listing ties break by run id (backend.h RunQuery), not by insertion.
DROP INDEX sluice.runs_by_flow;
DROP INDEX sluice.runs_by_start;
CREATE INDEX runs_by_flow_start ON sluice.runs (flow_slug, started_at, run_id);
CREATE INDEX runs_by_start_id ON sluice.runs (started_at, run_id);
CREATE INDEX runs_by_flow_finish ON sluice.runs (flow_slug, finished_at, run_id)
  WHERE finished_at IS NOT NULL;
CREATE INDEX runs_by_finish_id ON sluice.runs (finished_at, run_id)
  WHERE finished_at IS NOT NULL;

ALTER TABLE sluice.tasks
  ADD COLUMN budget_start integer NOT NULL DEFAULT 0,
  ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
  ADD COLUMN options json;

-- One row per ended attempt; it goes only with its run.
CREATE TABLE sluice.attempts (
  run_id       uuid NOT NULL REFERENCES sluice.runs (run_id),
  step_index   integer NOT NULL,
  task_index   integer NOT NULL,
  attempt      integer NOT NULL,
  worker_id    text NOT NULL,
  started_at   timestamptz,
  finished_at  timestamptz NOT NULL,
  outcome      text NOT NULL,
  error        text NOT NULL,
  PRIMARY KEY (run_id, step_index, task_index, attempt)
);

-- (flow, key) held by a run: a throttle window when expires_at is set,
-- else while the run is unfinished. Not tied to the run's lifetime.
CREATE TABLE sluice.dedupe (
  flow_slug   text NOT NULL,
  key         text NOT NULL,
  run_id      uuid NOT NULL,
  expires_at  timestamptz,
  PRIMARY KEY (flow_slug, key)
);
CREATE INDEX dedupe_expiring ON sluice.dedupe (expires_at)
  WHERE expires_at IS NOT NULL;

-- FIFO numbers of messages, across queues (only order within a queue
-- matters).
CREATE SEQUENCE sluice.message_seq AS bigint;

GRANT SELECT, INSERT, UPDATE, DELETE ON sluice.attempts, sluice.dedupe
  TO sluice_runtime;
GRANT USAGE, SELECT ON SEQUENCE sluice.message_seq TO sluice_runtime;

-- Adds the claim-order index to the pgmq queue `queue_name` (idempotent).
-- Messages without Sluice's headers (sent by another pgmq client) sort
-- after every Sluice message.
CREATE FUNCTION sluice.add_claim_index(queue_name text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  live text := 'q_' || lower(queue_name);
BEGIN
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON pgmq.%I ('
    '((headers ->> ''sluice_priority'')::integer) DESC NULLS LAST, '
    '((headers ->> ''sluice_seq'')::bigint))',
    live || '_sluice_claim', live);
END
$$;
REVOKE ALL ON FUNCTION sluice.add_claim_index(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION sluice.create_queue(queue_name text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  live text := 'q_' || lower(queue_name);
  archive text := 'a_' || lower(queue_name);
  sequence_name text;
BEGIN
  PERFORM pgmq.create(queue_name);
  PERFORM sluice.add_claim_index(queue_name);
  EXECUTE format(
    'GRANT SELECT, INSERT, UPDATE, DELETE ON pgmq.%I, pgmq.%I TO sluice_runtime',
    live, archive);
  FOREACH sequence_name IN ARRAY ARRAY[
      pg_get_serial_sequence(format('pgmq.%I', live), 'msg_id'),
      pg_get_serial_sequence(format('pgmq.%I', archive), 'msg_id')] LOOP
    IF sequence_name IS NOT NULL THEN
      EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE %s TO sluice_runtime',
                     sequence_name);
    END IF;
  END LOOP;
END
$$;

-- Queues that already exist: their live messages get Sluice's headers with
-- seq = msg_id (so they keep their order), and the claim index; the
-- sequence then starts past every msg_id.
DO $$
DECLARE
  queue text;
  top bigint;
  highest bigint := 0;
BEGIN
  FOR queue IN
    SELECT name FROM sluice.queues
    WHERE to_regclass(format('pgmq.%I', 'q_' || lower(name))) IS NOT NULL
    ORDER BY name
  LOOP
    EXECUTE format(
      'UPDATE pgmq.%I SET headers = coalesce(headers, ''{}''::jsonb) || '
      'jsonb_build_object(''sluice_priority'', 0, ''sluice_seq'', msg_id) '
      'WHERE headers ->> ''sluice_seq'' IS NULL',
      'q_' || lower(queue));
    EXECUTE format('SELECT max(msg_id) FROM pgmq.%I', 'q_' || lower(queue))
      INTO top;
    highest := greatest(highest, coalesce(top, 0));
    PERFORM sluice.add_claim_index(queue);
  END LOOP;
  IF highest > 0 THEN
    PERFORM setval('sluice.message_seq', highest);
  END IF;
END
$$;
