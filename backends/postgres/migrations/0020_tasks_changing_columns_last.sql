-- Sluice schema: sluice.tasks rewritten with the columns a task's claim and
-- finish change at the end of its row.
--
-- A task's two updates are HOT (migration 0013), and Postgres logs a HOT
-- update as the bytes between the first and the last that differ from the
-- old version. The input sat between the columns the claim changes and the
-- output the finish writes, so every finish logged the input again, and
-- the claim logged the queue name, message id and queue time. Now the
-- columns that never change come first (key, flow, message, input), then
-- those the claim changes (worker, attempts, start, status, stall time),
-- then those the finish changes (status, stall time, finish time, error,
-- output). Measured on 20,000 rows (WAL per update): the claim 177 -> 128
-- bytes, the finish 222 -> 171 with a 7-byte input, 404 -> 131 with a
-- 208-byte one. See docs/decisions/0090-tasks-changing-columns-last.md.
--
-- Postgres cannot reorder columns in place: the table is copied into a new
-- one, which holds an exclusive lock on the tasks (every claim and finish
-- waits) for the length of the copy. On a large store, run it in a quiet
-- moment or after pruning. Statements name their columns, so workers of
-- the previous release keep working on the new table.
--
-- The tasks are locked before their child links, the order in which a
-- finish that fans out writes them.
LOCK TABLE sluice.tasks, sluice.child_links IN ACCESS EXCLUSIVE MODE;
ALTER TABLE sluice.child_links
  DROP CONSTRAINT child_links_parent_run_id_parent_step_parent_task_fkey;
ALTER TABLE sluice.tasks RENAME TO tasks_before_0020;
ALTER TABLE sluice.tasks_before_0020
  RENAME CONSTRAINT tasks_pkey TO tasks_before_0020_pkey;
ALTER TABLE sluice.tasks_before_0020
  RENAME CONSTRAINT tasks_by_message TO tasks_before_0020_by_message;

CREATE TABLE sluice.tasks (
  -- never changed after the insert (message_id only by RetryRun)
  run_id            uuid NOT NULL,
  step_index        integer NOT NULL,
  task_index        integer NOT NULL,
  flow_slug         text NOT NULL,
  queue_name        text NOT NULL,
  message_id        bigint NOT NULL,
  queued_at         timestamptz NOT NULL,
  requeued_count    integer NOT NULL,
  budget_start      integer NOT NULL DEFAULT 0,
  options           json,
  input             json NOT NULL,
  cancel_requested  boolean NOT NULL DEFAULT false,
  -- changed by the claim
  worker_id         text NOT NULL,
  attempts          integer NOT NULL,
  started_at        timestamptz,
  -- changed by the claim and the finish
  status            text NOT NULL,
  stall_at          timestamptz,
  -- changed by the finish
  finished_at       timestamptz,
  error             text NOT NULL,
  output            json
) WITH (fillfactor = 40);

INSERT INTO sluice.tasks (run_id, step_index, task_index, flow_slug,
    queue_name, message_id, queued_at, requeued_count, budget_start, options,
    input, cancel_requested, worker_id, attempts, started_at, status,
    stall_at, finished_at, error, output)
  SELECT run_id, step_index, task_index, flow_slug, queue_name, message_id,
    queued_at, requeued_count, budget_start, options, input,
    cancel_requested, worker_id, attempts, started_at, status, stall_at,
    finished_at, error, output
  FROM sluice.tasks_before_0020;

ALTER TABLE sluice.tasks
  ADD CONSTRAINT tasks_pkey PRIMARY KEY (run_id, step_index, task_index),
  ADD CONSTRAINT tasks_by_message UNIQUE (queue_name, message_id);
ALTER TABLE sluice.child_links
  ADD CONSTRAINT child_links_parent_run_id_parent_step_parent_task_fkey
  FOREIGN KEY (parent_run_id, parent_step, parent_task)
  REFERENCES sluice.tasks (run_id, step_index, task_index);
DROP TABLE sluice.tasks_before_0020;
GRANT SELECT, INSERT, UPDATE, DELETE ON sluice.tasks TO sluice_runtime;
ANALYZE sluice.tasks;
