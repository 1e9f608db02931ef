-- The limited kinds' claim takes jobs that share a run_at in id order, as the unlimited claim
-- (worker_claim, jobs_claim (priority DESC, run_at, id)) always did.
--
-- One enqueue_many batch gets one now(): every job of it shares a run_at. jobtui_claim_limited
-- picked a kind's rows `ORDER BY x.kind, x.run_at` through jobs_pending_kind (kind, run_at), so
-- among those ties it took them in the index's order, which is the heap's: a row updated since
-- its INSERT (a priority changed and set back, a retry, a release) had its new version, and its
-- new index entry, after the rest of its batch and was taken after jobs enqueued behind it; and
-- `jobtui jobs why` (why_position, which counts in (run_at, id) order) gave it a place off by
-- as many as shared its run_at.
--
-- jobs_pending_kind now holds id as its last key column, under the same name, with the same
-- INCLUDE and predicate (its other readers, the per-kind oldest ready row and counts, read its
-- (kind, run_at) prefix as before), and the claim's pick orders by (x.kind, x.run_at, x.id):
-- the index's own order, so the pick still walks the index and stops after room.n rows, with no
-- Sort node over a batch of 20,000 ties. why_position's range for a limited kind,
-- `kind = $1 AND (run_at, id) < ($2, $3)`, is now one index range to the job.
--
-- Measured (2 cores, load 1.3-2.8, schema at 0028 vs 0029, interleaved): a claim of 5 among
-- 100,000 ties, in-server, 2,226-2,475 us a call vs 2,289-2,299 (medians of 5x400 calls); an
-- enqueue_many of 20,000 158-163 ms vs 159 ms (medians of 5); benchmarks/limits_claim.py
-- (--runs 3 --seconds 5) the limited kind 186/171 jobs/s vs 187/183, the unlimited one beside
-- it 9,574/9,244 vs 9,336/9,373. The index is larger by the id: 3.66 -> 4.76 MiB at 100,000
-- waiting rows of one kind.
--
-- DROP INDEX takes ACCESS EXCLUSIVE on jobs and holds it until the migration commits, so the
-- CREATE INDEX's build (it reads the table; only waiting rows enter the index: 1.1 s for the
-- whole migration at 1,000,000 waiting rows) blocks readers and writers for that long;
-- `jobtui migrate` bounds the wait for the lock (LockWait) and tries again after a back-off.
DROP INDEX __schema__.jobs_pending_kind;
CREATE INDEX jobs_pending_kind ON __schema__.jobs (kind, run_at, id)
  INCLUDE (attempts, max_attempts)
  WHERE finished_at IS NULL AND locked_at IS NULL;

-- 0026's function with one change: `pick` orders each kind's rows by (x.kind, x.run_at, x.id),
-- jobs_pending_kind's order, so jobs sharing a run_at are taken in id order (FIFO).
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
      ORDER BY x.kind, x.run_at, x.id
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

