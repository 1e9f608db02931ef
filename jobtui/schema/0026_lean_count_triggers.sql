-- Issue 24, "a lean hot path": the count triggers' one-row statements take a short path.
--
-- A job's own writes are one-row statements: a producer's INSERT, a consumer's claim, its
-- completion. For each, 0025's trigger functions ran one statement that grouped the transition
-- table by (kind, state, due) in a CTE, inserted the groups and their retrying and cancel_open
-- rows into job_counts from a UNION ALL, and each kind's net change of unfinished rows into
-- job_flow from a second GROUP BY, whether there was a change or not (a claim has none). Timed
-- in-server on a one-row INSERT (a procedure of 1,000 INSERT + COMMIT, the trigger function's
-- body replaced, 2-core machine shared with other jobs, so each figure +-5 us): no trigger
-- ~20 us, an empty trigger function ~23, 0025's ~57; of the ~34 us of the body, about 4 read the
-- row from the transition table, 4 the job_counts INSERT, 7 the job_flow INSERT (a heap row and
-- an index entry), 2 the fold check, and the rest the grouping statement's planning-free but
-- heavy executor (CTE scans, three hash aggregations, two ModifyTable nodes).
--
-- Now one small statement reads the first row of the transition table(s) with its state and
-- due minute, and how many rows there are (at most 2 read); with exactly one row the function
-- writes only what changed, with plain INSERT ... VALUES: the count row (an UPDATE: the old
-- key's -1 and the new key's +1, nothing when the key is the same, as for a retry's attempts
-- within the minute), the retrying and cancel_open rows only when the row has or had one, and a
-- job_flow row only when the kind's unfinished rows changed (an INSERT arrives, a finish
-- departs; a claim or a retry writes none). Several rows take 0025's grouped statement; none
-- writes nothing. The counts and flow are the same as 0025's for every statement (one delta
-- row per changed key; the fold merges them), and so is the fold rule (jobtui_trigger_folds_now:
-- READ COMMITTED only, not where jobtui.fold_in_trigger is off, more than 1,000 rows at once,
-- else 1 in 64 once job_counts is large). DELETE and TRUNCATE keep 0024's function.

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  r record;
  added bigint := 0;
BEGIN
  SELECT c.rows, w.kind, w.state,
         CASE WHEN w.state = 'waiting' THEN date_trunc('minute', w.run_at, 'UTC') END AS due,
         w.state = 'waiting' AND w.attempts > 0 AS retrying,
         w.finished_at IS NULL AND w.cancelled_at IS NOT NULL AS cancel_open
  INTO r
  FROM (SELECT count(*) AS rows FROM (SELECT FROM new_rows LIMIT 2) x) c
  LEFT JOIN LATERAL (
    SELECT w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
           __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                       w.finished_at, w.cancelled_at) AS state
    FROM new_rows w LIMIT 1) w ON true;
  IF r.rows = 1 THEN
    INSERT INTO __schema__.job_counts (kind, state, due, n) VALUES (r.kind, r.state, r.due, 1);
    added := 1;
    IF r.retrying OR r.cancel_open THEN
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT r.kind, v.state, NULL, 1
      FROM (VALUES ('retrying', r.retrying), ('cancel_open', r.cancel_open)) v(state, yes)
      WHERE v.yes;
      added := 2;
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

CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  r record;
  added bigint := 0;
