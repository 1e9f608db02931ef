-- The kind screen (jobtui.kindinfo): one kind's history, errors and settings, each read in a
-- read-only repeatable-read transaction (metrics_snapshot_transaction). The console reads them
-- in two: `load(rows=False)` reads all but the three statements over the kind's unfinished rows
-- (kind_retry_errors, kind_rows_by_index, kind_row_max_attempts), which `load_rows` reads next in
-- a transaction of their own (sent before the first one's figures are drawn:
-- kindinfo.load_then_rows); `load` alone (rows=True) reads all in one. So a figure is only
-- ever shown beside figures of its own transaction: the retries' total (kind_retry_errors'
-- `total`) comes with their groups, not from the first read's counts. Every statement takes the
-- kind as %(kind)s.

-- name: kind_clock
SELECT now() AS now, date_trunc('minute', now()) AS minute

-- name: kind_minutes
-- The worker's per-minute figures of the kind since %(since)s (histograms merged by the caller).
SELECT s.minute, s.done, s.failed, s.dead, s.hist
FROM __schema__.kind_stats s
WHERE s.kind = %(kind)s AND s.minute >= %(since)s

-- name: kind_row_max_attempts
-- The max_attempts the kind's unfinished rows carry (the handler's, when it declares one,
-- overrides them): waiting rows from the covering jobs_pending_kind index, running ones (few)
-- from jobs_running (since migration 0020 no index holds both). It reads every unfinished row
-- of the kind, so not at all when the handler's max_attempts overrides them (the screen then
-- shows the handler's alone): the gate is a one-time filter, checked before either scan.
-- Run after kind_rows_by_index (the last statement of its transaction): left to itself the
-- planner reads the waiting rows by a bitmap heap scan, every heap page holding one of them
-- (20-42 ms at 22,500 waiting rows of a kind, benchmarks/scale.py's data set with the 30-day
-- reminders), where the index-only scan visits only the pages the visibility map does not
-- cover (5-10 ms).
SELECT min(u.max_attempts) AS low, max(u.max_attempts) AS high
FROM (SELECT j.max_attempts FROM __schema__.jobs j
      WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.kind = %(kind)s
      UNION ALL
      SELECT j.max_attempts FROM __schema__.jobs j
      WHERE j.finished_at IS NULL AND j.locked_at IS NOT NULL AND j.kind = %(kind)s) u
WHERE NOT EXISTS (SELECT 1 FROM __schema__.kind_handlers h
                  WHERE h.kind = %(kind)s AND h.max_attempts IS NOT NULL)

-- name: kind_rows_by_index
-- For the rest of the transaction, plans by index scans only (kind_row_max_attempts): one
-- row, so it can be sent in a pipeline like the reads.
SELECT set_config('enable_bitmapscan', 'off', true) AS bitmap,
       set_config('enable_seqscan', 'off', true) AS seq

-- name: kind_depth_changes
-- How the kind's unfinished count changed, per minute since %(since)s: rows that arrived (an
-- INSERT) less rows that departed (a finish, a DELETE, a move to dead_letters), from the flow
-- rows the count triggers write for every writer (migration 0022). The caller walks back from
-- the count now (metrics_state_counts).
SELECT m.minute, (m.arrived - m.departed)::bigint AS delta
FROM __schema__.jobtui_kind_flow_minutes(%(kind)s, %(since)s) m

-- name: kind_dead_count
-- Exact, from migration 0015's per-kind counts (as the Overview's).
SELECT coalesce(sum(c.dead), 0)::bigint AS dead
FROM __schema__.jobtui_dead_letter_counts() c
WHERE c.kind = %(kind)s

