-- Issue 14 (engine targets): less work for the server per job claimed and per job enqueued.
--
-- 1. jobs_pending (the article's index, run_at of unfinished rows) now holds unlocked rows
--    only. A claim sets locked_at, which is in the predicate of most partial indexes, so no
--    claim is a HOT update and every claim wrote a new entry into jobs_pending: one of seven
--    index entries per claim, ~90 bytes of WAL per job (benchmarks/server_cost.py). Every
--    statement that reads it also asks for `locked_at IS NULL`: the article's claim (`where
--    finished_at is null and locked_at is null and run_at <= now() order by run_at`), which now
--    also stops stepping over locked rows, and the console's oldest ready job
--    (browse_oldest_ready_job). Counts of unfinished rows read jobs_pending_kind and
--    jobs_pending_id, which keep every unfinished row. Rebuilding it holds an ACCESS
--    EXCLUSIVE lock on `jobs` (DROP INDEX: reads wait as well as writes) until migrate
--    commits, one scan of the table later (0.2-0.3 s at 500k unfinished rows on a 2-core
--    machine; migrate's ANALYZE runs after the commit).
DROP INDEX IF EXISTS __schema__.jobs_pending;
CREATE INDEX jobs_pending ON __schema__.jobs (run_at)
  WHERE finished_at IS NULL AND locked_at IS NULL;

-- 2. Migration 0016's counting triggers, cheaper for the statements that matter: a one-row
--    INSERT (a producer), a claim's batch (waiting -> running) and a completion's batch
--    (running -> succeeded). Each op has its own function with one statement (0016 ran two
--    per firing, through arrays, and grouped the retrying and cancel_open rows once more),
--    and the counts stay exact for every writer: the rows written are the same deltas, the
--    retrying and cancel_open ones split by (kind, state, due) rather than summed per kind
--    (jobtui_job_counts() and the fold sum them).
--    The fold (1 firing in 64) is skipped on connections that say `jobtui.fold_in_trigger =
--    off`: the bundled worker's own (jobtui/worker/link.py), whose housekeeper folds every
--    heartbeat interval (at least every 5 s), so no claim or completion waits for a fold (a
--    pickup p99 suspect).
--    Every other writer (the article's producers and consumers, an operator's SQL, a worker
--    behind a transaction pooler, which sets nothing) still folds, so the tables stay small
--    with classic consumers alone.
-- Whether this firing folds: 1 in 64, in READ COMMITTED only (as in 0016: a fold under
-- REPEATABLE READ could meet a concurrent fold's deletes and fail the caller's statement), and
-- not on a connection that said `jobtui.fold_in_trigger = off`.
CREATE OR REPLACE FUNCTION __schema__.jobtui_trigger_folds_now() RETURNS boolean
LANGUAGE sql VOLATILE AS $fn$
  SELECT random() < 1.0 / 64
     AND current_setting('transaction_isolation') = 'read committed'
     AND current_setting('jobtui.fold_in_trigger', true) IS DISTINCT FROM 'off'
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
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
  )
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), g.kind, sum(g.n), 0
  FROM g
  WHERE g.state IN ('waiting', 'running', 'exhausted')
  GROUP BY g.kind;
  IF __schema__.jobtui_trigger_folds_now() THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
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
  )
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), g.kind, greatest(sum(g.n), 0),
         greatest(-sum(g.n), 0)
  FROM g
  WHERE g.state IN ('waiting', 'running', 'exhausted')
  GROUP BY g.kind HAVING sum(g.n) <> 0;
  IF __schema__.jobtui_trigger_folds_now() THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

-- DELETE and TRUNCATE keep 0016's jobtui_job_count(). The triggers are replaced inside the
-- migrator's one transaction, which holds jobs' lock to commit: no statement fires neither.
DROP TRIGGER IF EXISTS jobtui_job_count_ins ON __schema__.jobs;
DROP TRIGGER IF EXISTS jobtui_job_count_upd ON __schema__.jobs;
CREATE TRIGGER jobtui_job_count_ins AFTER INSERT ON __schema__.jobs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count_added();
CREATE TRIGGER jobtui_job_count_upd AFTER UPDATE ON __schema__.jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count_changed();
