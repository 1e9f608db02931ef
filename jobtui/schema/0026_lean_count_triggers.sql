-- Issue 24, "a lean hot path": the INSERT trigger's one-row statements take a short path.
--
-- A producer's INSERT is a one-row statement. For it, 0025's jobtui_job_count_added ran one
-- statement that grouped the transition table by (kind, state, due) in a CTE, inserted the
-- groups and their retrying and cancel_open rows into job_counts from a UNION ALL, and each
-- kind's arrivals into job_flow from a second GROUP BY. Timed in-server (a procedure of 1,000
-- one-row INSERT + COMMIT, the trigger function's body replaced in a scratch database; a 2-core
-- machine shared with other jobs, so each figure +-5 us): trigger disabled ~20 us, an empty
-- trigger function (SECURITY DEFINER, SET search_path) ~23, 0025's ~57. Of the ~34 us of the
-- body, reading the row from the transition table took about 4, the job_counts INSERT 4, the
-- job_flow INSERT 7 (a heap row and an index entry), the fold check 2, and the rest went to
-- the grouping statement's executor (CTE scans, hash aggregations, UNION ALL, RETURNING).
--
-- Now one small statement reads the first row of new_rows with its state and due minute, and
-- how many rows there are (at most 2 read); with exactly one row the function writes it with
-- plain INSERT ... VALUES: its count row, its retrying and cancel_open rows only when it has
-- one, and its arrival in job_flow only when it is unfinished. Several rows take 0025's grouped
-- statement, none writes nothing. The rows written are exactly 0025's (same keys, same n), and
-- the fold rule is 0025's (jobtui_trigger_folds_now: READ COMMITTED only, not where
-- jobtui.fold_in_trigger is off, more than 1,000 count rows at once, else 1 in 64 once
-- job_counts is large). Measured: ~57 -> ~44 us a one-row INSERT (benchmarks.write_cost
-- --in-server: insert + notify 75 -> 63 us, the same without triggers 27-28).
--
-- The same short path for one-row UPDATEs (a claim, a completion; the old key's -1 and the new
-- key's +1, job_flow only when the kind's unfinished rows change) was measured and not kept:
-- in one statement or three, ~35 us over an empty trigger function like 0025's grouped one
-- (claim 142 vs 145 us, completion 141 vs 136, same harness), so jobtui_job_count_changed
-- stays 0025's. DELETE and TRUNCATE keep 0024's counting, now folding by the same rule (below).

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

-- jobtui_claim_limited without the re-check in its UPDATE, as worker_claim lost its own
-- (jobtui/sql/worker.sql): the UPDATE takes only the ids `pick` returned, and `pick` locked each
-- with FOR UPDATE SKIP LOCKED, which under READ COMMITTED locks the newest version of the row
-- and re-checks the sub-select's conditions on it (a row whose cancel request, claim or
-- completion committed after the statement's snapshot is skipped); nobody can change a row this
-- statement holds locked, and the attempt limits (`am`) are the same value in both places. So
-- a row with a cancel request is still never claimed, a limit is still never exceeded
-- (`room` counts what runs; `pick` takes at most room.n a kind). Under REPEATABLE READ a
-- concurrently changed row fails the lock with a serialization error instead, as before.
-- Its cost did not move measurably (a one-job claim of a limited kind with 2,500 waiting rows,
-- in-server: ~930-1,000 us a call either way; its UPDATE finds the picked rows by id, so the
-- re-check ran on those rows only): this is for one rule in both claims, not for speed.
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