-- name: kind_dead_signatures
-- The kind's dead letters by error signature, most first: each signature's size from the
-- per-group counts (jobtui_dead_group_counts, exact, as the Dead letters tab's groups), its
-- last death from one probe of dead_letters_group_died, so O(signatures) index entries are
-- read instead of every dead letter of the kind (5,000 of them: 7-18 ms).
SELECT g.error_signature AS signature, g.n, l.last_at
FROM __schema__.jobtui_dead_group_counts() g
CROSS JOIN LATERAL (
  SELECT d.died_at AS last_at FROM __schema__.dead_letters d
  WHERE d.kind = g.kind AND d.error_signature = g.error_signature
  ORDER BY d.died_at DESC LIMIT 1) l
WHERE g.kind = %(kind)s
ORDER BY g.n DESC, l.last_at DESC
LIMIT %(limit)s

-- name: kind_retry_errors
-- Errors of the kind's unfinished jobs that failed an attempt and wait to run again, by the
-- error's first line, most first; `last_at` is the latest of their next runs; `total` is the
-- jobs of every group (the top %(limit)s are returned), so the count said above the groups is
-- of the same read as they are. The unlocked rows are read only when the exact counts say
-- the kind has some with attempts > 0: `retrying` (waiting, attempts > 0) or `exhausted`
-- (attempts >= max_attempts). Otherwise that scan would find nothing.
-- No index holds one kind's waiting rows with `attempts > 0`; the rows are read from the
-- smaller of two: every waiting row of the kind (jobs_pending_kind), or every kind's waiting
-- rows that were tried (jobs_waiting_tried, 0028, by id; the kind then tested on each row, so
-- `kind || ''`: the kind's index is not used for it). The counts say which is smaller. Jobs
-- scheduled far ahead (benchmarks/console_scale.py's 200,000 reminders over 30 days) are in the
-- first and never in the second: with them, the kind with 10,000 retries read 22,500 rows on
-- 11,475 heap pages (14-29 ms warm, 390-700 ms cold here) where the tried rows are 20,000 on
-- ~6,000 pages.
WITH counts AS (SELECT c.kind, c.state, c.n FROM __schema__.jobtui_job_counts() c),
pick AS (
  SELECT EXISTS (SELECT 1 FROM counts c
                 WHERE c.kind = %(kind)s AND c.state IN ('retrying', 'exhausted')) AS tried,
         (SELECT coalesce(sum(c.n), 0) FROM counts c
          WHERE c.kind = %(kind)s AND c.state = 'waiting')
         > (SELECT coalesce(sum(c.n), 0) FROM counts c
            WHERE c.state IN ('retrying', 'exhausted')) AS by_tried)
SELECT left(split_part(j.last_error, E'\n', 1), 300) AS signature, count(*) AS n,
       max(j.run_at) AS last_at, (sum(count(*)) OVER ())::bigint AS total
FROM (SELECT x.last_error, x.run_at FROM __schema__.jobs x
      WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND x.kind = %(kind)s
        AND x.attempts > 0 AND x.last_error IS NOT NULL
        AND (SELECT p.tried AND NOT p.by_tried FROM pick p)
      UNION ALL
      SELECT x.last_error, x.run_at FROM __schema__.jobs x
      WHERE x.finished_at IS NULL AND x.locked_at IS NULL
        AND (x.attempts > 0 OR x.attempts >= x.max_attempts)
        AND x.kind || '' = %(kind)s AND x.attempts > 0 AND x.last_error IS NOT NULL
        AND (SELECT p.tried AND p.by_tried FROM pick p)
      UNION ALL
      SELECT x.last_error, x.run_at FROM __schema__.jobs x
      WHERE x.finished_at IS NULL AND x.locked_at IS NOT NULL AND x.kind = %(kind)s
        AND x.attempts > 0 AND x.last_error IS NOT NULL) j
GROUP BY 1
ORDER BY n DESC, last_at DESC
LIMIT %(limit)s

-- name: kind_handler
SELECT h.max_attempts, h.timeout_s, h.backoff_base_s, h.backoff_cap_s, h.declared_by,
       h.declared_at
FROM __schema__.kind_handlers h
WHERE h.kind = %(kind)s

-- name: kind_paused
SELECT p.paused_by, p.paused_at FROM __schema__.paused_kinds p WHERE p.kind = %(kind)s

-- name: kind_limits
-- The limits in force (declared or overridden; see kind_limits' generated columns).
SELECT l.concurrency, l.per_worker, l.rate, l.period_s, l.overridden, l.overridden_by
FROM __schema__.kind_limits l
WHERE l.kind = %(kind)s AND l.limited

-- name: kind_workers
-- Workers that handle the kind (a worker with '*' handles every kind), live ones first.
SELECT w.id, w.host, w.running, w.concurrency, w.control_applied AS control,
       w.heartbeat_at < now() - make_interval(secs => w.heartbeat_timeout_s) AS stale
FROM __schema__.workers w
WHERE %(kind)s = ANY(w.kinds) OR '*' = ANY(w.kinds)
ORDER BY stale, w.id

-- name: kind_declare_handlers
-- A starting worker records its handlers' settings (jobtui.worker.supervisor); %(rows)s is a
-- JSON array of {kind, max_attempts, timeout_s, backoff_base_s, backoff_cap_s}.
INSERT INTO __schema__.kind_handlers AS h
  (kind, max_attempts, timeout_s, backoff_base_s, backoff_cap_s, declared_by)
SELECT r.kind, r.max_attempts, r.timeout_s, r.backoff_base_s, r.backoff_cap_s, %(worker)s
FROM jsonb_to_recordset(%(rows)s::jsonb)
  AS r(kind text, max_attempts int, timeout_s float8, backoff_base_s float8, backoff_cap_s float8)
ON CONFLICT (kind) DO UPDATE
SET max_attempts = EXCLUDED.max_attempts, timeout_s = EXCLUDED.timeout_s,
    backoff_base_s = EXCLUDED.backoff_base_s, backoff_cap_s = EXCLUDED.backoff_cap_s,
    declared_by = EXCLUDED.declared_by, declared_at = now()
