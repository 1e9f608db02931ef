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

-- name: limits_claim
-- The claim of limited kinds, one statement (migration 0023's jobtui_claim_limited: lock the
-- kinds' rows, then count and claim with a new snapshot, commit): no lock outlives the
-- statement, so a worker frozen mid-claim (SIGSTOP, a VM pause, a network split) holds
-- nothing that stops other workers. Rows with id NULL: per kind, the seconds to wait before
-- claiming it again (wait_s), or a kind that was not looked at (wait_s NULL: another claim
-- held it, or it is paused or no longer limited); wait_s 0 when jobs of the worker's other
-- kinds (`others`, which the fast claim takes next) ranked ahead of some of a kind's in the
-- claim order and held them back (migration 0030).
SELECT id, kind, attempts, max_attempts, wait_s
FROM __schema__.jobtui_claim_limited(%(kinds)s::text[], %(worker)s, %(want)s::int,
                                     %(full_poll_s)s::float8, %(others)s::text[])

-- name: limits_claim_own
-- limits_claim without the worker's other kinds: for a worker that has none (nothing to merge,
-- nothing more read), and for a schema before 0030, whose function takes four arguments (a
-- worker started before `jobtui migrate` ran keeps claiming, in 0029's order across kinds).
SELECT id, kind, attempts, max_attempts, wait_s
FROM __schema__.jobtui_claim_limited(%(kinds)s::text[], %(worker)s, %(want)s::int,
                                     %(full_poll_s)s::float8)

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
-- The same override again changes nothing: no row, so the caller can say so (and no NOTIFY).
WHERE NOT (l.overridden
           AND l.override_concurrency IS NOT DISTINCT FROM EXCLUDED.override_concurrency
           AND l.override_per_worker IS NOT DISTINCT FROM EXCLUDED.override_per_worker
           AND l.override_rate IS NOT DISTINCT FROM EXCLUDED.override_rate
           AND l.override_period_s IS NOT DISTINCT FROM EXCLUDED.override_period_s)
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