BEGIN
  SELECT c.rows, o.kind AS ok, o.state AS os, o.due AS od, o.retrying AS oretry,
         o.cancel_open AS ocancel, o.unfinished AS ounf,
         w.kind AS nk, w.state AS ns, w.due AS nd, w.retrying AS nretry,
         w.cancel_open AS ncancel, w.unfinished AS nunf
  INTO r
  FROM (SELECT count(*) AS rows FROM (SELECT FROM new_rows LIMIT 2) x) c
  LEFT JOIN LATERAL (
    SELECT s.kind, s.state,
           CASE WHEN s.state = 'waiting' THEN date_trunc('minute', s.run_at, 'UTC') END AS due,
           (s.state = 'waiting' AND s.attempts > 0)::int AS retrying,
           (s.finished_at IS NULL AND s.cancelled_at IS NOT NULL)::int AS cancel_open,
           (s.finished_at IS NULL)::int AS unfinished
    FROM (SELECT o.kind, o.run_at, o.attempts, o.finished_at, o.cancelled_at,
                 __schema__.jobtui_job_state(o.attempts, o.max_attempts, o.locked_at,
                                             o.finished_at, o.cancelled_at) AS state
          FROM old_rows o LIMIT 1) s) o ON true
  LEFT JOIN LATERAL (
    SELECT s.kind, s.state,
           CASE WHEN s.state = 'waiting' THEN date_trunc('minute', s.run_at, 'UTC') END AS due,
           (s.state = 'waiting' AND s.attempts > 0)::int AS retrying,
           (s.finished_at IS NULL AND s.cancelled_at IS NOT NULL)::int AS cancel_open,
           (s.finished_at IS NULL)::int AS unfinished
    FROM (SELECT w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
                 __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                             w.finished_at, w.cancelled_at) AS state
          FROM new_rows w LIMIT 1) s) w ON true;
  IF r.rows = 1 THEN
    IF r.ok <> r.nk OR r.os <> r.ns OR r.od IS DISTINCT FROM r.nd THEN
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      VALUES (r.ok, r.os, r.od, -1), (r.nk, r.ns, r.nd, 1);
      added := 2;
    END IF;
    IF r.oretry + r.ocancel + r.nretry + r.ncancel > 0 THEN
      -- The retrying and cancel_open rows, net per kind (the old row's kind loses them, the
      -- new row's gains them; one kind: the difference).
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT v.kind, v.state, NULL, sum(v.n)
      FROM (VALUES (r.ok, 'retrying', -r.oretry), (r.nk, 'retrying', r.nretry),
                   (r.ok, 'cancel_open', -r.ocancel), (r.nk, 'cancel_open', r.ncancel))
           v(kind, state, n)
      GROUP BY v.kind, v.state HAVING sum(v.n) <> 0;
      added := added + 2;
    END IF;
    IF r.ok <> r.nk AND r.ounf + r.nunf > 0 OR r.ounf <> r.nunf THEN
      -- Flow: each kind's net change of unfinished rows.
      INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
      SELECT date_trunc('minute', now(), 'UTC'), v.kind, greatest(sum(v.n), 0),
             greatest(-sum(v.n), 0)
      FROM (VALUES (r.ok, -r.ounf), (r.nk, r.nunf)) v(kind, n)
      GROUP BY v.kind HAVING sum(v.n) <> 0;
    END IF;
  ELSIF r.rows > 1 THEN
    -- Many rows: 0025's statement, grouped.
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
  END IF;
  IF __schema__.jobtui_trigger_folds_now(added) THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

-- jobtui_claim_limited without the re-check in its UPDATE, as worker_claim lost its own
-- (jobtui/sql/worker.sql): the UPDATE takes only the ids `pick` returned, and `pick` locked each
-- with FOR UPDATE SKIP LOCKED, which under READ COMMITTED locks the newest version of the row
-- and re-checks the sub-select's conditions on it (a row whose cancel request, claim or
-- completion committed after the statement's snapshot is skipped); nobody can change a row this
-- statement holds locked, and the attempt limits (`am`) are the same value in both places. So
-- a row with a cancel request is still never claimed, a limit is still never exceeded
-- (`room` counts what runs; `pick` takes at most room.n a kind). Under REPEATABLE READ a
-- concurrently changed row fails the lock with a serialization error instead, as before.
CREATE OR REPLACE FUNCTION __schema__.jobtui_claim_limited(
  p_kinds text[], p_worker text, p_want int, p_full_poll_s float8
) RETURNS TABLE (id bigint, kind text, attempts int, max_attempts int, wait_s float8)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  held text[];
BEGIN
  SELECT coalesce(array_agg(s.kind), '{}') INTO held FROM (
    SELECT l.kind
    FROM __schema__.kind_limits l
    WHERE l.kind = ANY(p_kinds) AND l.limited
      AND NOT EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = l.kind)
    ORDER BY l.kind
    FOR UPDATE OF l SKIP LOCKED) s;
  RETURN QUERY
  SELECT NULL::bigint, k.k, NULL::int, NULL::int, NULL::float8
  FROM unnest(p_kinds) AS k(k) WHERE k.k <> ALL(held);
  IF cardinality(held) = 0 OR p_want < 1 THEN
    RETURN;
  END IF;
  RETURN QUERY
  WITH am AS MATERIALIZED (
    SELECT __schema__.jobtui_attempt_limits() AS m
  ), lim AS MATERIALIZED (
    SELECT l.kind, l.concurrency, l.per_worker, l.rate, l.period_s,
           CASE WHEN l.rate IS NULL THEN NULL ELSE
             least(l.rate::float8, l.tokens + l.rate::float8 / l.period_s
                   * greatest(0, extract(epoch FROM statement_timestamp() - l.tokens_at)))
           END AS tokens
    FROM __schema__.kind_limits l
    WHERE l.kind = ANY(held)
  ), running AS MATERIALIZED (
    SELECT r.kind, count(*) AS n, count(*) FILTER (WHERE r.locked_by = p_worker) AS mine
    FROM __schema__.jobs r
    WHERE r.finished_at IS NULL AND r.locked_at IS NOT NULL
    GROUP BY r.kind
  ), room AS MATERIALIZED (
    SELECT lim.kind, lim.rate, lim.period_s, lim.tokens,
           greatest(0, least(
             p_want,
             lim.concurrency - coalesce(run.n, 0),
             lim.per_worker - coalesce(run.mine, 0),
             floor(lim.tokens)::int)) AS n
    FROM lim LEFT JOIN running run ON run.kind = lim.kind
  ), pick AS MATERIALIZED (
    SELECT c.id FROM room
    CROSS JOIN LATERAL (
      SELECT x.id, x.priority, x.run_at
      FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts)
        AND NOT x.cancel_requested
      ORDER BY x.kind, x.run_at
      LIMIT room.n
      FOR UPDATE OF x SKIP LOCKED) c
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT p_want
  ), claimed AS (
    UPDATE __schema__.jobs j
    SET locked_at = now(), locked_by = p_worker, attempts = j.attempts + 1,
        max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
    WHERE j.id IN (SELECT pick.id FROM pick)
    RETURNING j.id, j.kind, j.attempts, j.max_attempts
  ), taken AS (
    SELECT room.kind, room.rate, room.period_s,
           room.tokens - (SELECT count(*) FROM claimed c WHERE c.kind = room.kind) AS left_
    FROM room WHERE room.rate IS NOT NULL
  ), spent AS (
    UPDATE __schema__.kind_limits l
    SET tokens = t.left_, tokens_at = statement_timestamp()
    FROM taken t WHERE l.kind = t.kind
  )
  SELECT c.id, c.kind, c.attempts, c.max_attempts, NULL::float8 FROM claimed c
  UNION ALL
  SELECT NULL, t.kind, NULL, NULL, ((1 - t.left_) * t.period_s / t.rate)::float8
  FROM taken t WHERE t.left_ < 1
  UNION ALL
  -- A kind with no room for want of a free slot under its concurrency (or per-worker) limit
  -- while jobs of it are ready: room comes back when another worker's job of it finishes,
  -- which sends no NOTIFY. The caller looks again after p_full_poll_s seconds.
  SELECT NULL, room.kind, NULL, NULL, p_full_poll_s
  FROM room
  WHERE room.n = 0 AND (room.tokens IS NULL OR room.tokens >= 1)
    AND EXISTS (
      SELECT 1 FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts));
END
$fn$;
