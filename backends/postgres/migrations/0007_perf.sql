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
-- The figures come from sluice-bench W1 (HOT updates of 40,000): step_states
-- 4,557 at fillfactor 100, 22,700 at 50, 38,200 at 30 (its rows are small
-- and updated twice); runs 836 at 100, 8,200 at 70 and, oddly, 4,300 at 50
-- (at most half its updates can be HOT: finishing sets finished_at, which is
-- indexed). Task updates change `status`, which partial indexes cover, so
-- they are never HOT; the room keeps the new version on the same page.
--
-- Only pages written from now on leave the room; existing pages fill up as
-- they did (a VACUUM FULL or pg_repack rewrites them, if wanted).
ALTER TABLE sluice.runs SET (fillfactor = 70);
ALTER TABLE sluice.step_states SET (fillfactor = 30);
ALTER TABLE sluice.tasks SET (fillfactor = 70);
