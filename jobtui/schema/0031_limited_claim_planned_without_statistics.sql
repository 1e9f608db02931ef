-- The limited claim (0030's jobtui_claim_limited) read every ready row of the table, twice,
-- on a table never analysed: 200,000 ready jobs of another kind just loaded (before
-- autovacuum's first ANALYZE, or with it off) made a merged claim take 78-143 ms, a claim of
-- 200,000 ready jobs of the limited kind alone 124-200 ms, against 0.5-0.9 ms once analysed.
-- Without statistics `IS NULL` keeps 0.5% of the rows, so each per-kind walk (pick, peek)
-- is estimated at one row and any index is as good as another; the generic plan took
-- jobs_pending (run_at), read the whole backlog of every kind in run_at order filtering on
-- kind, and sorted what was left. The check of a kind with no room (the p_full_poll_s row)
-- did the same through an EXISTS turned into a semi join: 200,000 rows read per claim of a
-- kind at its concurrency limit.
--
-- Now, while jobs has no statistics (pg_stats has no row for its locked_at: never analysed,
-- or analysed empty), the function's query is planned with enable_sort and
-- enable_incremental_sort off (set local to the function, which its SET clauses restore):
-- a walk an index gives in order then costs less than any walk followed by a Sort whatever
-- the estimates, so the pick and the peek walk jobs_claim_kind (kind, priority DESC, run_at,
-- id) from the kind's head and stop after LIMIT rows. With statistics the same query is
-- planned as before, free to choose: a kind whose index line starts with many jobs of a
-- higher priority not due yet (scheduled ones) is better read through jobs_pending and
-- sorted, as 0030 did, and a first version of this migration that kept enable_sort off
-- always made that claim 19 ms instead of 0.7-0.9 (200,000 such jobs a kind, analysed). A
-- PL/pgSQL plan is cached per statement, not per setting, so the query is written twice, one
-- copy a branch. The look at whether a kind with no room has a job ready (the p_full_poll_s
-- row) is a LATERAL ... ORDER BY x.kind, x.run_at LIMIT 1 now, not an EXISTS (an EXISTS
-- drops its ORDER BY and LIMIT and was pulled up into a join): one entry of
-- jobs_pending_kind (kind, run_at). The Sorts that no plan avoids (the merge of the kinds'
-- walks, the rank) stay, only their estimated cost grows by enable_sort's penalty (10^10);
-- so that this does not reach jit_above_cost (100,000) and compile every call (750-900 ms a
-- claim, what was taken for the cost of enable_sort off when it was tried before), jit is
-- off for the function: its queries read a few dozen rows, JIT never pays there.
--
-- Statistics gathered while no row was waiting (an idle queue, its jobs all finished and not
-- yet pruned) count as none: pg_stats has its rows, but the waiting rows' partial indexes were
-- empty at that ANALYZE (jobs_claim_kind's reltuples 0) and every walk is again estimated at
-- one row; 200,000 ready jobs loaded since made a merged claim 90-100 ms (33-36 told no other
-- kind), and a kind at its limit 25-31 ms, looked at again every FULL_POLL_S (0.05 s): 0.8-1.0
-- ms planned without sorts. That reltuples is read at every claim (one pg_class row by oid; the
-- next ANALYZE changes it), where the look at pg_stats is remembered. Statistics that saw
-- waiting rows but are stale otherwise (a batch scheduled for one moment, analysed before it,
-- come due: 162-281 ms a claim of 200,000) keep 0030's plan: the worker's ANALYZE after a slow
-- claim (SLOW_CLAIM_S in jobtui/worker/dispatcher.py) answers those, for this claim too. The
-- cost: after an ANALYZE that saw no waiting row, 200,000 jobs a kind at priority 9 scheduled
-- for tomorrow ahead of 10 due ones at priority 0 are stepped over, 13-25 ms a claim where
-- 0030's plan took 0.8-1.0 ms (16-27 on a table never analysed), until the next ANALYZE. Load
-- 1.9-2.6, median of 10-20 calls each rolled back, 0031 as merged / this, two rounds each.
-- The reltuples look at every claim: `python benchmarks/limits_claim.py --calls 300`, three
-- rounds interleaved, load 2.2-2.4, medians in us, 0031 as merged / this: told no other kind
-- 1,502-1,613 / 1,527-1,679, told `fast` 1,580-1,685 / 1,583-1,745, told 20 kinds
-- 1,622-1,742 / 1,652-1,792 (within the spread; each call rolled back, so both look at pg_stats
-- every call there).
--
-- Measured (2 cores, load 2.6-4.3 (other helpers' runs); a fresh database per case, jobs
-- loaded and never analysed unless said, 2,000 ready `lim` jobs (concurrency 5, priority 0)
-- beside N `free` ones (priority 5); the median of 30 calls of the function in one session,
-- each rolled back, told `free` / told no other kind, in us; 0030 -> 0031, two runs each):
--   N = 0:         704-1,005/598-797 -> 837-983/758-936; analysed 795-822/631-697 ->
--                  769-916/713-869
--   N = 20,000:    719/1,045 -> 966/1,013;  analysed 922/947 -> 889/800
--   N = 50,000:    26,642-29,989/9,547-11,665 -> 956-1,493/805-1,164; analysed
--                  660-1,038/685-1,022 -> 848-962/940-1,019
--   N = 200,000:   97,725-115,053/38,973-40,362 -> 945-998/821-1,135; analysed
--                  812-882/890-991 -> 781-972/837-1,010
--   N = 1,000,000: 772/719 -> 1,080/1,260;  analysed 843/1,006 -> 942/968 (0030's plan walks
--                  the right index here without statistics too)
--   200,000 `lim` jobs, no other kind: 144,236-145,172/92,741-133,944 -> 1,006-1,167/825-1,153
--   N = 200,000, `lim` at its concurrency limit: 42,809-49,041/46,007-79,567 -> 683-839/726-865
--   10 ready of each kind behind 200,000 of each at priority 9 due tomorrow, analysed:
--                  838-869/738-773 -> 1,049-1,059/915-1,004 (with enable_sort off always:
--                  18,872/9,182)
-- `python benchmarks/limits_claim.py --calls 300 [--fast-first]` (analysed, 100,000 ready jobs
-- of each kind), three rounds interleaved with 0030, load 3.4-4.2, medians in us, 0030 / 0031:
-- told no other kind 1,574-1,756 / 1,590-2,071, told `fast` 1,629-1,814 / 1,721-2,087, told
-- 20 kinds 1,747-1,900 / 1,714-2,184; with --fast-first 1,707-2,222 / 1,752-2,443, 1,064-1,158
-- / 1,128-1,288, 1,109-1,195 / 1,185-1,400. (Within the load's spread; an earlier round at
-- load 2.1-2.5 with enable_sort off always gave the same for both.)
--
-- The function only, replaced with the same signature (grants kept): no table or index
-- change, so the migration takes no lock on jobs.

CREATE OR REPLACE FUNCTION __schema__.jobtui_claim_limited(
  p_kinds text[], p_worker text, p_want int, p_full_poll_s float8,
  p_others text[] DEFAULT '{}'
) RETURNS TABLE (id bigint, kind text, attempts int, max_attempts int, wait_s float8)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_sort = on
SET enable_incremental_sort = on SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
  held text[];
  analysed boolean;
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
  -- With statistics the planner takes each walk's best path (0030's plans); without them
  -- (jobs never analysed, or analysed empty: pg_stats has no row of it) every walk is
  -- estimated at one row, so it is planned with enable_sort off: the walks an index gives in
  -- order (see the comment above). Two copies of the one query, as a plan is cached per
  -- statement, not per setting. Statistics once gathered stay (until the table is dropped):
  -- the session remembers the table's oid once it has seen them, which saves the look at
  -- pg_stats (about 45 us) at every later claim.
  analysed := coalesce(current_setting('jobtui.analysed_jobs', true), '')
              = '__schema__.jobs'::regclass::oid::text;
  IF NOT analysed AND EXISTS (
      SELECT 1 FROM pg_stats s
      WHERE s.schemaname = (SELECT n.nspname FROM pg_class c
                            JOIN pg_namespace n ON n.oid = c.relnamespace
                            WHERE c.oid = '__schema__.jobs'::regclass)
        AND s.tablename = 'jobs' AND s.attname = 'locked_at') THEN
    analysed := true;
    PERFORM set_config('jobtui.analysed_jobs', '__schema__.jobs'::regclass::oid::text, false);
  END IF;
  -- Statistics gathered while no row was waiting (an idle queue, its jobs all finished) left
  -- the waiting rows' indexes empty (reltuples 0) and estimate every walk at one row, as none
  -- do (see the comment above): planned without sorts too. Read at every claim (a pg_class
  -- row by oid), not remembered: the next ANALYZE or VACUUM changes it.
  analysed := analysed AND (SELECT c.reltuples FROM pg_class c
                            WHERE c.oid = '__schema__.jobs_claim_kind'::regclass) > 0;
  IF analysed THEN
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
      SELECT c.id, c.kind, c.priority, c.run_at FROM room
      CROSS JOIN LATERAL (
        SELECT x.id, x.kind, x.priority, x.run_at
        FROM __schema__.jobs x
        WHERE x.kind >= room.kind AND x.kind <= room.kind
          AND x.finished_at IS NULL AND x.locked_at IS NULL
          AND x.run_at <= now()
          AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                           x.max_attempts)
          AND NOT x.cancel_requested
        ORDER BY x.kind, x.priority DESC, x.run_at, x.id
        LIMIT room.n
        FOR UPDATE OF x SKIP LOCKED) c
      ORDER BY c.priority DESC, c.run_at, c.id
      LIMIT p_want
    ), peek AS MATERIALIZED (
      -- The first p_want ready rows of the worker's other kinds in claim order, not locked: the
      -- rows the fast claim that follows would take (worker_claim_per_kind's walk).
      SELECT o.priority, o.run_at, o.id
      FROM (SELECT DISTINCT u.kind FROM unnest(p_others) AS u(kind)
            WHERE NOT EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = u.kind)
              AND NOT EXISTS (SELECT 1 FROM __schema__.kind_limits l
                              WHERE l.kind = u.kind AND l.limited)) AS k(kind)
      CROSS JOIN LATERAL (
        SELECT x.priority, x.run_at, x.id
        FROM __schema__.jobs x
        WHERE x.kind >= k.kind AND x.kind <= k.kind
          AND x.finished_at IS NULL AND x.locked_at IS NULL AND x.run_at <= now()
          AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                           x.max_attempts)
          AND NOT x.cancel_requested
        ORDER BY x.kind, x.priority DESC, x.run_at, x.id
        LIMIT p_want) o
      ORDER BY o.priority DESC, o.run_at, o.id
      LIMIT p_want
    ), ranked AS MATERIALIZED (
      -- A pick's rank in the merged order: its index among the picks plus the peeked rows ahead
      -- of it (a higher priority, or the same one and an earlier (run_at, id)).
      SELECT r.id, r.kind,
             r.i + (SELECT count(*) FROM peek o
                    WHERE o.priority > r.priority
                       OR (o.priority = r.priority AND (o.run_at, o.id) < (r.run_at, r.id)))
               < p_want AS kept
      FROM (SELECT pick.*,
                   row_number() OVER (ORDER BY pick.priority DESC, pick.run_at, pick.id) - 1 AS i
            FROM pick) r
    ), claimed AS (
      UPDATE __schema__.jobs j
      SET locked_at = now(), locked_by = p_worker, attempts = j.attempts + 1,
          max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
      WHERE j.id IN (SELECT r.id FROM ranked r WHERE r.kept)
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
    -- A kind some of whose picks the merge held back (a job of another kind ranks ahead):
    -- its limited kinds are claimed again at the worker's next turn, not after the poll.
    SELECT NULL, r.kind, NULL, NULL, 0::float8
    FROM ranked r WHERE NOT r.kept GROUP BY r.kind
    UNION ALL
    -- A kind with no room for want of a free slot under its concurrency (or per-worker) limit
    -- while jobs of it are ready: room comes back when another worker's job of it finishes,
    -- which sends no NOTIFY. The caller looks again after p_full_poll_s seconds.
    SELECT NULL, room.kind, NULL, NULL, p_full_poll_s
    FROM room
    CROSS JOIN LATERAL (
      SELECT 1 FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts)
      ORDER BY x.kind, x.run_at
      LIMIT 1) AS ready
    WHERE room.n = 0 AND (room.tokens IS NULL OR room.tokens >= 1);
  ELSE
    -- (local to the function: its SET clauses restore both at its end)
    PERFORM set_config('enable_sort', 'off', true),
            set_config('enable_incremental_sort', 'off', true);
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
      SELECT c.id, c.kind, c.priority, c.run_at FROM room
      CROSS JOIN LATERAL (
        SELECT x.id, x.kind, x.priority, x.run_at
        FROM __schema__.jobs x
        WHERE x.kind >= room.kind AND x.kind <= room.kind
          AND x.finished_at IS NULL AND x.locked_at IS NULL
          AND x.run_at <= now()
          AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                           x.max_attempts)
          AND NOT x.cancel_requested
        ORDER BY x.kind, x.priority DESC, x.run_at, x.id
        LIMIT room.n
        FOR UPDATE OF x SKIP LOCKED) c
      ORDER BY c.priority DESC, c.run_at, c.id
      LIMIT p_want
    ), peek AS MATERIALIZED (
      -- The first p_want ready rows of the worker's other kinds in claim order, not locked: the
      -- rows the fast claim that follows would take (worker_claim_per_kind's walk).
      SELECT o.priority, o.run_at, o.id
      FROM (SELECT DISTINCT u.kind FROM unnest(p_others) AS u(kind)
            WHERE NOT EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = u.kind)
              AND NOT EXISTS (SELECT 1 FROM __schema__.kind_limits l
                              WHERE l.kind = u.kind AND l.limited)) AS k(kind)
      CROSS JOIN LATERAL (
        SELECT x.priority, x.run_at, x.id
        FROM __schema__.jobs x
        WHERE x.kind >= k.kind AND x.kind <= k.kind
          AND x.finished_at IS NULL AND x.locked_at IS NULL AND x.run_at <= now()
          AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                           x.max_attempts)
          AND NOT x.cancel_requested
        ORDER BY x.kind, x.priority DESC, x.run_at, x.id
        LIMIT p_want) o
      ORDER BY o.priority DESC, o.run_at, o.id
      LIMIT p_want
    ), ranked AS MATERIALIZED (
      -- A pick's rank in the merged order: its index among the picks plus the peeked rows ahead
      -- of it (a higher priority, or the same one and an earlier (run_at, id)).
      SELECT r.id, r.kind,
             r.i + (SELECT count(*) FROM peek o
                    WHERE o.priority > r.priority
                       OR (o.priority = r.priority AND (o.run_at, o.id) < (r.run_at, r.id)))
               < p_want AS kept
      FROM (SELECT pick.*,
                   row_number() OVER (ORDER BY pick.priority DESC, pick.run_at, pick.id) - 1 AS i
            FROM pick) r
    ), claimed AS (
      UPDATE __schema__.jobs j
      SET locked_at = now(), locked_by = p_worker, attempts = j.attempts + 1,
          max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
      WHERE j.id IN (SELECT r.id FROM ranked r WHERE r.kept)
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
    -- A kind some of whose picks the merge held back (a job of another kind ranks ahead):
    -- its limited kinds are claimed again at the worker's next turn, not after the poll.
    SELECT NULL, r.kind, NULL, NULL, 0::float8
    FROM ranked r WHERE NOT r.kept GROUP BY r.kind
    UNION ALL
    -- A kind with no room for want of a free slot under its concurrency (or per-worker) limit
    -- while jobs of it are ready: room comes back when another worker's job of it finishes,
    -- which sends no NOTIFY. The caller looks again after p_full_poll_s seconds.
    SELECT NULL, room.kind, NULL, NULL, p_full_poll_s
    FROM room
    CROSS JOIN LATERAL (
      SELECT 1 FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts)
      ORDER BY x.kind, x.run_at
      LIMIT 1) AS ready
    WHERE room.n = 0 AND (room.tokens IS NULL OR room.tokens >= 1);
  END IF;
END
$fn$;

