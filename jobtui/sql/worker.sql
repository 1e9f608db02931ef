-- Statements of the bundled worker (jobtui/worker.py). Every write that ends a job re-checks
-- that this worker still holds the same attempt (`locked_by = me AND attempts = claimed`), so
-- a job rescued from under a worker is never completed twice.
-- Batch writes find their rows by `j.id = ANY(ids)` (an index scan by id, whatever the
-- statistics say) and look each row's attempt (and data) up in a jsonb object keyed by id
-- (`%(by_id)s`, a binary search per row). No join: joined to unnest(ids, attempts), the
-- planner either rescanned the whole id list for every row (a generic plan, 460 ms per 1000
-- jobs) or, with statistics taken while nothing was locked (`locked_by = me` estimated at one
-- row), scanned the whole table for every batch (40 ms per 200 jobs at 20 000 rows).

-- name: worker_claim
-- Batch claim of handled, unpaused kinds. The sub-select is fenced (`= ANY(ARRAY(…))` runs it
-- once, as an InitPlan) so the planner cannot turn it into a nested loop that locks more than
-- `limit` rows; it walks the partial index jobs_claim in (priority DESC, run_at, id) order and
-- the UPDATE then finds the rows by primary key. Paused kinds are removed from the kinds list
-- rather than filtered per row: a `kind <> ALL(…)` filter is estimated to keep almost no rows
-- when there are few kinds, and the planner then sorts every pending row instead.
-- The payload comes back as text and is decoded job by job (worker_db.decode_payload): one
-- payload Python cannot decode (nested too deeply) must fail its own job, not the whole batch.
UPDATE __schema__.jobs j
SET locked_at = now(), locked_by = %(worker)s, attempts = j.attempts + 1
WHERE j.id = ANY(ARRAY(
    SELECT x.id
    FROM __schema__.jobs x
    WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND x.run_at <= now()
      AND x.attempts < x.max_attempts
      AND x.kind = ANY(ARRAY(SELECT unnest(%(kinds)s::text[])
                             EXCEPT SELECT p.kind FROM __schema__.paused_kinds p))
    ORDER BY x.priority DESC, x.run_at, x.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
  AND j.attempts < j.max_attempts
RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts

-- name: worker_complete
-- Group commit of successful jobs: one statement for every completion buffered so far.
UPDATE __schema__.jobs j
SET finished_at = now()
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
RETURNING j.id

-- name: worker_cancelled
-- Jobs whose handler was cancelled at an operator's request.
UPDATE __schema__.jobs j
SET finished_at = now(), cancelled_at = now()
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
RETURNING j.id

-- name: worker_release
-- Jobs interrupted by this worker's shutdown (or claimed but never started): back to ready,
-- the attempt given back because the job did not fail, and other workers woken.
WITH released AS (
  UPDATE __schema__.jobs j
  SET locked_at = NULL, locked_by = NULL, attempts = greatest(j.attempts - 1, 0)
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
    AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
  RETURNING j.id
)
SELECT id, pg_notify(%(channel)s, 'requeue') FROM released

-- name: worker_release_orphans
-- Rows locked by this worker that it does not know about (a claim whose reply was lost with
-- the connection): back to ready with the attempt given back.
WITH released AS (
  UPDATE __schema__.jobs j
  SET locked_at = NULL, locked_by = NULL, attempts = greatest(j.attempts - 1, 0)
  WHERE j.locked_by = %(worker)s AND j.finished_at IS NULL AND j.locked_at IS NOT NULL
    AND j.id <> ALL(%(known)s::bigint[])
  RETURNING j.id
)
SELECT id FROM released

-- name: worker_retry
-- Failed attempts that will be retried: back-off in run_at, error appended, lock cleared.
-- A handler's own max_attempts (when set) is written so the column says what counts.
-- `by_id`: {"id": [attempt, delay_s, error, traceback, handler max_attempts], …}.
UPDATE __schema__.jobs j
SET run_at = now() + make_interval(secs => (%(by_id)s::jsonb -> j.id::text ->> 1)::float8),
    locked_at = NULL, locked_by = NULL,
    max_attempts = coalesce((%(by_id)s::jsonb -> j.id::text ->> 4)::int, j.max_attempts),
    last_error = %(by_id)s::jsonb -> j.id::text ->> 2,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
      'attempt', j.attempts, 'at', to_jsonb(now()),
      'error', %(by_id)s::jsonb -> j.id::text -> 2,
      'traceback', %(by_id)s::jsonb -> j.id::text -> 3, 'worker', %(worker)s::text))
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb -> j.id::text ->> 0)::int
RETURNING j.id

