-- Sluice schema: a queue's visibility times in two partial indexes, one
-- for unread messages and one for read ones, instead of pgmq's index of
-- every message's vt.
--
-- A claim sets a message's vt and read_ct, which indexes cover, so the
-- update is never HOT and the new version takes an entry in every index
-- whose predicate it meets. With pgmq's q_<queue>_vt_idx that was four
-- (msg_id, the claim order, _sluice_read and vt_idx). vt_idx served one
-- statement, the next visible time; _sluice_unread (vt) WHERE read_ct = 0
-- and _sluice_read (vt) WHERE read_ct > 0 cover the same messages between
-- them, so that statement takes the earlier of one probe into each. A
-- claimed message has been read, so its new version skips _sluice_unread:
-- three entries a claim. pgmq's functions never needed vt_idx (its read
-- walks msg_id).
-- See docs/decisions/0077-queue-vt-indexes-by-read.md.
--
-- Hot statements and the index that serves each:
--   next visible time               pgmq.q_<queue>_sluice_unread and
--                                   pgmq.q_<queue>_sluice_read, one probe each

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
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (vt) WHERE read_ct = 0',
    live || '_sluice_unread', live);
  EXECUTE format('DROP INDEX IF EXISTS pgmq.%I', live || '_vt_idx');
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
