-- The Overview's snapshot: a handful of indexed reads, run together in one
-- read-only repeatable-read transaction so every figure is of the same instant
-- (jobtui.metrics). Time ranges are relative to its now().

-- name: metrics_snapshot_transaction
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: metrics_no_parallel_workers
SET LOCAL max_parallel_workers_per_gather = 0

-- name: metrics_clock
SELECT now() AS now, date_trunc('minute', now()) AS minute

-- name: metrics_pending_by_kind
-- Unfinished rows only, per kind. `ready` and `scheduled` include retries (as the workers'
-- queue_samples do); `retrying` counts the retries among them.
-- The distinct kinds come first by a loose index scan (one descent of jobs_pending_kind per
-- kind), then each kind's rows are counted by an index-only scan of its range of that index
-- (0003 makes it carry attempts and locked_at): no heap visit while the visibility map is set,
-- and no per-row grouping. `running` is count(locked_at) and `scheduled` is what is left,
-- one filtered count fewer per row. On 100k pending rows, both index-only (best of runs):
-- GROUP BY kind with five filtered aggregates 18 ms, this 11-14 ms; plain count(*) 6-7 ms.
WITH RECURSIVE pk AS (
  SELECT min(j.kind) AS kind FROM __schema__.jobs j WHERE j.finished_at IS NULL
  UNION ALL
  SELECT (SELECT min(j.kind) FROM __schema__.jobs j
          WHERE j.finished_at IS NULL AND j.kind > pk.kind)
  FROM pk WHERE pk.kind IS NOT NULL
)
SELECT pk.kind, c.ready, c.total - c.running - c.ready AS scheduled, c.retrying, c.running,
       -- The oldest unlocked row is the oldest ready one when it is due; else none is ready.
       CASE WHEN c.oldest_unlocked <= now()
            THEN extract(epoch FROM now() - c.oldest_unlocked)::float8 END AS oldest_ready_age_s
FROM pk
CROSS JOIN LATERAL (
  SELECT count(*) AS total,
         count(j.locked_at) AS running,
         count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at <= now()) AS ready,
         count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts > 0) AS retrying,
         min(j.run_at) FILTER (WHERE j.locked_at IS NULL) AS oldest_unlocked
  FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.kind = pk.kind
) c
WHERE pk.kind IS NOT NULL

-- name: metrics_dead_by_kind
-- The same loose index scan over dead_letters' (kind, error_signature) index, whose
-- deduplicated entries make each kind's index-only count read few pages.
WITH RECURSIVE dk AS (
  SELECT min(d.kind) AS kind FROM __schema__.dead_letters d
  UNION ALL
  SELECT (SELECT min(d.kind) FROM __schema__.dead_letters d WHERE d.kind > dk.kind)
  FROM dk WHERE dk.kind IS NOT NULL
)
SELECT dk.kind, (SELECT count(*) FROM __schema__.dead_letters d WHERE d.kind = dk.kind) AS dead
FROM dk
WHERE dk.kind IS NOT NULL

-- name: metrics_kind_window
-- Each kind's per-minute figures over the rate window (the current minute and the `back`
-- before it); the run-time histograms are merged by the caller.
SELECT s.kind, s.done, s.failed, s.hist
FROM __schema__.kind_stats s
WHERE s.minute >= date_trunc('minute', now()) - %(back)s * interval '1 minute'

-- name: metrics_minute_totals
-- Done and failed per minute over the history (the current minute and the `back` before it).
SELECT s.minute, sum(s.done)::bigint AS done, sum(s.failed)::bigint AS failed
FROM __schema__.kind_stats s
WHERE s.minute >= date_trunc('minute', now()) - %(back)s * interval '1 minute'
GROUP BY s.minute

-- name: metrics_queue_samples
SELECT q.minute, q.ready, q.oldest_ready_age_s
FROM __schema__.queue_samples q
WHERE q.minute >= date_trunc('minute', now()) - %(back)s * interval '1 minute'

-- name: metrics_workers
SELECT w.id, w.host, w.pid, w.kinds, w.concurrency, w.running, w.started_at,
       greatest(extract(epoch FROM now() - w.heartbeat_at)::float8, 0) AS heartbeat_age_s
FROM __schema__.workers w
ORDER BY w.started_at, w.id

-- name: metrics_paused
SELECT p.kind FROM __schema__.paused_kinds p
