-- The limited kinds' claim takes a kind's jobs in the claim order of every kind, worker_claim's
-- (priority DESC, run_at, id): a higher priority runs first whether or not its kind has a
-- limit. A limit (concurrency, per worker, rate) bounds how many of a kind run, never which
-- of them runs next; among jobs of one priority and one run_at (one enqueue_many batch) the
-- lowest id goes first (FIFO).
--
-- jobtui_claim_limited picked each kind's first room.n ready rows `ORDER BY x.kind, x.run_at`
-- through jobs_pending_kind (kind, run_at): oldest first whatever the priority, and among
-- ties on run_at in the index's (heap) order, so a row updated since its INSERT went after the
-- rest of its batch. Then it kept p_want of all the kinds' picks ORDER BY priority DESC,
-- run_at, id, an order the per-kind pick did not follow: a priority counted only for a job
-- that happened to fall within its kind's first room.n, and with more picked than p_want a
-- higher-priority job further down a kind's line went ahead of the first.
--
-- Now the pick walks jobs_claim_kind (kind, priority DESC, run_at, id) WHERE finished_at IS
-- NULL AND locked_at IS NULL (the baseline's; worker_claim_per_kind walks it for the
-- unlimited kinds) in its own order and stops after room.n rows, with no Sort over the kind's
-- line. The outer ORDER BY is the same order, so each kind's picks are a prefix of its line in
-- it and the outer LIMIT keeps a prefix of each: the head of every kind's line is taken
-- first. Like worker_claim, the walk steps over not-yet-due rows of a higher priority
-- (run_at <= now() is tested on the index entries, not a bound of the range).
--
-- Measured (2 cores, load 1.4-3.0; schema at 0028 and main's first 0029, which walked
-- jobs_pending_kind rebuilt on (kind, run_at, id), vs this one, interleaved): in-server, a
-- claim of 5 among 20,000 ties of one kind, 1,050/1,066 us a call vs 1,056/1,066 (0028) and
-- 1,019/1,045 (first 0029), medians of 5x400 calls; benchmarks/limits_claim.py (--runs 3
-- --seconds 5, three rounds) the kind limited to 5 at 159/150/172 jobs/s vs 181/168/167, the
-- unlimited one beside it 8,436/7,733/9,235 vs 9,382/8,745/8,426: noise of the same size as
-- the differences. The cost is rows of a higher priority that are not due yet, which the walk
-- steps over (index entries only, as worker_claim's does: 137 buffers for 10,000 of them in
-- auto_explain): 10,000 took a claim from 0.94-0.99 ms to 1.56-1.57 ms, 100,000 to 5.9-6.4 ms
-- (about 50 ns an entry).
--
-- The function only: no table or index change, so the migration takes no lock on jobs.

-- 0026's function with one change: the pick orders by (x.kind, x.priority DESC, x.run_at,
-- x.id), jobs_claim_kind's order and that of the outer ORDER BY.
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
      ORDER BY x.kind, x.priority DESC, x.run_at, x.id
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

