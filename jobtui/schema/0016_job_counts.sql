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

-- A row's states. Plain SQL, no SET clause, so the planner inlines it into the trigger's query.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_states(
  run_at timestamptz, attempts int, max_attempts int, locked_at timestamptz,
  finished_at timestamptz, cancelled_at timestamptz
) RETURNS TABLE (state text, due timestamptz)
LANGUAGE sql STABLE AS $fn$
  SELECT v.state, v.due FROM (VALUES
    (CASE WHEN finished_at IS NOT NULL AND cancelled_at IS NOT NULL THEN 'cancelled'
          WHEN finished_at IS NOT NULL THEN 'succeeded'
          WHEN locked_at IS NOT NULL THEN 'running'
          WHEN attempts >= max_attempts THEN 'exhausted'
          ELSE 'waiting' END,
     CASE WHEN finished_at IS NULL AND locked_at IS NULL AND attempts < max_attempts
          THEN date_trunc('minute', run_at, 'UTC') END),
    (CASE WHEN finished_at IS NULL AND locked_at IS NULL AND attempts > 0
               AND attempts < max_attempts THEN 'retrying' END, NULL::timestamptz),
    (CASE WHEN finished_at IS NULL AND cancelled_at IS NOT NULL THEN 'cancel_open' END, NULL)
  ) v(state, due)
  WHERE v.state IS NOT NULL
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
                                   hashtext('__schema__')) THEN
    RETURN;
  END IF;
  WITH gone AS (DELETE FROM __schema__.job_counts c RETURNING c.*)
  INSERT INTO __schema__.job_counts (kind, state, due, n)
  SELECT g.kind, g.state, f.due, sum(g.n)
  FROM gone g
  CROSS JOIN LATERAL (SELECT CASE WHEN g.due < date_trunc('minute', now(), 'UTC')
                                  THEN '-infinity'::timestamptz ELSE g.due END AS due) f
  GROUP BY g.kind, g.state, f.due HAVING sum(g.n) <> 0;
  WITH gone AS (DELETE FROM __schema__.job_flow f RETURNING f.*)
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT g.minute, g.kind, sum(g.arrived), sum(g.departed)
  FROM gone g
  WHERE g.minute >= date_trunc('minute', now(), 'UTC') - interval '7 days 1 minute'
  GROUP BY g.minute, g.kind;
END
$fn$;

-- Applies one statement's delta rows (kind, state, due, n): to job_counts as they are, and the
-- net change of each kind's unfinished rows to job_flow (an INSERT arrives, a finish or a DELETE
-- departs; a claim or a retry moves a row between unfinished states and changes neither).
CREATE OR REPLACE FUNCTION __schema__.jobtui_apply_job_deltas(
  kinds text[], states text[], dues timestamptz[], ns bigint[]
) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
  INSERT INTO __schema__.job_counts (kind, state, due, n)
  SELECT * FROM unnest(kinds, states, dues, ns);
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), d.kind, greatest(sum(d.n), 0), greatest(-sum(d.n), 0)
  FROM unnest(kinds, states, ns) d(kind, state, n)
  WHERE d.state IN ('waiting', 'running', 'exhausted')
  GROUP BY d.kind HAVING sum(d.n) <> 0;
$fn$;

-- One firing per statement (transition tables), never per row: the claim and the completion
-- of a batch each add a few small rows. `sign` is -1 for a statement's old rows, +1 for its
-- new ones. Now and then (1 firing in 64, in READ COMMITTED only: a fold under REPEATABLE READ
-- could meet a concurrent fold's deletes and fail the caller's statement) the rows are folded.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text[];
  s text[];
  d timestamptz[];
  n bigint[];
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.job_counts;
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n)
    INTO k, s, d, n
    FROM (SELECT r.kind, st.state, st.due, count(*) AS n
          FROM new_rows r
          CROSS JOIN LATERAL __schema__.jobtui_job_states(
            r.run_at, r.attempts, r.max_attempts, r.locked_at, r.finished_at, r.cancelled_at) st
          GROUP BY 1, 2, 3) x;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n)
    INTO k, s, d, n
    FROM (SELECT r.kind, st.state, st.due, -count(*) AS n
          FROM old_rows r
          CROSS JOIN LATERAL __schema__.jobtui_job_states(
            r.run_at, r.attempts, r.max_attempts, r.locked_at, r.finished_at, r.cancelled_at) st
          GROUP BY 1, 2, 3) x;
  ELSE
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n)
    INTO k, s, d, n
    FROM (SELECT r.kind, st.state, st.due, sum(r.sign) AS n
          FROM (SELECT -1 AS sign, o.kind, o.run_at, o.attempts, o.max_attempts, o.locked_at,
                       o.finished_at, o.cancelled_at FROM old_rows o
                UNION ALL
                SELECT 1, w.kind, w.run_at, w.attempts, w.max_attempts, w.locked_at,
                       w.finished_at, w.cancelled_at FROM new_rows w) r
          CROSS JOIN LATERAL __schema__.jobtui_job_states(
            r.run_at, r.attempts, r.max_attempts, r.locked_at, r.finished_at, r.cancelled_at) st
          GROUP BY 1, 2, 3 HAVING sum(r.sign) <> 0) x;
  END IF;
  IF k IS NOT NULL THEN
    PERFORM __schema__.jobtui_apply_job_deltas(k, s, d, n);
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

-- The triggers hold jobs' lock from here to commit, so no row is missed or counted twice
-- between this count and the first trigger firing. Flow starts empty: rates need history.
DELETE FROM __schema__.job_counts;
INSERT INTO __schema__.job_counts (kind, state, due, n)
SELECT j.kind, st.state, st.due, count(*)
FROM __schema__.jobs j
CROSS JOIN LATERAL __schema__.jobtui_job_states(
  j.run_at, j.attempts, j.max_attempts, j.locked_at, j.finished_at, j.cancelled_at) st
GROUP BY 1, 2, 3;
SELECT __schema__.jobtui_fold_job_counts();
