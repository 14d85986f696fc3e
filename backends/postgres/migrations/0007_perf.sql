-- Sluice schema: room for HOT updates on the hot tables (see
-- docs/decisions/0040-performance-postgres-sqlite.md).
--
-- A run, its step states and its tasks are each inserted once and updated
-- two or three times within moments (claim, finish, the report's counters).
-- Packed full (the default fillfactor 100), a page has no room for a row's
-- new version, so every update moves the row to another page and adds an
-- entry to each index: step_states, whose only index is its primary key,
-- got 4,663 HOT updates of 40,000 in sluice-bench W1. Leaving room on
-- each page lets an update that changes no indexed column stay on its page
-- (a HOT update: no index entries, less WAL), and lets one that does keep
-- the heap page it was on.
--
-- Only pages written from now on leave the room; existing pages fill up as
-- they did (a VACUUM FULL or pg_repack rewrites them, if wanted).
ALTER TABLE sluice.runs SET (fillfactor = 70);
ALTER TABLE sluice.step_states SET (fillfactor = 50);
ALTER TABLE sluice.tasks SET (fillfactor = 70);
