-- Issue 15 item 7 and issue 12 item 3: the Overview's per-kind state counts and the arrival and
-- departure rates, exact for every writer of `jobs` (the bundled worker, the article's classic
-- producers and consumers, an operator's SQL), without counting millions of rows per snapshot.
--
-- Counting 250,000 unfinished rows by index-only scan takes 40 ms with a fresh visibility map
-- and 340-400 ms without one (benchmarks/scale.py); autovacuum may be off. Instead, as migration
-- 0015 does for dead letters, every statement that writes `jobs` appends its net change per
-- (kind, state) to `job_counts`, and its arrivals and departures per (minute, kind) to
-- `job_flow`, in its own transaction: a snapshot sums a table of a few hundred rows.
--
-- States: `waiting` (unfinished, unlocked, attempts < max_attempts) by `due`, the UTC minute
-- of run_at, so ready/scheduled can be split at read time (the clock moves without writes);
-- `running` (locked), `exhausted` (unlocked, attempts >= max_attempts), `succeeded` and
-- `cancelled` (finished). `retrying` (waiting with attempts > 0) and `cancel_open` (unfinished
-- with cancelled_at set) count rows again, beside their state.
CREATE TABLE IF NOT EXISTS __schema__.job_counts (
  kind  text        not null,
  state text        not null,
  due   timestamptz,
  n     bigint      not null
);

CREATE TABLE IF NOT EXISTS __schema__.job_flow (
  minute   timestamptz not null,
  kind     text        not null,
  arrived  bigint      not null,
  departed bigint      not null
);
CREATE INDEX IF NOT EXISTS job_flow_minute ON __schema__.job_flow (minute);

-- A row's state. Plain SQL, no SET clause, so the planner inlines it into the trigger's query.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_state(
  attempts int, max_attempts int, locked_at timestamptz, finished_at timestamptz,
  cancelled_at timestamptz
) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN finished_at IS NOT NULL AND cancelled_at IS NOT NULL THEN 'cancelled'
              WHEN finished_at IS NOT NULL THEN 'succeeded'
              WHEN locked_at IS NOT NULL THEN 'running'
              WHEN attempts >= max_attempts THEN 'exhausted'
              ELSE 'waiting' END
$fn$;

-- Merges the delta rows into one per (kind, state, due) and one per (minute, kind); waiting
-- rows already due fold into due = -infinity (time only moves on, so they stay due), and flow
-- older than the longest snapshot window (7 days) goes. One folder at a time (the others skip);
-- it deletes only rows it sees, so rows of transactions still open are left for the next.
-- Run by the worker's housekeeper and, now and then, by the trigger below, so the tables stay
-- small with classic consumers alone.
CREATE OR REPLACE FUNCTION __schema__.jobtui_fold_job_counts() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('jobtui_fold_job_counts'),
                                   '__schema__.job_counts'::regclass::oid::int) THEN
    RETURN;
  END IF;
  WITH gone AS (DELETE FROM __schema__.job_counts c RETURNING c.*)
  INSERT INTO __schema__.job_counts (kind, state, due, n)
  SELECT g.kind, g.state, f.due, sum(g.n)
  FROM gone g
  CROSS JOIN LATERAL (SELECT CASE WHEN g.due < date_trunc('minute', now(), 'UTC')
                                  THEN '-infinity'::timestamptz ELSE g.due END AS due) f
  GROUP BY g.kind, g.state, f.due HAVING sum(g.n) <> 0;
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

