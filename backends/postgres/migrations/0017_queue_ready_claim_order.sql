-- Sluice schema: the claim order holds only the messages a claim can take
-- at once (unread, sent visible); delayed unread messages are found by
-- their visibility time, as read ones already were.
--
-- Until now the claim order (priority, then FIFO number) held every
-- message. A claimed message stayed in it, so each claim put a new entry
-- there, and later claims walked past the batches other workers held.
-- A claim sets read_ct, so its new version now leaves the claim order:
-- two index entries a claim (msg_id and _sluice_read) instead of three.
--
--   _sluice_ready    claim order  WHERE read_ct = 0 AND vt <= enqueued_at
--   _sluice_delayed  (vt)         WHERE read_ct = 0 AND vt > enqueued_at
--   _sluice_read     (vt)         WHERE read_ct > 0   (migration 0012)
--
-- The three cover every message once. A claim takes the first of each in
-- claim order (the delayed and read ones that are due, sorted) and keeps
-- the first of their merge. Each has one index that serves it, so the
-- choice keeps a generic plan; the old one was planned for every claim.
-- _sluice_unread (migration 0016) and _sluice_claim are dropped.
-- See docs/decisions/0079-queue-claim-order-of-ready-messages.md.
--
-- Hot statements and the index that serves each:
--   claim's choice of messages      _sluice_ready, _sluice_delayed and
--                                   _sluice_read, one walk each
--   next visible time               _sluice_delayed and _sluice_read,
--                                   one probe each

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
    '((headers ->> ''sluice_seq'')::bigint)) '
    'WHERE read_ct = 0 AND vt <= enqueued_at',
    live || '_sluice_ready', live);
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (vt) '
    'WHERE read_ct = 0 AND vt > enqueued_at',
    live || '_sluice_delayed', live);
  EXECUTE format(
    'CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (vt) WHERE read_ct > 0',
    live || '_sluice_read', live);
  EXECUTE format('DROP INDEX IF EXISTS pgmq.%I', live || '_sluice_claim');
  EXECUTE format('DROP INDEX IF EXISTS pgmq.%I', live || '_sluice_unread');
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
