-- Issue 9: liveness judged by each worker's own settings, abandoned threads and outcome
-- errors visible, and one definition of "move a job into dead_letters".

-- Each worker writes its own heartbeat interval and timeout; a rescuer judges a job's owner by
-- these, never by its own settings (a rolling deploy that changes --heartbeat must not make
-- workers rescue each other's live jobs). Rows of workers older than this migration get the
-- old defaults.
ALTER TABLE __schema__.workers
  ADD COLUMN IF NOT EXISTS heartbeat_interval_s double precision not null default 5,
  ADD COLUMN IF NOT EXISTS heartbeat_timeout_s  double precision not null default 30,
  -- Plain handlers that overran their timeout (or ignored a cancel) and still hold a thread,
  -- and so a slot, until they really end.
  ADD COLUMN IF NOT EXISTS abandoned            int not null default 0,
  -- Outcomes the worker could not write (a row the database refused for a reason that retrying
  -- cannot fix): how many since it started, and the last error as PostgreSQL gave it.
  ADD COLUMN IF NOT EXISTS outcome_errors       int not null default 0,
  ADD COLUMN IF NOT EXISTS last_outcome_error   text;

-- The one move of jobs into dead_letters (worker burials, rescues, the exhausted-row sweep).
-- The caller has already chosen and locked the rows (its conditions differ); this deletes them
-- from jobs and inserts them into dead_letters in one statement, so a job is never in both
-- tables and never in neither. `p_entries` holds, per id (as text), the history entry of the
-- attempt that ended ({attempt, at, error, traceback, worker}) and optionally the effective
-- `max_attempts` to record; an id without an entry keeps its last error and history.
CREATE OR REPLACE FUNCTION __schema__.jobtui_move_to_dead(
  p_ids bigint[], p_entries jsonb, p_reason text
) RETURNS TABLE (moved_id bigint, moved_kind text)
LANGUAGE sql VOLATILE AS $fn$
  WITH moved AS (
    DELETE FROM __schema__.jobs j
    WHERE j.id = ANY(p_ids)
    RETURNING j.id, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.created_at,
              j.run_at, j.last_error, j.errors
  )
  INSERT INTO __schema__.dead_letters AS d
    (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
     errors, reason)
  SELECT m.id, m.kind, m.payload, m.priority, m.attempts,
         coalesce((p_entries -> m.id::text ->> 'max_attempts')::int, m.max_attempts),
         m.created_at, m.run_at,
         coalesce(p_entries -> m.id::text -> 'entry' ->> 'error', m.last_error),
         CASE WHEN p_entries -> m.id::text ? 'entry'
              THEN m.errors || jsonb_build_array(p_entries -> m.id::text -> 'entry')
              ELSE m.errors END,
         p_reason
  FROM moved m
  RETURNING d.id, d.kind
$fn$;