-- One firing per statement (transition tables), never per row: the claim and the completion
-- of a batch each add a few small rows. The three branches differ only in their rows: `sign`
-- is -1 for a statement's old rows, +1 for its new ones. Now and then (1 firing in 64, in READ
-- COMMITTED only: a fold under REPEATABLE READ could meet a concurrent fold's deletes and fail
-- the caller's statement) the rows are folded.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text[];
  s text[];
  d timestamptz[];
  n bigint[];
  r bigint[];
  c bigint[];
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.job_counts;
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n),
           array_agg(x.retrying), array_agg(x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, count(*) AS n,
                 count(*) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0) AS retrying,
                 count(*) FILTER (WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL)
                   AS cancel_open
          FROM (SELECT w.*, CASE WHEN w.state = 'waiting'
                                 THEN date_trunc('minute', w.run_at, 'UTC') END AS due
                FROM (SELECT w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
                             __schema__.jobtui_job_state(w.attempts, w.max_attempts,
                               w.locked_at, w.finished_at, w.cancelled_at) AS state
                      FROM new_rows w) w) j
          GROUP BY 1, 2, 3) x;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(-x.n),
           array_agg(-x.retrying), array_agg(-x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, count(*) AS n,
                 count(*) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0) AS retrying,
                 count(*) FILTER (WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL)
                   AS cancel_open
          FROM (SELECT o.*, CASE WHEN o.state = 'waiting'
                                 THEN date_trunc('minute', o.run_at, 'UTC') END AS due
                FROM (SELECT o.kind, o.run_at, o.attempts, o.finished_at, o.cancelled_at,
                             __schema__.jobtui_job_state(o.attempts, o.max_attempts,
                               o.locked_at, o.finished_at, o.cancelled_at) AS state
                      FROM old_rows o) o) j
          GROUP BY 1, 2, 3) x;
  ELSE
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n),
           array_agg(x.retrying), array_agg(x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, sum(j.sign) AS n,
                 coalesce(sum(j.sign) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0), 0)
                   AS retrying,
                 coalesce(sum(j.sign) FILTER (WHERE j.finished_at IS NULL
                                                AND j.cancelled_at IS NOT NULL), 0)
                   AS cancel_open
          FROM (SELECT u.*, CASE WHEN u.state = 'waiting'
                                 THEN date_trunc('minute', u.run_at, 'UTC') END AS due
                FROM (SELECT -1 AS sign, o.kind, o.run_at, o.attempts, o.finished_at,
                             o.cancelled_at,
                             __schema__.jobtui_job_state(o.attempts, o.max_attempts,
                               o.locked_at, o.finished_at, o.cancelled_at) AS state
                      FROM old_rows o
                      UNION ALL
                      SELECT 1, w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
                             __schema__.jobtui_job_state(w.attempts, w.max_attempts,
                               w.locked_at, w.finished_at, w.cancelled_at)
                      FROM new_rows w) u) j
          GROUP BY 1, 2, 3) x
    WHERE x.n <> 0 OR x.retrying <> 0 OR x.cancel_open <> 0;
  END IF;
  -- The changes, grouped by (kind, state, due) with the net number of rows (`n`) and of
  -- retrying and cancel_open rows among them, go to job_counts; the net change of each kind's
  -- unfinished rows goes to job_flow (an INSERT arrives, a finish or a DELETE departs; a claim
  -- or a retry moves a row between unfinished states and changes neither).
  IF k IS NOT NULL THEN
    WITH g AS (
      SELECT * FROM unnest(k, s, d, n, r, c) g(kind, state, due, n, retrying, cancel_open)
    ), counts AS (
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT g.kind, g.state, g.due, g.n FROM g WHERE g.n <> 0
      UNION ALL
      SELECT g.kind, 'retrying', NULL, sum(g.retrying) FROM g
      GROUP BY g.kind HAVING sum(g.retrying) <> 0
      UNION ALL
      SELECT g.kind, 'cancel_open', NULL, sum(g.cancel_open) FROM g
      GROUP BY g.kind HAVING sum(g.cancel_open) <> 0
    )
    INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
    SELECT date_trunc('minute', now(), 'UTC'), g.kind, greatest(sum(g.n), 0),
           greatest(-sum(g.n), 0)
    FROM g
    WHERE g.state IN ('waiting', 'running', 'exhausted')
    GROUP BY g.kind HAVING sum(g.n) <> 0;
  END IF;
  IF random() < 1.0 / 64 AND current_setting('transaction_isolation') = 'read committed' THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

