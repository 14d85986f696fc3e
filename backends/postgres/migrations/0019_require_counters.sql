-- Sluice schema: counter moves checked on the server.
--
-- The engine works out, with a run locked, what each of its counters
-- (runs.remaining_steps, step_states.remaining_tasks and remaining_deps)
-- must be after a move, and used to read every new value back to compare:
-- one round trip per counted write in a finish. The counted writes now
-- carry the expected values and end with a check that raises through this
-- function when a counter differs, so nobody waits for them: the raise
-- aborts the transaction and COMMIT reports it (as require_found does for
-- a missing row). See docs/decisions/0085-checked-counter-moves.md.
--
-- Raises `problem` (SQLSTATE XX000, which the backend reports as
-- kInternal) when it is not null.
CREATE FUNCTION sluice.require_counters(problem text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
BEGIN
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = problem;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION sluice.require_counters(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sluice.require_counters(text) TO sluice_runtime;
