-- Unique jobs outside the producer API (issue 13).

-- name: unique_requeue_dead_ids
-- ops_requeue_ids for keyed dead letters: the job comes back with its key, unless an
-- unfinished job holds that key, in which case the dead letter stays where it is (reported
-- as skipped). A producer that takes the key after this statement's snapshot makes the
-- INSERT find a conflict: that row is put back into dead_letters by the same statement (same
-- id, same history, same died_at), so a job is never in both tables and never in neither.
WITH moved AS (
  DELETE FROM __schema__.dead_letters d
  WHERE d.id = ANY(%(ids)s::bigint[])
    AND NOT EXISTS (SELECT 1 FROM __schema__.jobs x WHERE x.id = d.id)
    AND NOT EXISTS (SELECT 1 FROM __schema__.jobs x
                    WHERE x.kind = d.kind AND x.unique_key = d.unique_key
                      AND x.finished_at IS NULL)
  RETURNING d.id, d.kind, d.payload, d.priority, d.attempts, d.max_attempts, d.errors,
            d.last_error, d.created_at, d.run_at, d.reason, d.died_at, d.unique_key
), ins AS (
  INSERT INTO __schema__.jobs
    (id, kind, payload, priority, max_attempts, attempts, errors, last_error, created_at,
     run_at, unique_key)
  SELECT id, kind, payload, priority, max_attempts, 0, errors, last_error, created_at, now(),
         unique_key
  FROM moved
  ORDER BY kind, unique_key
  ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND finished_at IS NULL
  DO NOTHING
  RETURNING id
), kept AS (
  INSERT INTO __schema__.dead_letters
    (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
     errors, reason, died_at, unique_key)
  SELECT m.id, m.kind, m.payload, m.priority, m.attempts, m.max_attempts, m.created_at,
         m.run_at, m.last_error, m.errors, m.reason, m.died_at, m.unique_key
  FROM moved m
  WHERE m.id NOT IN (SELECT id FROM ins)
  RETURNING id
)
SELECT id, true AS requeued FROM ins
UNION ALL
SELECT id, false FROM kept
UNION ALL
SELECT d.id, false FROM __schema__.dead_letters d
WHERE d.id = ANY(%(ids)s::bigint[])
  AND EXISTS (SELECT 1 FROM __schema__.jobs x
              WHERE x.kind = d.kind AND x.unique_key = d.unique_key AND x.finished_at IS NULL)