-- Readable by every role that may read the snapshot, without a grant on the tables.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_counts()
RETURNS TABLE (kind text, state text, due timestamptz, n bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, c.state, c.due, sum(c.n)::bigint FROM __schema__.job_counts c
  GROUP BY c.kind, c.state, c.due HAVING sum(c.n) <> 0
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_flow(since timestamptz)
RETURNS TABLE (kind text, arrived bigint, departed bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT f.kind, sum(f.arrived)::bigint, sum(f.departed)::bigint FROM __schema__.job_flow f
  WHERE f.minute >= since GROUP BY f.kind
$fn$;

DROP TRIGGER IF EXISTS jobtui_job_count_ins ON __schema__.jobs;
DROP TRIGGER IF EXISTS jobtui_job_count_del ON __schema__.jobs;
DROP TRIGGER IF EXISTS jobtui_job_count_upd ON __schema__.jobs;
DROP TRIGGER IF EXISTS jobtui_job_count_trunc ON __schema__.jobs;
CREATE TRIGGER jobtui_job_count_ins AFTER INSERT ON __schema__.jobs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();
CREATE TRIGGER jobtui_job_count_del AFTER DELETE ON __schema__.jobs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();
CREATE TRIGGER jobtui_job_count_upd AFTER UPDATE ON __schema__.jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();
CREATE TRIGGER jobtui_job_count_trunc AFTER TRUNCATE ON __schema__.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();

-- The Dead letters tab's groups the same way: rows per (kind, error signature) kept as delta rows
-- by statement triggers on dead_letters (grouping 100,000 dead letters read the whole table,
-- 25-60 ms, benchmarks/scale.py), and each group's first and last death and newest id read by
-- index probes (dead_letters_group_died below, dead_letters_group of 0002).
CREATE TABLE IF NOT EXISTS __schema__.dead_group_counts (
  kind            text   not null,
  error_signature text   not null,
  n               bigint not null
);
CREATE INDEX IF NOT EXISTS dead_letters_group_died
  ON __schema__.dead_letters (kind, error_signature, died_at);

CREATE OR REPLACE FUNCTION __schema__.jobtui_dead_group_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.dead_group_counts;
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT r.kind, r.error_signature, count(*) FROM new_rows r GROUP BY 1, 2;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT r.kind, r.error_signature, -count(*) FROM old_rows r GROUP BY 1, 2;
  ELSE
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT u.kind, u.error_signature, sum(u.n) FROM (
      SELECT r.kind, r.error_signature, 1 AS n FROM new_rows r
      UNION ALL
      SELECT r.kind, r.error_signature, -1 FROM old_rows r
    ) u GROUP BY 1, 2 HAVING sum(u.n) <> 0;
  END IF;
  RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_dead_group_counts()
RETURNS TABLE (kind text, error_signature text, n bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, c.error_signature, sum(c.n)::bigint FROM __schema__.dead_group_counts c
  GROUP BY c.kind, c.error_signature HAVING sum(c.n) <> 0
$fn$;

DROP TRIGGER IF EXISTS jobtui_dead_group_ins ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_group_del ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_group_upd ON __schema__.dead_letters;
DROP TRIGGER IF EXISTS jobtui_dead_group_trunc ON __schema__.dead_letters;
CREATE TRIGGER jobtui_dead_group_ins AFTER INSERT ON __schema__.dead_letters
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_del AFTER DELETE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_upd AFTER UPDATE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_trunc AFTER TRUNCATE ON __schema__.dead_letters
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();

DELETE FROM __schema__.dead_group_counts;
INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
SELECT d.kind, d.error_signature, count(*) FROM __schema__.dead_letters d GROUP BY 1, 2;

-- The triggers hold jobs' lock from here to commit, so no row is missed or counted twice
-- between this count and the first trigger firing. Flow starts empty: rates need history.
DELETE FROM __schema__.job_counts;
WITH j AS (
  SELECT j.kind, j.run_at, j.attempts, j.finished_at, j.cancelled_at,
         __schema__.jobtui_job_state(j.attempts, j.max_attempts, j.locked_at, j.finished_at,
                                     j.cancelled_at) AS state
  FROM __schema__.jobs j
)
INSERT INTO __schema__.job_counts (kind, state, due, n)
SELECT j.kind, j.state, CASE WHEN j.state = 'waiting'
                             THEN date_trunc('minute', j.run_at, 'UTC') END, count(*)
FROM j GROUP BY 1, 2, 3
UNION ALL
SELECT j.kind, 'retrying', NULL, count(*) FROM j
WHERE j.state = 'waiting' AND j.attempts > 0 GROUP BY 1
UNION ALL
SELECT j.kind, 'cancel_open', NULL, count(*) FROM j
WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL GROUP BY 1;
SELECT __schema__.jobtui_fold_job_counts();
