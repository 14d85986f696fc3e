-- Sluice schema: stall recovery finds started tasks through their
-- messages; no index of tasks by stall_at.
--
-- tasks_stalled (stall_at) WHERE status = 'started' took an entry when a
-- task was claimed, and the claim and the finish change the columns it
-- covers, so neither update of a task could stay on its page (HOT): every
-- index of tasks took a new entry at both. A started task's message stays in
-- its queue, read at least once and visible by now + claim_grace once
-- the task has stalled (the engine's lease rule, StalledQuery in
-- sluice/backend.h); each queue now indexes its read messages by vt, and
-- FindStalledTasks walks those and joins their tasks. The queue's updates
-- were never HOT (pgmq indexes vt), so the new index costs one entry per
-- read and saves three of the tasks' per job.
-- See docs/decisions/0064-stall-recovery-through-messages.md.
--
-- Hot statements and the index that serves each:
--   stalled tasks                   pgmq.q_<queue>_sluice_read (vt, partial:
--                                   read_ct > 0), then tasks_by_message

CREATE OR REPLACE FUNCTION sluice.add_claim_index(queue_name text)
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
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (vt) WHERE read_ct > 0',
    live || '_sluice_read', live);
END
$$;
REVOKE ALL ON FUNCTION sluice.add_claim_index(text) FROM PUBLIC;

DO $$
DECLARE
  queue text;
BEGIN
  FOR queue IN
    SELECT name FROM sluice.queues
    WHERE to_regclass(format('pgmq.%I', 'q_' || lower(name))) IS NOT NULL
    ORDER BY name
  LOOP
    PERFORM sluice.add_claim_index(queue);
  END LOOP;
END
$$;

DROP INDEX sluice.tasks_stalled;