-- The DELETE trigger's function (TRUNCATE's too) folded by 0024's own rule, 1 statement in
-- 64 in READ COMMITTED: also on a connection that said `jobtui.fold_in_trigger = off` (the
-- bundled worker's, whose dead-letter moves and prunes are DELETEs) and at any size of
-- job_counts. It now folds by the rule the INSERT and UPDATE triggers follow
-- (jobtui_trigger_folds_now: READ COMMITTED only, never where jobtui.fold_in_trigger is off,
-- at once for more than 1,000 count rows, else 1 in 64 once job_counts is large), and keeps
-- only the branches its triggers fire: a DELETE departs (its count rows are 0024's, and each
-- kind's unfinished rows gone are departures in job_flow); a TRUNCATE empties the counts and
-- writes no departures.
CREATE OR REPLACE FUNCTION __schema__.jobtui_job_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  added bigint;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.job_counts;
    RETURN NULL;
  ELSIF TG_OP <> 'DELETE' THEN
    RAISE EXCEPTION 'jobtui_job_count() counts DELETE and TRUNCATE only, not %', TG_OP;
  END IF;
  WITH g AS (
    SELECT s.kind, s.state, s.due, -count(*) AS n,
           -count(*) FILTER (WHERE s.state = 'waiting' AND s.attempts > 0) AS retrying,
           -count(*) FILTER (WHERE s.finished_at IS NULL AND s.cancelled_at IS NOT NULL)
             AS cancel_open
    FROM (SELECT o.kind, o.attempts, o.finished_at, o.cancelled_at,
                 __schema__.jobtui_job_state(o.attempts, o.max_attempts, o.locked_at,
                                             o.finished_at, o.cancelled_at) AS state,
                 CASE WHEN o.finished_at IS NULL AND o.locked_at IS NULL
                           AND o.attempts < o.max_attempts
                      THEN date_trunc('minute', o.run_at, 'UTC') END AS due
          FROM old_rows o) s
    GROUP BY 1, 2, 3
  ), counts AS (
    INSERT INTO __schema__.job_counts (kind, state, due, n)
    SELECT g.kind, g.state, g.due, g.n FROM g
    UNION ALL
    SELECT g.kind, 'retrying', NULL, sum(g.retrying) FROM g
    GROUP BY g.kind HAVING sum(g.retrying) <> 0
    UNION ALL
    SELECT g.kind, 'cancel_open', NULL, sum(g.cancel_open) FROM g
    GROUP BY g.kind HAVING sum(g.cancel_open) <> 0
    RETURNING 1
  ), flow AS (
    INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
    SELECT date_trunc('minute', now(), 'UTC'), g.kind, 0, -sum(g.n)
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

-- dead_letter_counts' own compaction (1 write in 20 merges each kind's rows into one) ran at
-- any isolation level: under REPEATABLE READ or SERIALIZABLE its DELETE met the rows another
-- writer's compaction had deleted since the snapshot and failed the caller's INSERT, UPDATE or
-- DELETE of dead letters ("could not serialize access due to concurrent delete"), the reason
-- job_counts' fold runs in READ COMMITTED only. Now the same: READ COMMITTED only (where a
-- concurrent compaction's rows are skipped, not an error). Otherwise 0024's function.
CREATE OR REPLACE FUNCTION __schema__.jobtui_dead_letter_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.dead_letter_counts;
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, count(*) FROM new_rows r GROUP BY r.kind;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, -count(*) FROM old_rows r GROUP BY r.kind;
  ELSE  -- UPDATE: only a changed kind moves a count
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT u.kind, sum(u.n) FROM (
      SELECT r.kind, 1 AS n FROM new_rows r
      UNION ALL
      SELECT r.kind, -1 FROM old_rows r
    ) u GROUP BY u.kind HAVING sum(u.n) <> 0;
  END IF;
  IF random() < 0.05 AND current_setting('transaction_isolation') = 'read committed' THEN
    FOR k IN SELECT DISTINCT c.kind FROM __schema__.dead_letter_counts c ORDER BY 1 LOOP
      WITH gone AS (
        DELETE FROM __schema__.dead_letter_counts c WHERE c.kind = k RETURNING c.n
      )
      INSERT INTO __schema__.dead_letter_counts (kind, n)
      SELECT k, sum(g.n) FROM gone g HAVING sum(g.n) <> 0;
    END LOOP;
  END IF;
  RETURN NULL;
END
$fn$;
