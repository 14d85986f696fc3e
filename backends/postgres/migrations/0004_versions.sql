-- Sluice schema version 4: versions and aliases (backend interface v5).
--
-- A flow row is one concrete version: it gains the alias it belongs to
-- (fixed at creation) and a generation that a fenced development
-- recompilation bumps. Aliases name the active version of each family.
-- Workers record every (flow, step) they serve on their queue, as JSON text
-- [{"flow": "<slug>", "steps": ["<step>", ...]}, ...] (NULL in rows written
-- before this version, read as none).
--
-- Existing flows become versions of an alias of their own name, active:
-- alias = slug, and an alias row {slug -> slug} dated at the flow's
-- creation, so no stored row has an empty alias.
--
-- Queues can be dropped at run time (DeleteQueue): sluice.drop_queue() is
-- the SECURITY DEFINER counterpart of sluice.create_queue(), since the
-- runtime role owns no queue table.
--
-- Hot statements and the index that serves each:
--   an alias                        aliases primary key
--   runs of a flow by status        runs_by_flow_start (flow_slug leads)

ALTER TABLE sluice.flows
  ADD COLUMN alias text,
  ADD COLUMN generation bigint NOT NULL DEFAULT 1;
UPDATE sluice.flows SET alias = slug;
ALTER TABLE sluice.flows ALTER COLUMN alias SET NOT NULL;

CREATE TABLE sluice.aliases (
  alias        text PRIMARY KEY,
  active_slug  text NOT NULL,
  updated_at   timestamptz NOT NULL
);
INSERT INTO sluice.aliases (alias, active_slug, updated_at)
  SELECT slug, slug, created_at FROM sluice.flows;

ALTER TABLE sluice.workers ADD COLUMN served json;

GRANT SELECT, INSERT, UPDATE, DELETE ON sluice.aliases TO sluice_runtime;

-- Drops the pgmq queue `queue_name` (pgmq.drop_queue: its live and archive
-- tables, with every message, and its meta row). False if it has no live
-- table.
CREATE FUNCTION sluice.drop_queue(queue_name text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF to_regclass(format('pgmq.%I', 'q_' || lower(queue_name))) IS NULL THEN
    RETURN false;
  END IF;
  RETURN pgmq.drop_queue(queue_name);
END
$$;
REVOKE ALL ON FUNCTION sluice.drop_queue(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sluice.drop_queue(text) TO sluice_runtime;
