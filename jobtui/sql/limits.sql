-- Per-kind limits (jobtui/limits.py) and their operator actions (jobtui/ops.py).

-- name: limits_sync
-- Upsert what the handlers declare (every kind the worker handles; all-NULL when a handler
-- declares no limit, which clears a stale declaration). Overrides are kept.
INSERT INTO __schema__.kind_limits AS l
  (kind, declared_concurrency, declared_per_worker, declared_rate, declared_period_s,
   declared_at)
SELECT d.kind, d.concurrency, d.per_worker, d.rate, d.period_s, now()
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS d(kind text, concurrency int, per_worker int, rate int, period_s int)
ON CONFLICT (kind) DO UPDATE
SET declared_concurrency = EXCLUDED.declared_concurrency,
    declared_per_worker = EXCLUDED.declared_per_worker,
    declared_rate = EXCLUDED.declared_rate, declared_period_s = EXCLUDED.declared_period_s,
    declared_at = now()
WHERE (l.declared_concurrency, l.declared_per_worker, l.declared_rate, l.declared_period_s)
      IS DISTINCT FROM (EXCLUDED.declared_concurrency, EXCLUDED.declared_per_worker,
                        EXCLUDED.declared_rate, EXCLUDED.declared_period_s)
RETURNING kind

-- name: limits_limited_kinds
-- Kinds with an effective limit, to leave out of the fast claim (worker_claim), which should
-- better do it itself: `EXCEPT SELECT l.kind FROM __schema__.kind_limits l WHERE l.limited`.
SELECT kind FROM __schema__.kind_limits WHERE limited ORDER BY kind

-- name: limits_lock
-- Step 1 of claim_limited: take the limited kinds nobody else is claiming right now. A kind
-- another worker holds is skipped, not waited for; paused kinds are not taken.
SELECT l.kind
FROM __schema__.kind_limits l
WHERE l.kind = ANY(%(kinds)s::text[]) AND l.limited
  AND NOT EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = l.kind)
ORDER BY l.kind
FOR UPDATE OF l SKIP LOCKED

