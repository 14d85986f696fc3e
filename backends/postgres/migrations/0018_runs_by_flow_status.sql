-- Sluice schema: one index of runs by start time, by flow and status.
--
-- runs_by_flow_start (flow_slug, started_at, run_id) and
-- runs_by_status_start (status, started_at, run_id) each took an entry
-- when a run was inserted and another when it ended: a run's finish sets
-- its status and finish time, which indexes cover, so it is never HOT and
-- every index of runs takes a new entry. runs_by_flow_status_start
-- (flow_slug, status, started_at, run_id) holds each flow's runs of each
-- status in start order, so it serves both: a listing by start walks it
-- once per flow and status it covers and keeps the first rows of those
-- walks. A listing of every flow finds them by a skip scan of the same
-- index. A job writes two index entries fewer: about 240 bytes less WAL.
-- See docs/decisions/0081-runs-by-flow-and-status.md.
--
-- Hot statements and the index that serves each:
--   runs by start, any flows and statuses   runs_by_flow_status_start
--   a flow's runs counted by status          runs_by_flow_status_start
--
-- Building the index reads every run and blocks writes to sluice.runs
-- until the migration commits (docs/operations.md).
CREATE INDEX runs_by_flow_status_start
  ON sluice.runs (flow_slug, status, started_at, run_id);
DROP INDEX sluice.runs_by_flow_start;
DROP INDEX sluice.runs_by_status_start;
