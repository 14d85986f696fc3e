-- Sluice's pgmq-compatible queue SQL.
--
-- Follows the public API of pgmq 1.5.1 (https://github.com/pgmq/pgmq): the
-- schema `pgmq`, the per-queue tables pgmq.q_<name> (live) and
-- pgmq.a_<name> (archive), the table pgmq.meta, the types
-- pgmq.message_record, pgmq.metrics_result and pgmq.queue_record, and the
-- functions below with the same signatures and behaviour. Any pgmq client
-- can use queues created here.
--
-- The Postgres backend's migration runs this file, inside its transaction,
-- only when no schema `pgmq` exists (when the pgmq extension is installed,
-- Sluice uses the extension instead). It needs no superuser: plain SQL and
-- PL/pgSQL, objects owned by the role that runs it. Running it again is
-- harmless. Partitioned queues (pg_partman) and the notification functions
-- of later pgmq versions are not provided. It is stricter than pgmq in three
-- places: empty queue names, send_batch headers that do not match the
-- messages one to one, and queue names differing only in case (one meta
-- row). docs/pgmq.md has the details.
--
-- Every statement on a queue table is built with format() (%I quotes the
-- table name) and run with EXECUTE, so it is planned afresh on each call and
-- never keeps a plan made when the table was empty.

CREATE SCHEMA IF NOT EXISTS pgmq;

CREATE TABLE IF NOT EXISTS pgmq.meta (
  queue_name varchar UNIQUE NOT NULL,
  is_partitioned boolean NOT NULL,
  is_unlogged boolean NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- CREATE TYPE has no IF NOT EXISTS.
DO $types$
BEGIN
  IF to_regtype('pgmq.message_record') IS NULL THEN
    CREATE TYPE pgmq.message_record AS (
      msg_id bigint,
      read_ct integer,
      enqueued_at timestamptz,
      vt timestamptz,
      message jsonb,
      headers jsonb
    );
  END IF;
  IF to_regtype('pgmq.metrics_result') IS NULL THEN
    CREATE TYPE pgmq.metrics_result AS (
      queue_name text,
      queue_length bigint,
      newest_msg_age_sec integer,
      oldest_msg_age_sec integer,
      total_messages bigint,
      scrape_time timestamptz,
      queue_visible_length bigint
    );
  END IF;
  IF to_regtype('pgmq.queue_record') IS NULL THEN
    CREATE TYPE pgmq.queue_record AS (
      queue_name varchar,
      is_partitioned boolean,
      is_unlogged boolean,
      created_at timestamptz
    );
  END IF;
END
$types$;

------------------------------------------------------------------------------
-- Names
------------------------------------------------------------------------------

-- Raises unless queue_name fits the 47-character limit, which keeps every
-- derived name (tables, indexes, sequences) within Postgres's 63.
CREATE OR REPLACE FUNCTION pgmq.validate_queue_name(queue_name text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF queue_name IS NULL OR length(queue_name) = 0 THEN
    RAISE EXCEPTION 'queue name must not be empty'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF length(queue_name) > 47 THEN
    RAISE EXCEPTION 'queue name is too long, maximum length is 47 characters: "%" has %',
      queue_name, length(queue_name)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END;
$$;

-- The case-folded table name for a queue: format_table_name('Jobs', 'q')
-- is 'q_jobs'. Rejects names containing $ ; -- or '.
CREATE OR REPLACE FUNCTION pgmq.format_table_name(queue_name text, prefix text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF queue_name ~ '\$|;|--|''' THEN
    RAISE EXCEPTION 'queue name contains invalid characters: $, ;, --, or '' (got "%")',
      queue_name
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN lower(prefix || '_' || queue_name);
END;
$$;

-- Serializes create and drop of one queue (transaction-scoped).
CREATE OR REPLACE FUNCTION pgmq._lock_queue(queue_name text)
RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtext('pgmq.queue_' || lower(queue_name)));
$$;

------------------------------------------------------------------------------
-- Creating and dropping queues
------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION pgmq._create_queue(queue_name text, unlogged boolean)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  qtable text;
  atable text;
BEGIN
  PERFORM pgmq.validate_queue_name(queue_name);
  qtable := pgmq.format_table_name(queue_name, 'q');
  atable := pgmq.format_table_name(queue_name, 'a');
  PERFORM pgmq._lock_queue(queue_name);

  EXECUTE format(
    'CREATE %s TABLE IF NOT EXISTS pgmq.%I (
       msg_id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
       read_ct integer NOT NULL DEFAULT 0,
       enqueued_at timestamptz NOT NULL DEFAULT now(),
       vt timestamptz NOT NULL,
       message jsonb,
       headers jsonb
     )',
    CASE WHEN unlogged THEN 'UNLOGGED' ELSE '' END, qtable);
  EXECUTE format(
    'CREATE TABLE IF NOT EXISTS pgmq.%I (
       msg_id bigint PRIMARY KEY,
       read_ct integer NOT NULL DEFAULT 0,
       enqueued_at timestamptz NOT NULL DEFAULT now(),
       archived_at timestamptz NOT NULL DEFAULT now(),
       vt timestamptz NOT NULL,
       message jsonb,
       headers jsonb
     )',
    atable);
  EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (vt ASC)',
                 qtable || '_vt_idx', qtable);
  EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON pgmq.%I (archived_at)',
                 'archived_at_idx_' || lower(queue_name), atable);

  -- The meta row keeps the name as given, like pgmq; spellings that differ
  -- only in case name the same tables, so they share one row.
  IF NOT EXISTS (SELECT 1 FROM pgmq.meta m
                  WHERE lower(m.queue_name) = lower(_create_queue.queue_name)) THEN
    INSERT INTO pgmq.meta (queue_name, is_partitioned, is_unlogged)
    VALUES (_create_queue.queue_name, false, unlogged);
  END IF;