-- name: worker_bury
-- Failed last attempts: moved to dead_letters in one statement, keeping the id, with the
-- final error appended to the history.
-- `by_id`: {"id": [attempt, error, traceback, handler max_attempts], …}.
WITH moved AS (
  DELETE FROM __schema__.jobs j
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
    AND j.attempts = (%(by_id)s::jsonb -> j.id::text ->> 0)::int
  RETURNING j.id, j.kind, j.payload, j.priority, j.attempts,
            coalesce((%(by_id)s::jsonb -> j.id::text ->> 3)::int, j.max_attempts)
              AS max_attempts,
            j.created_at, j.run_at,
            %(by_id)s::jsonb -> j.id::text ->> 1 AS error,
            j.errors || jsonb_build_array(jsonb_build_object(
              'attempt', j.attempts, 'at', to_jsonb(now()),
              'error', %(by_id)s::jsonb -> j.id::text -> 1,
              'traceback', %(by_id)s::jsonb -> j.id::text -> 2,
              'worker', %(worker)s::text)) AS errors
)
INSERT INTO __schema__.dead_letters
  (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
   errors, reason)
SELECT id, kind, payload, priority, attempts, max_attempts, created_at, run_at, error,
       errors, 'failed'
FROM moved
RETURNING id

-- name: worker_heartbeat
INSERT INTO __schema__.workers (id, host, pid, kinds, concurrency, running)
VALUES (%(worker)s, %(host)s, %(pid)s, %(kinds)s::text[], %(concurrency)s, %(running)s)
ON CONFLICT (id) DO UPDATE
SET heartbeat_at = now(), running = EXCLUDED.running, kinds = EXCLUDED.kinds,
    concurrency = EXCLUDED.concurrency

-- name: worker_unregister
DELETE FROM __schema__.workers WHERE id = %(worker)s

-- name: worker_my_jobs
-- What this worker holds according to the database: cancellations to deliver, and jobs
-- rescued from under it (absent here) whose handlers must stop.
SELECT id, attempts, cancel_requested
FROM __schema__.jobs
WHERE locked_by = %(worker)s AND finished_at IS NULL AND locked_at IS NOT NULL

-- name: worker_rescue
-- Jobs held by a dead worker (heartbeat older than the timeout, or no row) and rows locked by
-- a consumer that never heartbeats (locked_by NULL) for longer than the lock timeout.
-- Candidates are read first, then locked only if they are still the same attempt (same
-- attempts, locked_at, locked_by), so a job rescued and re-claimed meanwhile is left alone.
-- Those on their last attempt go to dead_letters (worker_lost); the rest back to ready with
-- a "WorkerLost" entry in their history.
WITH live AS (
  SELECT w.id FROM __schema__.workers w
  WHERE w.heartbeat_at >= now() - make_interval(secs => %(heartbeat_timeout)s)
), cand AS MATERIALIZED (
  SELECT j.id, j.attempts, j.locked_at, j.locked_by
  FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.locked_at IS NOT NULL
    AND j.locked_by IS DISTINCT FROM %(worker)s
    AND ((j.locked_by IS NOT NULL AND j.locked_by NOT IN (SELECT id FROM live))
         OR (j.locked_by IS NULL
             AND j.locked_at < now() - make_interval(secs => %(lock_timeout)s)))
  ORDER BY j.id
  LIMIT 1000
), lost AS MATERIALIZED (
  SELECT j.id, j.locked_by
  FROM __schema__.jobs j JOIN cand c ON c.id = j.id
  WHERE j.attempts = c.attempts AND j.locked_at = c.locked_at
    AND j.locked_by IS NOT DISTINCT FROM c.locked_by AND j.finished_at IS NULL
  FOR UPDATE OF j SKIP LOCKED
), dead AS (
  DELETE FROM __schema__.jobs j
  USING lost
  WHERE j.id = lost.id AND j.attempts >= j.max_attempts
  RETURNING j.id, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.created_at,
            j.run_at, j.errors, lost.locked_by
), buried AS (
  INSERT INTO __schema__.dead_letters
    (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
     errors, reason)
  SELECT id, kind, payload, priority, attempts, max_attempts, created_at, run_at,
         CASE WHEN locked_by IS NULL THEN %(lock_msg)s ELSE %(lost_msg)s END,
         errors || jsonb_build_array(jsonb_build_object(
           'attempt', attempts, 'at', to_jsonb(now()),
           'error', CASE WHEN locked_by IS NULL THEN %(lock_msg)s ELSE %(lost_msg)s END,
           'traceback', NULL, 'worker', locked_by)),
         'worker_lost'
  FROM dead
  RETURNING id, kind
), back AS (
  UPDATE __schema__.jobs j
  SET locked_at = NULL, locked_by = NULL,
      last_error = CASE WHEN lost.locked_by IS NULL THEN %(lock_msg)s ELSE %(lost_msg)s END,
      errors = j.errors || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempts, 'at', to_jsonb(now()),
        'error', CASE WHEN lost.locked_by IS NULL THEN %(lock_msg)s ELSE %(lost_msg)s END,
        'traceback', NULL, 'worker', lost.locked_by))
  FROM lost
  WHERE j.id = lost.id AND j.attempts < j.max_attempts
  RETURNING j.id, j.kind
)
SELECT 'dead' AS fate, id, kind FROM buried
UNION ALL
SELECT 'retry' AS fate, id, kind FROM back

