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
-- Now the function is planned with enable_sort off (a SET of the function alone, as 0030's
-- plan_cache_mode): a walk whose ORDER BY an index gives in order costs less than any walk
-- followed by a Sort whatever the estimates, so the pick and the peek walk jobs_claim_kind
-- (kind, priority DESC, run_at, id) from the kind's head and stop after LIMIT rows, and the
-- no-room check, now a LATERAL ... ORDER BY x.kind, x.run_at LIMIT 1 instead of EXISTS (an
-- EXISTS drops its ORDER BY and LIMIT and is pulled up into a join), reads one entry of
-- jobs_pending_kind (kind, run_at). The Sorts that no plan avoids (the merge of the kinds'
-- walks, the rank) stay, only their estimated cost grows by enable_sort's penalty (10^10);
-- so that this does not reach jit_above_cost (100,000) and compile every call (750-900 ms a
-- claim, what was taken for the cost of enable_sort off when it was tried before), jit is
-- off for the function too: its queries read a few dozen rows, JIT never pays there.
--
-- Measured (2 cores, load 1.6-2.6; a fresh database per case, jobs loaded and never analysed
-- unless said, 2,000 ready `lim` jobs (concurrency 5, priority 0) beside N `free` ones
-- (priority 5); the median of 30 calls of the function in one session, each rolled back,
-- told `free` / told no other kind; 0030 -> 0031):
--   N = 0:         956/823 -> 663/617 us;   analysed 657/629 -> 642/606
--   N = 20,000:    882/955 -> 544/582;      analysed 509/565 -> 505/554
--   N = 50,000:    20,217/6,978 -> 550/587; analysed 665/708 -> 825/810
--   N = 200,000:   142,897/47,743 -> 1,092/885; analysed 577/603 -> 539/616
--   N = 1,000,000 (three to five runs each, load 2.5-3.2): 538-823/637-921 -> 599-824/
--     645-1,891; analysed 579-928/663-940 -> 644-1,107/825-1,756, the same plans node for
--     node (the analysed plans differ only in a HashAggregate for a GroupAggregate over no row)
--   200,000 `lim` jobs, no other: 199,924/124,178 -> 760/726
--   N = 200,000 and `lim` at its concurrency limit: 33,912/40,401 -> 668/595
-- (at 1,000,000 without statistics 0030's plan happened to walk the right index already).
-- With statistics nothing changes: `benchmarks/limits_claim.py --calls 300` (it analyses; 100,000
-- ready jobs of each kind), three rounds interleaved with 0030, load 2.1-2.5, medians in us,
-- 0030 / 0031: told no other kind 1,198-1,370 / 1,244-1,384, told `fast` 1,272-1,439 /
-- 1,337-1,464, told 20 kinds 1,271-1,481 / 1,400-1,486; --fast-first 1,136-1,736 /
-- 1,159-1,320, 733-1,029 / 721-840, 768-1,059 / 766-889.
--
-- The function only, replaced with the same signature (grants kept): no table or index
-- change, so the migration takes no lock on jobs.

CREATE OR REPLACE FUNCTION __schema__.jobtui_claim_limited(
  p_kinds text[], p_worker text, p_want int, p_full_poll_s float8,
  p_others text[] DEFAULT '{}'
) RETURNS TABLE (id bigint, kind text, attempts int, max_attempts int, wait_s float8)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
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
END
$fn$;

