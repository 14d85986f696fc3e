-- Sluice schema: cron schedules (backend interface v6; see
-- docs/decisions/0031-cron-schedules.md).
--
-- One row per (group_name, name). `definition` is the engine's encoding of
-- the spec (target, cron expression, time zone, payload, options, misfire
-- policy). `cursor`: every fire time at or before it is handled; schedulers
-- move it with a compare-and-set UPDATE (... WHERE cursor = $expected), so
-- of two schedulers on one fire time exactly one updates the row: the second
-- waits for the first's row lock, then re-reads the row and no longer
-- matches.
--
-- Hot statements and the index that serves each:
--   a group's schedules, a cursor move   schedules primary key

CREATE TABLE sluice.schedules (
  group_name  text NOT NULL,
  name        text NOT NULL,
  cursor      timestamptz NOT NULL,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  definition  json NOT NULL,
  PRIMARY KEY (group_name, name)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON sluice.schedules TO sluice_runtime;
