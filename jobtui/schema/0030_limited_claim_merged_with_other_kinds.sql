-- A worker's free slots go to the ready jobs of all its kinds in one claim order (priority
-- DESC, run_at, id), whether or not a kind has a limit: a limit bounds how many of a kind run
-- (and how fast), never which job of the worker's kinds runs next.
--
-- The worker claims its limited kinds first (this function) and its other kinds after (the
-- fast claim, worker_claim_per_kind), two statements. Until now this function was given every
-- free slot and filled them from the limited kinds alone, so a worker with one slot ran a
-- limited kind's priority-0 jobs before an unlimited kind's priority-9 ones.
--
-- Now it is also told the worker's other kinds (p_others). After it has picked each limited
-- kind's prefix in claim order (up to the kind's room, locked, as before), it reads without
-- locking the first p_want ready rows of the other kinds in claim order, under the fast
-- claim's conditions (kind not paused and not limited, due, attempts below the effective
-- limit, no cancel request, unfinished and unlocked), one walk of jobs_claim_kind per kind.
-- A picked row is claimed only if its rank in the merged order (its index among the picks
-- plus the number of peeked rows ahead of it) is below p_want: exactly the limited rows that
-- one claim of p_want over all the worker's kinds would take. The fast claim then takes the
-- remaining slots, the peeked rows first. A kind some of whose picks were held back that way
-- is reported with wait_s 0, so the worker claims its limited kinds again at its next turn
-- (when a slot frees) rather than after the polling interval.
--
-- With p_others empty (a worker whose kinds are all limited, or an older caller with four
-- arguments: the parameter defaults to '{}') the peek reads nothing and the function does
-- what 0029's did. The old four-argument function is dropped, not overloaded, so a call with
-- four arguments resolves to this one without ambiguity; EXECUTE stays granted to PUBLIC as
-- PostgreSQL creates a function.
--
-- The function's queries are planned generic (plan_cache_mode = force_generic_plan, a SET
-- of the function alone). PL/pgSQL plans a query with custom plans first and keeps a generic
-- one only if its estimate is no worse; 0029's query went generic after five calls, this
-- larger one (a LIMIT p_want walk per other kind, estimated blind) stayed custom and was
-- planned again at every call. The generic plan walks jobs_claim_kind per kind as the custom
-- one does (tests/test_claim_tie_order.py and tests/test_claim_merged_order.py read it through
-- auto_explain).
--
-- Measured (2 cores, load 1.9-2.5, `python benchmarks/limits_claim.py --calls 300
-- [--fast-first]`: one session, a claim of `slow` limited to 5 with want 50 beside `fast`,
-- 100,000 ready jobs of each, every call rolled back; medians of three interleaved rounds):
-- told no other kind 1,183-1,337 us a call, told `fast` 1,241-1,405 (the peek: +60-70 us),
-- told `fast` and 19 kinds with no job 1,308-1,452 (a probe each: +3 us a kind); with
-- `fast` ranked first (--fast-first) the merge holds every pick back and claims nothing,
-- 755-775 us. The same command over a checkout of 0029 (83106fc), whose function stayed on
-- custom plans there, gave 1,671-1,848 us, and 1,127-1,153 with plan_cache_mode forced to
-- generic for the session. With four claim loops (`--runs 1 --seconds 5`, three rounds, load
-- 1.9-3.7) the claim took 4.4-6.9 ms a call at 0030 and 6.7-7.1 at 0029, the limited kind
-- 140-205 jobs/s against 123-135: within the spread of the scenarios this change does not
-- touch (fast alone 7,569-10,025 jobs/s across the six runs).
--
-- The peek's kinds (the worker's others, not paused, not limited: the fast claim's list) are
-- filtered by NOT EXISTS, not EXCEPT: with p_others empty nothing is read, where EXCEPT read
-- paused_kinds and kind_limits at every claim.
--
-- The function only: no table or index change, so the migration takes no lock on jobs.

DROP FUNCTION __schema__.jobtui_claim_limited(text[], text, int, float8);

-- 0029's function with these changes: the p_others parameter and the generic plans; the pick
-- keeps each row's kind, priority and run_at; the peek and the rank filter (ranked) between
-- the pick and the UPDATE; and the wait_s 0 row of a kind whose picks were held back.

CREATE FUNCTION __schema__.jobtui_claim_limited(
  p_kinds text[], p_worker text, p_want int, p_full_poll_s float8,
  p_others text[] DEFAULT '{}'
) RETURNS TABLE (id bigint, kind text, attempts int, max_attempts int, wait_s float8)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $fn$
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