END;
$$;

-- Creates the queue's live and archive tables, their indexes and its meta
-- row. Creating an existing queue changes nothing.
CREATE OR REPLACE FUNCTION pgmq.create_non_partitioned(queue_name text)
RETURNS void
LANGUAGE sql AS $$
  SELECT pgmq._create_queue(queue_name, false);
$$;

CREATE OR REPLACE FUNCTION pgmq."create"(queue_name text)
RETURNS void
LANGUAGE sql AS $$
  SELECT pgmq._create_queue(queue_name, false);
$$;

-- The same with an unlogged live table: faster, emptied after a crash.
CREATE OR REPLACE FUNCTION pgmq.create_unlogged(queue_name text)
RETURNS void
LANGUAGE sql AS $$
  SELECT pgmq._create_queue(queue_name, true);
$$;

-- Drops both tables and the meta row. False (with a notice) when the queue
-- does not exist.
CREATE OR REPLACE FUNCTION pgmq.drop_queue(queue_name text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  qtable text := pgmq.format_table_name(queue_name, 'q');
  atable text := pgmq.format_table_name(queue_name, 'a');
  existed boolean;
BEGIN
  PERFORM pgmq._lock_queue(queue_name);
  existed := EXISTS (SELECT 1 FROM pgmq.meta m
                      WHERE lower(m.queue_name) = lower(drop_queue.queue_name))
             OR to_regclass(format('pgmq.%I', qtable)) IS NOT NULL;
  IF NOT existed THEN
    RAISE NOTICE 'pgmq queue "%" does not exist', queue_name;
    RETURN false;
  END IF;
  EXECUTE format('DROP TABLE IF EXISTS pgmq.%I', qtable);
  EXECUTE format('DROP TABLE IF EXISTS pgmq.%I', atable);
  DELETE FROM pgmq.meta m WHERE lower(m.queue_name) = lower(drop_queue.queue_name);
  RETURN true;
END;
$$;

------------------------------------------------------------------------------
-- Sending
------------------------------------------------------------------------------

-- Inserts one message visible at `visible_at`; returns its id.
CREATE OR REPLACE FUNCTION pgmq._send_at(queue_name text, msg jsonb, headers jsonb,
                                         visible_at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'INSERT INTO pgmq.%I (vt, message, headers) VALUES ($1, $2, $3) RETURNING msg_id',
    pgmq.format_table_name(queue_name, 'q'))
  USING visible_at, msg, headers;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, NULL, clock_timestamp());
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb, delay integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, NULL,
                              clock_timestamp() + make_interval(secs => delay));
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb, delay timestamptz)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, NULL, delay);
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb, headers jsonb)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, headers, clock_timestamp());
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb, headers jsonb,
                                     delay integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, headers,
                              clock_timestamp() + make_interval(secs => delay));
$$;

CREATE OR REPLACE FUNCTION pgmq.send(queue_name text, msg jsonb, headers jsonb,
                                     delay timestamptz)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_at(queue_name, msg, headers, delay);
$$;

