-- Issue 24 (counts at any horizon): reading the state counts costs O(kinds), whatever the
-- spread of due times.
--
-- Since 0016 waiting rows are counted per kind and per *minute* they are due, so job_counts
-- grows with the spread of due times: 200,000 jobs scheduled over the next 30 days made it
-- 200,000 rows and each snapshot 290-810 ms (benchmarks/scale.py --reminders 200000 --counts).
-- The triggers still write per minute (their cost is unchanged); the fold now keeps a waiting
-- row at a width that grows with how far off it is, as seen from the fold's minute m:
--   before m                              one row per kind, due = -infinity (as before),
--                                         until = m
--   from m to the end of the next hour    per minute (until NULL: one minute)
--   from there to the end of tomorrow     per hour   (until = due + 1 hour)
--   from the day after tomorrow (UTC) on  one row per kind: until = infinity
-- so at most 1 + 120 + 48 + 1 waiting rows per kind (benchmarks/scale.py with the reminders:
-- 1,104 rows in all for 20 kinds, from 200,504). `until` (exclusive) bounds the run_at of the jobs a row counts. The clock moves
-- on towards coarse rows: a fold that finds one starting where its width is no longer allowed
-- (an hour row within the next hour, the far row before the day after tomorrow) counts that
-- stretch again from the jobs' own index (jobs_pending: each hour an hour's jobs, each day a
-- day's) and splits it finely; the far row keeps the rest (its jobs and deltas, less the
-- recount). Deleting the rows and recounting the jobs in one statement sees one snapshot, so a
-- writer still open is in neither and its delta rows come later, as always: counts stay exact.
-- The snapshot counts the index from now to where the rows that started by now end
-- (metrics_state_counts): a minute's jobs while folds keep up; an hour's, or every future
-- job's, only once no fold has run for an hour, or for a day (no jobtui worker, whose
-- housekeeper folds every few seconds, and producers too few to fill job_counts: 0021).
ALTER TABLE __schema__.job_counts ADD COLUMN IF NOT EXISTS until timestamptz;