-- name: limits_claim
-- Step 2, a new statement and so a new snapshot: every claim of these kinds committed before
-- we got their rows' locks is visible, so the running counts are exact. Room per kind is the
-- least of: concurrency − running, per_worker − running here, whole tokens, `want`. Running
-- rows are counted in one pass over the small partial index of running jobs (whatever the
-- backlog); ready rows are taken per kind in run_at order through jobs_pending_kind (priority
-- does not reorder jobs within a limited kind: that needs an index every claim would pay for).
-- The kind is matched as a range of one value (`>= k AND <= k`, the same rows as `= k`) and
-- ordered by (kind, run_at): that is jobs_pending_kind's order. With `= room.kind` the planner
-- took the kind as fixed, and with few kinds it walked jobs_pending in run_at order past every
-- other kind's backlog (26–60 ms at 200 000 rows of one other kind, against 0.3 ms).
-- As in worker_claim: the attempt limit is the effective one (`%(limits)s`, the handlers'
-- {kind: max_attempts}, written into the row), and a row with a cancel request is not taken.
-- Rows with id NULL carry, per rate-limited kind, the seconds until its next whole token; per
-- kind at its concurrency limit with jobs ready, the short poll for others' completions.
WITH lim AS MATERIALIZED (
  SELECT l.kind, l.concurrency, l.per_worker, l.rate, l.period_s,
         CASE WHEN l.rate IS NULL THEN NULL ELSE
           least(l.rate::float8, l.tokens + l.rate::float8 / l.period_s
                 * greatest(0, extract(epoch FROM statement_timestamp() - l.tokens_at)))
         END AS tokens
  FROM __schema__.kind_limits l
  WHERE l.kind = ANY(%(kinds)s::text[])
), running AS MATERIALIZED (
  SELECT r.kind, count(*) AS n, count(*) FILTER (WHERE r.locked_by = %(worker)s) AS mine
  FROM __schema__.jobs r
  WHERE r.finished_at IS NULL AND r.locked_at IS NOT NULL
  GROUP BY r.kind
), room AS MATERIALIZED (
  SELECT lim.kind, lim.rate, lim.period_s, lim.tokens,
         greatest(0, least(
           %(want)s::int,
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
      AND x.attempts < coalesce((%(limits)s::jsonb ->> x.kind)::int, x.max_attempts)
      AND NOT x.cancel_requested
    ORDER BY x.kind, x.run_at
    LIMIT room.n
    FOR UPDATE OF x SKIP LOCKED) c
  ORDER BY c.priority DESC, c.run_at, c.id
  LIMIT %(want)s
), claimed AS (
  UPDATE __schema__.jobs j
  SET locked_at = now(), locked_by = %(worker)s, attempts = j.attempts + 1,
      max_attempts = coalesce((%(limits)s::jsonb ->> j.kind)::int, j.max_attempts)
  WHERE j.id IN (SELECT id FROM pick)
    AND j.attempts < coalesce((%(limits)s::jsonb ->> j.kind)::int, j.max_attempts)
    AND NOT j.cancel_requested
  RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts
), taken AS (
  SELECT room.kind, room.rate, room.period_s,
         room.tokens - (SELECT count(*) FROM claimed c WHERE c.kind = room.kind) AS left_
  FROM room WHERE room.rate IS NOT NULL
), spent AS (
  UPDATE __schema__.kind_limits l
  SET tokens = t.left_, tokens_at = statement_timestamp()
  FROM taken t WHERE l.kind = t.kind
)
SELECT id, kind, payload, attempts, max_attempts, NULL::float8 AS wait_s FROM claimed
UNION ALL
SELECT NULL, t.kind, NULL, NULL, NULL, (1 - t.left_) * t.period_s / t.rate
FROM taken t WHERE t.left_ < 1
UNION ALL
-- A kind with no room for want of a free slot under its concurrency (or per-worker) limit
-- while jobs of it are ready: room comes back when another worker's job of it finishes,
-- which sends no NOTIFY. The caller looks again after %(full_poll_s)s seconds.
SELECT NULL, room.kind, NULL, NULL, NULL, %(full_poll_s)s::float8
FROM room
WHERE room.n = 0 AND (room.tokens IS NULL OR room.tokens >= 1)
  AND EXISTS (
    SELECT 1 FROM __schema__.jobs x
    WHERE x.kind >= room.kind AND x.kind <= room.kind
      AND x.finished_at IS NULL AND x.locked_at IS NULL
      AND x.run_at <= now()
      AND x.attempts < coalesce((%(limits)s::jsonb ->> x.kind)::int, x.max_attempts))

-- name: ops_set_kind_limits
INSERT INTO __schema__.kind_limits AS l
  (kind, overridden, override_concurrency, override_per_worker, override_rate,
   override_period_s, overridden_by, overridden_at)
VALUES (%(kind)s, true, %(concurrency)s, %(per_worker)s, %(rate)s, %(period_s)s,
        %(os_user)s, now())
ON CONFLICT (kind) DO UPDATE
SET overridden = true, override_concurrency = EXCLUDED.override_concurrency,
    override_per_worker = EXCLUDED.override_per_worker,
    override_rate = EXCLUDED.override_rate, override_period_s = EXCLUDED.override_period_s,
    overridden_by = EXCLUDED.overridden_by, overridden_at = now()
RETURNING kind

-- name: ops_clear_kind_limits
UPDATE __schema__.kind_limits
SET overridden = false, override_concurrency = NULL, override_per_worker = NULL,
    override_rate = NULL, override_period_s = 1, overridden_by = %(os_user)s,
    overridden_at = now()
WHERE kind = %(kind)s AND overridden
RETURNING kind

-- name: limits_list
SELECT kind, concurrency, per_worker, rate, period_s, limited, overridden,
       declared_concurrency, declared_per_worker, declared_rate, declared_period_s,
       declared_at, override_concurrency, override_per_worker, override_rate,
       override_period_s, overridden_by, overridden_at
FROM __schema__.kind_limits
ORDER BY kind
