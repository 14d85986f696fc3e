-- Sluice schema: room on each page of a queue's live table for a claimed
-- message's new version.
--
-- A claim sets a message's vt and read_ct. vt is indexed, so the update is
-- never HOT, but packed full (pgmq's default fillfactor 100) a page also
-- has no room for the new version: each claim moved its message to another
-- page, and Postgres first wrote a lock record for the old version before
-- it let go of the page. A batch of messages is inserted onto the same
-- pages and claimed together before their old versions can be pruned, so a
-- page needs room for as many new versions as it holds messages.
--
-- Measured with sluice-bench W1 on Postgres (lock records per job on the
-- queue; WAL per job): fillfactor 100  1.9, 3,386-3,526 B
--                      fillfactor 50   1.0, 3,147-3,159 B
-- The cost is a backlog's space: queued messages have not used their room.
-- See docs/decisions/0070-queue-fillfactor.md.
--
-- sluice.add_claim_index prepares a queue's live table for Sluice's claims;
-- create_queue calls it for every new queue. Existing pages are not
-- rewritten: messages sent from now on go to pages with room to spare.

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
  EXECUTE format('ALTER TABLE pgmq.%I SET (fillfactor = 50)', live);
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