-- The fold as of `at`: never later than now() (a fold from the future would call rows due that
-- are not), never earlier than the last fold (see `h`). Tests fold as of earlier times to see
-- the clock move. One folder at a time (the others skip), as before.
CREATE OR REPLACE FUNCTION __schema__.jobtui_fold_job_counts_at(at timestamptz) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('jobtui_fold_job_counts'),
                                   '__schema__.job_counts'::regclass::oid::int) THEN
    RETURN;
  END IF;
  at := least(at, now());
  WITH h AS (
    -- Never back in time: from where the last fold left the due rows (the -infinity row's
    -- `until`), even when `at` is earlier (a trigger's fold in a transaction that began
    -- before that fold, a clock set back). A coarse row then never starts before the rows
    -- already counted as due, and a recount never meets them.
    SELECT greatest(at, max(c.until) FILTER (WHERE c.state = 'waiting'
                                               AND c.due = '-infinity')) AS at
    FROM __schema__.job_counts c
  ), z AS (
    SELECT date_trunc('minute', h.at, 'UTC') AS m,
           date_trunc('hour', h.at, 'UTC') + interval '2 hours' AS a,
           date_trunc('day', h.at, 'UTC') + interval '2 days' AS b
    FROM h
  ), stale AS (
    -- Coarse waiting rows wider than the bucket their start now falls in: counted again.
    SELECT DISTINCT c.due AS lo, least(c.until, z.b) AS hi
    FROM __schema__.job_counts c CROSS JOIN z
    WHERE c.state = 'waiting' AND c.until IS NOT NULL
      AND CASE WHEN c.due < z.m THEN c.until > z.m
               WHEN c.due < z.a THEN c.until > c.due + interval '1 minute'
               WHEN c.due < z.b THEN c.until > date_trunc('hour', c.due, 'UTC')
                                               + interval '1 hour'
               ELSE false END
  ), gone AS (
    DELETE FROM __schema__.job_counts c RETURNING c.*
  ), redone AS (
    -- gone rows inside a stale stretch are replaced by the recount (and the far remainder)
    SELECT g.*, g.state = 'waiting'
                AND EXISTS (SELECT 1 FROM stale s WHERE g.due >= s.lo AND g.due < s.hi) AS re
    FROM gone g
  ), recount AS (
    SELECT j.kind, date_trunc('minute', j.run_at, 'UTC') AS due, count(*) AS n
    FROM __schema__.jobs j
    WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts < j.max_attempts
      AND EXISTS (SELECT 1 FROM stale s WHERE j.run_at >= s.lo AND j.run_at < s.hi)
      AND j.run_at >= (SELECT min(s.lo) FROM stale s)
      AND j.run_at < (SELECT max(s.hi) FROM stale s)
    GROUP BY 1, 2
  ), rows AS (
    SELECT r.kind, r.state, r.due, r.until, r.n FROM redone r WHERE NOT r.re
    UNION ALL
    SELECT r.kind, 'waiting', r.due, NULL, r.n FROM recount r
    UNION ALL  -- what the stale rows held beyond the recount: the far row's rest
    SELECT x.kind, 'waiting', 'infinity', NULL, sum(x.n) FROM (
      SELECT r.kind, r.n FROM redone r WHERE r.re
      UNION ALL
      SELECT r.kind, -r.n FROM recount r
    ) x GROUP BY x.kind
  )
  INSERT INTO __schema__.job_counts (kind, state, due, until, n)
  SELECT r.kind, r.state, f.due, f.until, sum(r.n)
  FROM rows r CROSS JOIN z
  CROSS JOIN LATERAL (
    SELECT CASE WHEN r.state <> 'waiting' THEN r.due
                WHEN r.due < z.m THEN '-infinity'::timestamptz
                WHEN r.due < z.a THEN date_trunc('minute', r.due, 'UTC')
                WHEN r.due < z.b THEN date_trunc('hour', r.due, 'UTC')
                ELSE z.b END AS due,
           CASE WHEN r.state <> 'waiting' THEN NULL
                WHEN r.due < z.m THEN z.m
                WHEN r.due < z.a THEN NULL
                WHEN r.due < z.b THEN date_trunc('hour', r.due, 'UTC') + interval '1 hour'
                ELSE 'infinity'::timestamptz END AS until
  ) f
  GROUP BY r.kind, r.state, f.due, f.until HAVING sum(r.n) <> 0;
  WITH gone AS (DELETE FROM __schema__.dead_group_counts c RETURNING c.*)
  INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
  SELECT g.kind, g.error_signature, sum(g.n) FROM gone g
  GROUP BY g.kind, g.error_signature HAVING sum(g.n) <> 0;
  WITH gone AS (DELETE FROM __schema__.job_flow f RETURNING f.*)
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT g.minute, g.kind, sum(g.arrived), sum(g.departed)
  FROM gone g
  WHERE g.minute >= date_trunc('minute', now(), 'UTC') - interval '7 days 1 minute'
  GROUP BY g.minute, g.kind;
END
$fn$;

-- Callers (the worker's housekeeper, the triggers) keep calling it by this name.
CREATE OR REPLACE FUNCTION __schema__.jobtui_fold_job_counts() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT __schema__.jobtui_fold_job_counts_at(now())
$fn$;

-- With `until`, for the snapshot to bound the stretch it counts from the index.
DROP FUNCTION IF EXISTS __schema__.jobtui_job_counts();
CREATE FUNCTION __schema__.jobtui_job_counts()
RETURNS TABLE (kind text, state text, due timestamptz, until timestamptz, n bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, c.state, c.due, c.until, sum(c.n)::bigint FROM __schema__.job_counts c
  GROUP BY c.kind, c.state, c.due, c.until HAVING sum(c.n) <> 0
$fn$;

SELECT __schema__.jobtui_fold_job_counts();
