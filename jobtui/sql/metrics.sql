-- The Overview's snapshot: a handful of indexed reads, run together in one
-- read-only repeatable-read transaction so every figure is of the same instant
-- (jobtui.metrics). Time ranges are relative to its now().

-- name: metrics_snapshot_transaction
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- name: metrics_no_parallel_workers
SET LOCAL max_parallel_workers_per_gather = 0

-- name: metrics_no_jit
-- The JIT compiler fires only when the planner's cost estimate crosses jit_above_cost, which
-- the index-only counts do when the visibility map is stale (heap fetches): then it spends
-- 200-290 ms compiling a query that runs in tens of milliseconds. Per transaction (SET LOCAL),
-- so it holds behind a transaction pooler and never leaks to another client.
SET LOCAL jit = off

-- name: metrics_replica
-- Whether this is a hot standby, and how far its replay is behind. When everything received
-- has been replayed the lag is 0: now() - last replayed commit grows while the primary is idle,
-- which is not lag. NULL on a primary (and on a standby that has replayed nothing yet).
SELECT pg_is_in_recovery() AS replica,
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() IS NOT NULL
             AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0::float8
            ELSE greatest(extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8, 0)
       END AS lag_s,
       pg_last_wal_replay_lsn()::text AS replay_lsn

-- name: metrics_clock
SELECT now() AS now, date_trunc('minute', now()) AS minute

-- name: metrics_pending_by_kind
-- Unfinished rows only, per kind. `ready` and `scheduled` include retries (as the workers'
-- queue_samples do); `retrying` counts the retries among them. `exhausted` rows (unlocked,
-- attempts >= max_attempts: a consumer gave up on them and left them in `jobs`) can never run
-- and are counted apart, in no other state.
-- The distinct kinds come first by a loose index scan (one descent of jobs_pending_kind per
-- kind), then each kind's rows are counted by an index-only scan of its range of that index
-- (0013 makes it carry attempts, max_attempts and locked_at): no heap visit while the
-- visibility map is set, and no per-row grouping. `running` is count(locked_at) and
-- `scheduled` is what is left, one filtered count fewer per row.
WITH RECURSIVE pk AS (
  SELECT min(j.kind) AS kind FROM __schema__.jobs j WHERE j.finished_at IS NULL
  UNION ALL
  SELECT (SELECT min(j.kind) FROM __schema__.jobs j
          WHERE j.finished_at IS NULL AND j.kind > pk.kind)
  FROM pk WHERE pk.kind IS NOT NULL
)
SELECT pk.kind, c.ready, c.total - c.running - c.ready - c.exhausted AS scheduled,
       c.retrying, c.running, c.exhausted,
       -- The oldest runnable unlocked row is the oldest ready one when it is due.
       CASE WHEN c.oldest_unlocked <= now()
            THEN extract(epoch FROM now() - c.oldest_unlocked)::float8 END AS oldest_ready_age_s
FROM pk
CROSS JOIN LATERAL (
  SELECT count(*) AS total,
         count(j.locked_at) AS running,
         count(*) FILTER (WHERE j.locked_at IS NULL AND j.run_at <= now()
                            AND j.attempts < j.max_attempts) AS ready,
         count(*) FILTER (WHERE j.locked_at IS NULL AND j.attempts > 0
                            AND j.attempts < j.max_attempts) AS retrying,
         count(*) FILTER (WHERE j.locked_at IS NULL
                            AND j.attempts >= j.max_attempts) AS exhausted,
         min(j.run_at) FILTER (WHERE j.locked_at IS NULL
                                 AND j.attempts < j.max_attempts) AS oldest_unlocked
  FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.kind = pk.kind
) c
WHERE pk.kind IS NOT NULL

-- name: metrics_dead_by_kind
-- Exact per-kind counts kept by migration 0015's triggers (one delta row per statement that
-- adds or removes dead letters): a few rows to read, however stale the visibility map is.
SELECT c.kind, c.dead FROM __schema__.jobtui_dead_letter_counts() c

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
       greatest(extract(epoch FROM now() - w.heartbeat_at)::float8, 0) AS heartbeat_age_s,
       w.abandoned, w.outcome_errors, w.last_outcome_error,
       w.heartbeat_interval_s, w.heartbeat_timeout_s,
       w.wakeup_mode, w.wakeup_note, w.listen_connected, w.last_wakeup_at, w.poll_interval_s
FROM __schema__.workers w
ORDER BY w.started_at, w.id

-- name: metrics_paused
SELECT p.kind FROM __schema__.paused_kinds p

-- name: metrics_kind_limits
-- The effective per-kind limits (declared on the handler or overridden by an operator).
SELECT l.kind, l.concurrency, l.per_worker, l.rate, l.period_s
FROM __schema__.kind_limits l
WHERE l.limited