-- name: worker_bury_exhausted
-- Unlocked, unfinished rows of kinds this worker handles that have no attempt left (e.g. left
-- so by an article-style consumer): moved to dead_letters, reason `exhausted`.
WITH moved AS (
  DELETE FROM __schema__.jobs j
  WHERE j.id = ANY(ARRAY(
      SELECT x.id FROM __schema__.jobs x
      WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND x.attempts >= x.max_attempts
        AND x.kind = ANY(%(kinds)s::text[])
      LIMIT 1000
      FOR UPDATE SKIP LOCKED))
    AND j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts >= j.max_attempts
  RETURNING j.*
)
INSERT INTO __schema__.dead_letters
  (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
   errors, reason)
SELECT id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
       errors, 'exhausted'
FROM moved
RETURNING id, kind

-- name: worker_forget_stale_workers
-- Rows of workers that have not heartbeat for an hour (their jobs were rescued long ago).
DELETE FROM __schema__.workers
WHERE heartbeat_at < now() - interval '1 hour' AND id <> %(worker)s

-- name: worker_prune
-- One batch of finished jobs older than the retention window; dead letters are never pruned.
WITH gone AS (
  DELETE FROM __schema__.jobs j
  WHERE j.id IN (
    SELECT x.id FROM __schema__.jobs x
    WHERE x.finished_at < now() - make_interval(secs => %(retention)s)
    ORDER BY x.finished_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*) FROM gone

-- name: worker_stats_flush
-- Per-minute, per-kind figures accumulated in memory, added in one statement. `done` counts
-- successful runs and runtime_sum_ms/hist describe those runs; `failed` counts every failed
-- attempt (the last one too); `dead` counts jobs moved to dead letters by the worker.
INSERT INTO __schema__.kind_stats AS s (minute, kind, done, failed, dead, runtime_sum_ms, hist)
SELECT d.minute, d.kind, d.done, d.failed, d.dead, d.runtime_sum_ms, d.hist
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS d(minute timestamptz, kind text, done int, failed int, dead int,
          runtime_sum_ms float8, hist int[])
ON CONFLICT (minute, kind) DO UPDATE
SET done = s.done + EXCLUDED.done,
    failed = s.failed + EXCLUDED.failed,
    dead = s.dead + EXCLUDED.dead,
    runtime_sum_ms = s.runtime_sum_ms + EXCLUDED.runtime_sum_ms,
    hist = ARRAY(
      SELECT coalesce(a, 0) + coalesce(b, 0)
      FROM unnest(s.hist, EXCLUDED.hist) WITH ORDINALITY AS t(a, b, i)
      ORDER BY i)

-- name: worker_queue_sample
-- One sample of the queue per minute, by whichever worker gets there first. Counts come from
-- pending rows only (the partial index jobs_pending); the NOT EXISTS is checked once, so
-- later workers in the same minute do not count at all.
INSERT INTO __schema__.queue_samples
  (minute, ready, scheduled, running, retrying, dead, oldest_ready_age_s)
SELECT date_trunc('minute', now()),
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at <= now()),
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at > now()),
       count(*) FILTER (WHERE j.locked_at IS NOT NULL),
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts > 0),
       (SELECT count(*) FROM __schema__.dead_letters),
       extract(epoch FROM now() - min(j.run_at) FILTER (
         WHERE j.locked_at IS NULL AND j.run_at <= now()))::float8
FROM __schema__.jobs j
WHERE j.finished_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM __schema__.queue_samples q
                  WHERE q.minute = date_trunc('minute', now()))
HAVING NOT EXISTS (SELECT 1 FROM __schema__.queue_samples q
                   WHERE q.minute = date_trunc('minute', now()))
ON CONFLICT (minute) DO NOTHING

-- name: worker_analyze
-- Run when a full claim was slow: fresh statistics let the planner walk jobs_claim in order
-- instead of sorting every due row (see SLOW_CLAIM_S in worker.py).
ANALYZE __schema__.jobs
