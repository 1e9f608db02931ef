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

-- name: metrics_state_counts
-- Every kind's rows by state, from the delta rows migration 0016's triggers keep on `jobs`
-- (exact for every writer, whatever the visibility map): a few hundred rows to sum instead of
-- millions to count. `ready` and `scheduled` include retries (as the workers' queue_samples
-- do); `retrying` counts the retries among them; `exhausted` rows (unlocked, attempts >=
-- max_attempts: a consumer gave up on them) are in no other state. Waiting rows are kept by
-- when they are due (0024: per minute to the end of the next hour, per hour to the end of
-- tomorrow, one row after that, as of the last fold; each row's jobs have run_at in [due,
-- until)). `reach` is where the rows that start by this minute end: the next minute, unless no
-- fold has run for an hour or more and the clock has reached a coarser row. Rows starting after `reach` are scheduled; the jobs due between now
-- and `reach` are counted from the index (`late`: at most a minute of them, and more only
-- until the next fold); the rest of the waiting rows are ready.
-- `cancelled` is every row with cancelled_at set, as the Jobs filter has it; `cancel_open` are
-- those among them not finished yet (so also in an unfinished state).
-- Shared by the snapshot and the Jobs tab's counts (jobtui.browse).
WITH c AS (
  SELECT * FROM __schema__.jobtui_job_counts()
), reach AS (
  -- the last instant the rows starting by this minute can hold: before their end, or their
  -- end itself when that is infinity (a job due at infinity is in such a row)
  SELECT CASE WHEN r.until = 'infinity' THEN r.until
              ELSE r.until - interval '1 microsecond' END AS last
  FROM (SELECT greatest(date_trunc('minute', now(), 'UTC') + interval '1 minute',
                        max(c.until)) AS until
        FROM c WHERE c.state = 'waiting' AND c.due <= date_trunc('minute', now(), 'UTC')) r
), late AS (
  SELECT j.kind, count(*) AS n
  FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts < j.max_attempts
    AND j.run_at > now()
    AND j.run_at <= (SELECT r.last FROM reach r)
  GROUP BY j.kind
), k AS (
  SELECT c.kind,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'waiting'
                                     AND c.due > (SELECT r.last FROM reach r)), 0) AS beyond,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'waiting'), 0) AS waiting,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'retrying'), 0) AS retrying,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'running'), 0) AS running,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'exhausted'), 0) AS exhausted,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'succeeded'), 0) AS succeeded,
         coalesce(sum(c.n) FILTER (WHERE c.state IN ('cancelled', 'cancel_open')), 0)
           AS cancelled,
         coalesce(sum(c.n) FILTER (WHERE c.state = 'cancel_open'), 0) AS cancel_open
  FROM c
  GROUP BY c.kind
)
SELECT k.kind,
       (k.waiting - k.beyond - coalesce(l.n, 0))::bigint AS ready,
       (k.beyond + coalesce(l.n, 0))::bigint AS scheduled,
       k.retrying::bigint AS retrying, k.running::bigint AS running,
       k.exhausted::bigint AS exhausted, k.succeeded::bigint AS succeeded,
       k.cancelled::bigint AS cancelled, k.cancel_open::bigint AS cancel_open
FROM k LEFT JOIN late l ON l.kind = k.kind
ORDER BY k.kind

-- name: metrics_oldest_ready
-- Each kind's oldest ready row: the first entry of its range of jobs_pending_kind (kind,
-- run_at) that is unlocked and may still run (INCLUDE columns, so no heap visit for the test
-- while the page is all-visible). Ahead of it are only running and exhausted rows.
SELECT k.kind, extract(epoch FROM now() - o.run_at)::float8 AS oldest_ready_age_s
FROM unnest(%(kinds)s::text[]) k(kind)
CROSS JOIN LATERAL (
  SELECT j.run_at FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.kind = k.kind AND j.locked_at IS NULL
    AND j.attempts < j.max_attempts AND j.run_at <= now()
  ORDER BY j.run_at
  LIMIT 1
) o

-- name: metrics_flow
-- Rows of each kind that arrived (inserted unfinished) and departed (finished or deleted
-- while unfinished), by any producer or consumer, over the rate window (the current minute
-- and the `back` before it), from migration 0016's per-minute flow rows.
SELECT f.kind, f.arrived, f.departed
FROM __schema__.jobtui_job_flow(date_trunc('minute', now(), 'UTC')
                                - %(back)s * interval '1 minute') f

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
       w.wakeup_mode, w.wakeup_note, w.listen_connected, w.last_wakeup_at, w.poll_interval_s,
       w.control, w.control_applied
FROM __schema__.workers w
ORDER BY w.started_at, w.id

-- name: metrics_paused
SELECT p.kind FROM __schema__.paused_kinds p

-- name: metrics_kind_limits
-- The effective per-kind limits (declared on the handler or overridden by an operator).
SELECT l.kind, l.concurrency, l.per_worker, l.rate, l.period_s
FROM __schema__.kind_limits l
WHERE l.limited
