-- Issue 13: a job's unique_key travels with it into dead_letters (the console's `key:` filter
-- finds it there, and requeueing it checks the key again). Same move as 0004's, plus the key.
-- The columns come from 0010 (numbered later, written earlier); they are added here too, the
-- same way (nullable, no default), so this applies first on a new database.
ALTER TABLE __schema__.jobs ADD COLUMN IF NOT EXISTS unique_key text;
ALTER TABLE __schema__.dead_letters ADD COLUMN IF NOT EXISTS unique_key text;

CREATE OR REPLACE FUNCTION __schema__.jobtui_move_to_dead(
  p_ids bigint[], p_entries jsonb, p_reason text
) RETURNS TABLE (moved_id bigint, moved_kind text)
LANGUAGE sql VOLATILE AS $fn$
  WITH moved AS (
    DELETE FROM __schema__.jobs j
    WHERE j.id = ANY(p_ids)
    RETURNING j.id, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.created_at,
              j.run_at, j.last_error, j.errors, j.unique_key
  )
  INSERT INTO __schema__.dead_letters AS d
    (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
     errors, reason, unique_key)
  SELECT m.id, m.kind, m.payload, m.priority, m.attempts,
         coalesce((p_entries -> m.id::text ->> 'max_attempts')::int, m.max_attempts),
         m.created_at, m.run_at,
         coalesce(p_entries -> m.id::text -> 'entry' ->> 'error', m.last_error),
         CASE WHEN p_entries -> m.id::text ? 'entry'
              THEN m.errors || jsonb_build_array(p_entries -> m.id::text -> 'entry')
              ELSE m.errors END,
         p_reason, m.unique_key
  FROM moved m
  RETURNING d.id, d.kind
$fn$;