-- Inserts the messages in array order (ids increase with the index), all
-- visible at `visible_at`; returns their ids in that order. headers, when
-- given, must have one element per message.
CREATE OR REPLACE FUNCTION pgmq._send_batch_at(queue_name text, msgs jsonb[],
                                               headers jsonb[],
                                               visible_at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
  IF headers IS NOT NULL
     AND coalesce(cardinality(headers), 0) <> coalesce(cardinality(msgs), 0) THEN
    RAISE EXCEPTION 'send_batch: % headers for % messages; give one header per message',
      cardinality(headers), cardinality(msgs)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY EXECUTE format(
    'WITH inserted AS (
       INSERT INTO pgmq.%I (vt, message, headers)
       SELECT $1, m.message, $3[m.position]
         FROM unnest($2::jsonb[]) WITH ORDINALITY AS m(message, position)
        ORDER BY m.position
       RETURNING msg_id)
     SELECT msg_id FROM inserted ORDER BY msg_id',
    pgmq.format_table_name(queue_name, 'q'))
  USING visible_at, msgs, headers;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[])
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, NULL, clock_timestamp());
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[], delay integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, NULL,
                                    clock_timestamp() + make_interval(secs => delay));
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[],
                                           delay timestamptz)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, NULL, delay);
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[],
                                           headers jsonb[])
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, headers, clock_timestamp());
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[],
                                           headers jsonb[], delay integer)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, headers,
                                    clock_timestamp() + make_interval(secs => delay));
$$;

CREATE OR REPLACE FUNCTION pgmq.send_batch(queue_name text, msgs jsonb[],
                                           headers jsonb[], delay timestamptz)
RETURNS SETOF bigint
LANGUAGE sql AS $$
  SELECT * FROM pgmq._send_batch_at(queue_name, msgs, headers, delay);
$$;

------------------------------------------------------------------------------
-- Reading
------------------------------------------------------------------------------

-- Takes up to qty visible messages in msg_id order, skipping rows other
-- transactions hold locked; each one becomes invisible for vt seconds and
-- its read_ct grows by one. A non-empty `conditional` keeps only messages
-- whose body contains it (jsonb @>).
CREATE OR REPLACE FUNCTION pgmq.read(queue_name text, vt integer, qty integer,
                                     conditional jsonb DEFAULT '{}')
RETURNS SETOF pgmq.message_record
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'WITH picked AS (
       SELECT msg_id FROM pgmq.%1$I
        WHERE vt <= clock_timestamp()
          AND ($3 = ''{}''::jsonb OR message @> $3)
        ORDER BY msg_id
        LIMIT $1
        FOR UPDATE SKIP LOCKED),
     updated AS (
       UPDATE pgmq.%1$I q
          SET vt = clock_timestamp() + make_interval(secs => $2),
              read_ct = q.read_ct + 1
         FROM picked
        WHERE q.msg_id = picked.msg_id
       RETURNING q.msg_id, q.read_ct, q.enqueued_at, q.vt, q.message, q.headers)
     SELECT * FROM updated ORDER BY msg_id',
    pgmq.format_table_name(queue_name, 'q'))
  USING qty, vt, coalesce(conditional, '{}'::jsonb);
END;
$$;

-- read, repeated every poll_interval_ms until it returns something or
-- max_poll_seconds have passed.
CREATE OR REPLACE FUNCTION pgmq.read_with_poll(queue_name text, vt integer, qty integer,
                                               max_poll_seconds integer DEFAULT 5,
                                               poll_interval_ms integer DEFAULT 100,
                                               conditional jsonb DEFAULT '{}')
RETURNS SETOF pgmq.message_record
LANGUAGE plpgsql AS $$
DECLARE
  stop_at timestamptz := clock_timestamp() + make_interval(secs => max_poll_seconds);
  found_any boolean;
  r pgmq.message_record;
BEGIN
  LOOP
    found_any := false;
    FOR r IN SELECT * FROM pgmq.read(queue_name, vt, qty, conditional) LOOP
      found_any := true;
      RETURN NEXT r;
    END LOOP;
    IF found_any OR clock_timestamp() >= stop_at THEN
      RETURN;
    END IF;
    PERFORM pg_sleep(least(poll_interval_ms / 1000.0,
                           greatest(extract(epoch FROM stop_at - clock_timestamp()), 0)));
  END LOOP;
END;
$$;

-- Reads and deletes the first visible message (at-most-once delivery).
CREATE OR REPLACE FUNCTION pgmq.pop(queue_name text)
RETURNS SETOF pgmq.message_record
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'WITH picked AS (
       SELECT msg_id FROM pgmq.%1$I
        WHERE vt <= clock_timestamp()
        ORDER BY msg_id
        LIMIT 1
        FOR UPDATE SKIP LOCKED)
     DELETE FROM pgmq.%1$I q
      USING picked
      WHERE q.msg_id = picked.msg_id
     RETURNING q.msg_id, q.read_ct, q.enqueued_at, q.vt, q.message, q.headers',
    pgmq.format_table_name(queue_name, 'q'));
