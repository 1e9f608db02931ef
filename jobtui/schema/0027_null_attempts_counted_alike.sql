-- On an article `jobs` table made without NOT NULL on attempts or max_attempts (`jobtui migrate`
-- extends it as it is), a row with a NULL there is `waiting` but never due: every count trigger
-- keys it under due NULL, but 0026's one-row INSERT path (and the baseline's count of the rows
-- already there) keyed it by its run_at minute, so once its UPDATE or DELETE took it from due
-- NULL and a fold ran, the snapshot showed one job too many ready (and one too few scheduled)
-- for each such row gone. Now both INSERT paths key a row by the one due expression the UPDATE
-- and DELETE triggers use, and such a table's counts are recounted once, below.
--
-- The short path's retrying and cancel_open rows already matched the grouped path's for NULLs
-- (a NULL test writes no row in either), and so does its state (jobtui_job_state's ELSE). Its
-- count of rows written for the fold rule is now exact: 1 + its retrying and cancel_open rows
-- (0026 said 2 for 3). Tables with NOT NULL columns (jobtui's own, the article's as published)
-- are unaffected: the two expressions agree there, and the recount is skipped.

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  r record;
  added bigint := 0;
BEGIN
  SELECT c.rows, w.kind, w.state, w.due,
         w.state = 'waiting' AND w.attempts > 0 AS retrying,
         w.finished_at IS NULL AND w.cancelled_at IS NOT NULL AS cancel_open
  INTO r
  FROM (SELECT count(*) AS rows FROM (SELECT FROM new_rows LIMIT 2) x) c
  LEFT JOIN LATERAL (
    SELECT w.kind, w.attempts, w.finished_at, w.cancelled_at,
           __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                       w.finished_at, w.cancelled_at) AS state,
           CASE WHEN w.finished_at IS NULL AND w.locked_at IS NULL
                     AND w.attempts < w.max_attempts
                THEN date_trunc('minute', w.run_at, 'UTC') END AS due
    FROM new_rows w LIMIT 1) w ON true;
  IF r.rows = 1 THEN
    INSERT INTO __schema__.job_counts (kind, state, due, n) VALUES (r.kind, r.state, r.due, 1);
    added := 1;
    IF r.retrying OR r.cancel_open THEN
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT r.kind, v.state, NULL, 1
      FROM (VALUES ('retrying', r.retrying), ('cancel_open', r.cancel_open)) v(state, yes)
      WHERE v.yes;
      added := 1 + (r.retrying IS TRUE)::int + (r.cancel_open IS TRUE)::int;
    END IF;
    IF r.state IN ('waiting', 'running', 'exhausted') THEN
      INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
      VALUES (date_trunc('minute', now(), 'UTC'), r.kind, 1, 0);
    END IF;
  ELSIF r.rows > 1 THEN
    -- Many rows: 0025's statement, grouped.
    WITH g AS (
      SELECT s.kind, s.state, s.due, count(*) AS n,
             count(*) FILTER (WHERE s.state = 'waiting' AND s.attempts > 0) AS retrying,
             count(*) FILTER (WHERE s.finished_at IS NULL AND s.cancelled_at IS NOT NULL)
               AS cancel_open
      FROM (SELECT w.kind, w.attempts, w.finished_at, w.cancelled_at,
                   __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                               w.finished_at, w.cancelled_at) AS state,
                   CASE WHEN w.finished_at IS NULL AND w.locked_at IS NULL
                             AND w.attempts < w.max_attempts
                        THEN date_trunc('minute', w.run_at, 'UTC') END AS due
            FROM new_rows w) s
      GROUP BY 1, 2, 3
    ), counts AS (
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT g.kind, g.state, g.due, g.n FROM g
      UNION ALL
      SELECT g.kind, 'retrying', NULL, g.retrying FROM g WHERE g.retrying <> 0
      UNION ALL
      SELECT g.kind, 'cancel_open', NULL, g.cancel_open FROM g WHERE g.cancel_open <> 0
      RETURNING 1
    ), flow AS (
    INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
    SELECT date_trunc('minute', now(), 'UTC'), g.kind, sum(g.n), 0
    FROM g
    WHERE g.state IN ('waiting', 'running', 'exhausted')
    GROUP BY g.kind
    )
    SELECT count(*) INTO added FROM counts;
  END IF;
  IF __schema__.jobtui_trigger_folds_now(added) THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

-- A table whose attempt columns may be NULL may hold rows the baseline or 0026 counted by
-- their run_at minute, already folded with the rest: the counts are rebuilt from the rows,
-- keyed as the triggers key them (the baseline's count of the rows already there, with the
-- due expression above), writers held off by a SHARE lock on `jobs` and folds by the fold's
-- own lock, so no delta row is missed or counted twice. One scan of `jobs`, on such tables only.
DO $do$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                 WHERE a.attrelid = '__schema__.jobs'::regclass
                   AND a.attname IN ('attempts', 'max_attempts') AND NOT a.attnotnull) THEN
    RETURN;
  END IF;
  LOCK TABLE __schema__.jobs IN SHARE MODE;
  PERFORM pg_advisory_xact_lock(hashtext('jobtui_fold_job_counts'),
                                '__schema__.job_counts'::regclass::oid::int);
  DELETE FROM __schema__.job_counts;
  WITH j AS (
    SELECT j.kind, j.attempts, j.finished_at, j.cancelled_at,
           __schema__.jobtui_job_state(j.attempts, j.max_attempts, j.locked_at, j.finished_at,
                                       j.cancelled_at) AS state,
           CASE WHEN j.finished_at IS NULL AND j.locked_at IS NULL
                     AND j.attempts < j.max_attempts
                THEN date_trunc('minute', j.run_at, 'UTC') END AS due
    FROM __schema__.jobs j
  )
  INSERT INTO __schema__.job_counts (kind, state, due, n)
  SELECT j.kind, j.state, j.due, count(*) FROM j GROUP BY 1, 2, 3
  UNION ALL
  SELECT j.kind, 'retrying', NULL, count(*) FROM j
  WHERE j.state = 'waiting' AND j.attempts > 0 GROUP BY 1
  UNION ALL
  SELECT j.kind, 'cancel_open', NULL, count(*) FROM j
  WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL GROUP BY 1;
  PERFORM __schema__.jobtui_fold_job_counts();
END
$do$;
