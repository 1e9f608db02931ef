-- The Overview's snapshot: a handful of indexed reads, run together in one read-only
-- repeatable-read transaction so every figure is of the same instant (jobtui.metrics).

-- name: metrics_clock
SELECT now() AS now, date_trunc('minute', now()) AS minute

-- name: metrics_pending_by_kind
-- Unfinished rows only: the partial indexes keep finished rows (the bulk of the table) out.
-- `ready` and `scheduled` include retries (as the workers' queue_samples do); `retrying`
-- counts the retries among them.
SELECT j.kind,
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at <= now()) AS ready,
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at > now()) AS scheduled,
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts > 0) AS retrying,
       count(*) FILTER (WHERE j.locked_at IS NOT NULL) AS running,
       extract(epoch FROM now() - min(j.run_at) FILTER (
         WHERE j.locked_at IS NULL AND j.run_at <= now()))::float8 AS oldest_ready_age_s
FROM __schema__.jobs j
WHERE j.finished_at IS NULL
GROUP BY j.kind

-- name: metrics_dead_by_kind
SELECT d.kind, count(*) AS dead FROM __schema__.dead_letters d GROUP BY d.kind

-- name: metrics_kind_stats
SELECT s.minute, s.kind, s.done, s.failed, s.dead, s.hist
FROM __schema__.kind_stats s
WHERE s.minute >= %(since)s
ORDER BY s.minute

-- name: metrics_queue_samples
SELECT q.minute, q.ready, q.oldest_ready_age_s
FROM __schema__.queue_samples q
WHERE q.minute >= %(since)s
ORDER BY q.minute

-- name: metrics_workers
SELECT w.id, w.host, w.pid, w.kinds, w.concurrency, w.running, w.started_at,
       greatest(extract(epoch FROM now() - w.heartbeat_at)::float8, 0) AS heartbeat_age_s
FROM __schema__.workers w
ORDER BY w.started_at, w.id

-- name: metrics_paused
SELECT p.kind FROM __schema__.paused_kinds p