END;
$$;

-- Makes one message visible vt seconds from now; returns it (no row when
-- the id is unknown).
CREATE OR REPLACE FUNCTION pgmq.set_vt(queue_name text, msg_id bigint, vt integer)
RETURNS SETOF pgmq.message_record
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'UPDATE pgmq.%I
        SET vt = clock_timestamp() + make_interval(secs => $2)
      WHERE msg_id = $1
     RETURNING msg_id, read_ct, enqueued_at, vt, message, headers',
    pgmq.format_table_name(queue_name, 'q'))
  USING msg_id, vt;
END;
$$;

------------------------------------------------------------------------------
-- Archiving and deleting
------------------------------------------------------------------------------

-- Moves messages from the live table to the archive table; returns the ids
-- that were moved. Unknown ids are skipped.
CREATE OR REPLACE FUNCTION pgmq.archive(queue_name text, msg_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'WITH moved AS (
       DELETE FROM pgmq.%I
        WHERE msg_id = ANY($1)
       RETURNING msg_id, read_ct, enqueued_at, vt, message, headers)
     INSERT INTO pgmq.%I (msg_id, read_ct, enqueued_at, vt, message, headers)
     SELECT msg_id, read_ct, enqueued_at, vt, message, headers FROM moved
     RETURNING msg_id',
    pgmq.format_table_name(queue_name, 'q'), pgmq.format_table_name(queue_name, 'a'))
  USING msg_ids;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.archive(queue_name text, msg_id bigint)
RETURNS boolean
LANGUAGE sql AS $$
  SELECT EXISTS (SELECT 1 FROM pgmq.archive(queue_name, ARRAY[msg_id]));
$$;

-- Deletes messages; returns the ids that were deleted.
CREATE OR REPLACE FUNCTION pgmq.delete(queue_name text, msg_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    'DELETE FROM pgmq.%I WHERE msg_id = ANY($1) RETURNING msg_id',
    pgmq.format_table_name(queue_name, 'q'))
  USING msg_ids;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.delete(queue_name text, msg_id bigint)
RETURNS boolean
LANGUAGE sql AS $$
  SELECT EXISTS (SELECT 1 FROM pgmq.delete(queue_name, ARRAY[msg_id]));
$$;

-- Deletes every live message; returns how many.
CREATE OR REPLACE FUNCTION pgmq.purge_queue(queue_name text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  deleted bigint;
BEGIN
  EXECUTE format('DELETE FROM pgmq.%I', pgmq.format_table_name(queue_name, 'q'));
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END;
$$;

------------------------------------------------------------------------------
-- Metrics and listing
------------------------------------------------------------------------------

-- queue_length: live messages; queue_visible_length: those readable now;
-- message ages in seconds (NULL when empty); total_messages: every message
-- ever sent (the id sequence's position).
CREATE OR REPLACE FUNCTION pgmq.metrics(queue_name text)
RETURNS pgmq.metrics_result
LANGUAGE plpgsql AS $$
DECLARE
  qtable text := pgmq.format_table_name(queue_name, 'q');
  sequence_name text;
  result pgmq.metrics_result;
BEGIN
  sequence_name := pg_get_serial_sequence(format('pgmq.%I', qtable), 'msg_id');
  EXECUTE format(
    'SELECT $1::text,
            count(*),
            extract(epoch FROM now() - max(enqueued_at))::integer,
            extract(epoch FROM now() - min(enqueued_at))::integer,
            (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s),
            now(),
            count(*) FILTER (WHERE vt <= clock_timestamp())
       FROM pgmq.%I',
    sequence_name, qtable)
  INTO result
  USING queue_name;
  RETURN result;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.metrics_all()
RETURNS SETOF pgmq.metrics_result
LANGUAGE plpgsql AS $$
DECLARE
  name text;
BEGIN
  FOR name IN SELECT m.queue_name FROM pgmq.meta m ORDER BY m.queue_name LOOP
    RETURN NEXT pgmq.metrics(name);
  END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION pgmq.list_queues()
RETURNS SETOF pgmq.queue_record
LANGUAGE sql AS $$
  SELECT queue_name, is_partitioned, is_unlogged, created_at
    FROM pgmq.meta
   ORDER BY queue_name;
$$;
