-- Issue 24, "a lean hot path": the waiting phase carries only the indexes the claim needs.
--
-- Every waiting row (finished_at IS NULL AND locked_at IS NULL) entered seven indexes at its
-- INSERT. Two of them served nobody's claim: jobs_waiting_id (id) and jobs_waiting_kind_id
-- (kind, id) held the waiting rows in id order for the console's keyset pages. The console now
-- reads waiting rows in claim order (priority DESC, run_at, id: what runs next comes first,
-- jobtui/sql/browse.sql browse_jobs_page), through jobs_claim for all kinds and jobs_claim_kind
-- for one, which the claim keeps anyway; so a waiting row enters five indexes: jobs_pkey,
-- jobs_claim, jobs_claim_kind (the claims), jobs_pending (the article's claim, the oldest ready
-- row) and jobs_pending_kind (per-kind oldest ready row, counts, the limited kinds' claim).
--
-- Not folded: jobs_claim_kind (kind, priority DESC, run_at, id) and jobs_pending_kind (kind,
-- run_at) INCLUDE (attempts, max_attempts) into one index. The readers of jobs_pending_kind want
-- a kind's rows in run_at order (the per-kind oldest ready row, one probe each; the limited
-- kinds' claim): in claim order they would read a kind's whole range.
--
-- DROP INDEX takes ACCESS EXCLUSIVE on jobs for a moment; `jobtui migrate` bounds the wait
-- (LockWait) and tries again after a back-off.
DROP INDEX __schema__.jobs_waiting_id;
DROP INDEX __schema__.jobs_waiting_kind_id;

-- A statement that adds more than 1,000 count rows folds them at once. One INSERT of 200,000
-- reminders spread over 30 days adds a row per kind and due minute (about 200,000 rows); left
-- to the 1-in-64 chance of a later writer (and with no worker, whose housekeeper folds, there
-- may be none for hours), every snapshot summed them: 300 ms each, every 2 s, instead of 10.
-- The fold's cost then goes to the statement that made the rows, once. The rest of the rule
-- is the baseline's (jobtui_trigger_folds_now() there): READ COMMITTED only, never on a
-- connection that turned it off, else 1 in 64 once job_counts is large.
CREATE FUNCTION __schema__.jobtui_trigger_folds_now(added bigint) RETURNS boolean
LANGUAGE sql VOLATILE AS $fn$
  SELECT (added > 1000
          OR random() < 1.0 / 64
             AND (pg_stat_get_live_tuples('__schema__.job_counts'::regclass) > 10000
                  OR current_setting('track_counts') = 'off'))
     AND current_setting('transaction_isolation') = 'read committed'
     AND current_setting('jobtui.fold_in_trigger', true) IS DISTINCT FROM 'off'
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  added bigint;
BEGIN
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
  IF __schema__.jobtui_trigger_folds_now(added) THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  added bigint;
BEGIN
  WITH g AS (
    SELECT s.kind, s.state, s.due, sum(s.sign) AS n,
           coalesce(sum(s.sign) FILTER (WHERE s.state = 'waiting' AND s.attempts > 0), 0)
             AS retrying,
           coalesce(sum(s.sign) FILTER (WHERE s.finished_at IS NULL
                                          AND s.cancelled_at IS NOT NULL), 0) AS cancel_open
    FROM (SELECT -1 AS sign, o.kind, o.attempts, o.finished_at, o.cancelled_at,
                 __schema__.jobtui_job_state(o.attempts, o.max_attempts, o.locked_at,
                                             o.finished_at, o.cancelled_at) AS state,
                 CASE WHEN o.finished_at IS NULL AND o.locked_at IS NULL
                           AND o.attempts < o.max_attempts
                      THEN date_trunc('minute', o.run_at, 'UTC') END AS due
          FROM old_rows o
          UNION ALL
          SELECT 1, w.kind, w.attempts, w.finished_at, w.cancelled_at,
                 __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                             w.finished_at, w.cancelled_at),
                 CASE WHEN w.finished_at IS NULL AND w.locked_at IS NULL
                           AND w.attempts < w.max_attempts
                      THEN date_trunc('minute', w.run_at, 'UTC') END
          FROM new_rows w) s
    GROUP BY 1, 2, 3
  ), counts AS (
    INSERT INTO __schema__.job_counts (kind, state, due, n)
    SELECT g.kind, g.state, g.due, g.n FROM g WHERE g.n <> 0
    UNION ALL
    SELECT g.kind, 'retrying', NULL, g.retrying FROM g WHERE g.retrying <> 0
    UNION ALL
    SELECT g.kind, 'cancel_open', NULL, g.cancel_open FROM g WHERE g.cancel_open <> 0
    RETURNING 1
  ), flow AS (
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), g.kind, greatest(sum(g.n), 0),
         greatest(-sum(g.n), 0)
  FROM g
  WHERE g.state IN ('waiting', 'running', 'exhausted')
  GROUP BY g.kind HAVING sum(g.n) <> 0
  )
  SELECT count(*) INTO added FROM counts;
  IF __schema__.jobtui_trigger_folds_now(added) THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

DROP FUNCTION __schema__.jobtui_trigger_folds_now();

-- jobtui_attempt_limits() in plpgsql, same body and result: a SQL function that cannot be
-- inlined (this one aggregates) is parsed and planned again at every call, which cost each
-- claim (worker_claim calls it once) about 50 µs of its ~220, timed inside the server on a
-- table of 20,000 rows (the claim's plan by index); plpgsql keeps its plan for the session.
CREATE OR REPLACE FUNCTION __schema__.jobtui_attempt_limits() RETURNS jsonb
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
  RETURN (SELECT coalesce(jsonb_object_agg(h.kind, h.max_attempts), '{}'::jsonb)
          FROM __schema__.kind_handlers h
          WHERE h.max_attempts IS NOT NULL);
END
$fn$;
