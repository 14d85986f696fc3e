-- Sluice schema version 2: the runtime role.
--
-- `sluice_runtime` is a NOLOGIN group role holding exactly what workers and
-- hosts use: the schemas, DML on Sluice's tables, the identity sequences,
-- and EXECUTE on the functions they call. Login roles of hosts are made
-- members (GRANT sluice_runtime TO app_worker). It owns nothing, so it can't
-- alter or drop the schema. Queues are created at deploy time, by the
-- runtime, through sluice.create_queue(), a SECURITY DEFINER function owned
-- by the role that ran this migration.
--
-- Roles are cluster-wide: another database's migration may have made it.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sluice_runtime') THEN
    CREATE ROLE sluice_runtime NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;  -- created concurrently by another database's migration
END
$$;

REVOKE ALL ON SCHEMA sluice FROM PUBLIC;
GRANT USAGE ON SCHEMA sluice TO sluice_runtime;
GRANT USAGE ON SCHEMA pgmq TO sluice_runtime;

GRANT SELECT, INSERT, UPDATE, DELETE ON
  sluice.flows, sluice.queues, sluice.runs, sluice.step_states, sluice.tasks,
  sluice.outbox, sluice.workers
  TO sluice_runtime;
GRANT SELECT ON sluice.schema_migrations TO sluice_runtime;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA sluice TO sluice_runtime;
-- pgmq's own catalogue, for pgmq.list_queues() and metrics.
GRANT SELECT ON pgmq.meta TO sluice_runtime;

REVOKE ALL ON FUNCTION sluice.require_found(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sluice.require_found(text, text) TO sluice_runtime;

-- Creates the pgmq queue `queue_name` (idempotent, like pgmq.create) and
-- lets the runtime role read and write its tables.
CREATE FUNCTION sluice.create_queue(queue_name text)
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
REVOKE ALL ON FUNCTION sluice.create_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sluice.create_queue(text) TO sluice_runtime;
