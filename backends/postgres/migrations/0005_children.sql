-- Sluice schema version 5: fan-out children (backend interface v6; see
-- docs/decisions/0036-fan-out-storage.md).
--
-- child_links: one row per child of a fanned-out parent task, in the
-- parent's store. Only 'pending' rows move, once, to completed, failed or
-- cancelled. `cascaded` is true when no cancel is owed to the child.
-- pending_since is re-armed by each sweep that takes the row. spec is the
-- child's full request, opaque to the store, so a sweeper can re-create a
-- missing child from this row alone. The foreign key to the parent task
-- makes a link for a task that does not exist fail with 23503 (kNotFound);
-- DeleteRuns deletes a run's links before its tasks.
--
-- child_reports: a child run's terminal transitions, in the child's store,
-- until the relay has applied them to the parent's store (which may be
-- another database) and deletes them; so no key refers to the parent.
--
-- Tasks may now be 'waiting' (parked on their children): tasks_unfinished
-- holds them too (GetUnfinishedTasks returns them); tasks_stalled, for
-- 'started' tasks only, leaves them alone.
--
-- Hot statements and the index that serves each:
--   a parent's links, in order        child_links primary key
--   a parent's link counts by status  child_links_by_status (index only)
--   settling links                    child_links primary key
--   stale pending links (sweeper)     child_links_pending (partial), by
--                                     pending_since
--   cancels owed to children          child_links_uncascaded (partial)
--   child reports after an id         child_reports primary key

CREATE TABLE sluice.child_links (
  parent_run_id  uuid NOT NULL,
  parent_step    integer NOT NULL,
  parent_task    integer NOT NULL,
  child_index    integer NOT NULL,
  child_store    text NOT NULL,   -- '' for the parent's own store
  child_run_id   uuid NOT NULL,
  status         text NOT NULL,
  error          text NOT NULL,
  cascaded       boolean NOT NULL,
  pending_since  timestamptz NOT NULL,
  output         json,
  spec           json NOT NULL,
  PRIMARY KEY (parent_run_id, parent_step, parent_task, child_index),
  FOREIGN KEY (parent_run_id, parent_step, parent_task)
    REFERENCES sluice.tasks (run_id, step_index, task_index)
);
-- child_index last: a settlement's lookup of one pending link, which the
-- planner may take through this index, is a search of one entry, not a walk
-- of the parent's pending links.
CREATE INDEX child_links_by_status ON sluice.child_links
  (parent_run_id, parent_step, parent_task, status, child_index);
CREATE INDEX child_links_pending ON sluice.child_links (pending_since)
  WHERE status = 'pending';
CREATE INDEX child_links_uncascaded ON sluice.child_links
  (parent_run_id, parent_step, parent_task, child_index)
  WHERE status = 'cancelled' AND NOT cascaded;

CREATE TABLE sluice.child_reports (
  report_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  parent_store   text NOT NULL,   -- '' for the child's own store
  parent_run_id  uuid NOT NULL,
  parent_step    integer NOT NULL,
  parent_task    integer NOT NULL,
  child_index    integer NOT NULL,
  child_run_id   uuid NOT NULL,
  outcome        text NOT NULL,
  error          text NOT NULL,
  created_at     timestamptz NOT NULL,
  output         json
);

DROP INDEX sluice.tasks_unfinished;
CREATE INDEX tasks_unfinished ON sluice.tasks (run_id, step_index, task_index)
  WHERE status IN ('queued', 'started', 'waiting');

GRANT SELECT, INSERT, UPDATE, DELETE ON sluice.child_links,
  sluice.child_reports TO sluice_runtime;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA sluice TO sluice_runtime;
