-- Sluice schema: the step states, tasks and attempts of a run no longer
-- carry foreign keys to sluice.runs (docs/decisions/0050-no-foreign-keys-to-runs.md).
--
-- A foreign key check runs a query per inserted row and takes a KEY SHARE
-- lock on the run, which writes WAL; on a one-step job that was about a
-- quarter of the server's time. The inserts now check in the statement that
-- every run exists (a miss still fails with "run ... does not exist"), and
-- DeleteRuns locks its runs before it deletes what hangs off them, so a
-- transaction that adds rows under a run's lock finishes first.
ALTER TABLE sluice.step_states DROP CONSTRAINT step_states_run_id_fkey;
ALTER TABLE sluice.tasks DROP CONSTRAINT tasks_run_id_fkey;
ALTER TABLE sluice.attempts DROP CONSTRAINT attempts_run_id_fkey;
