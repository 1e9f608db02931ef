-- Statements of the bundled worker (jobtui/worker/). Every write that ends a job re-checks
-- that this worker still holds the same attempt (`locked_by = me AND attempts = claimed`), so
-- a job rescued from under a worker is never completed twice.
-- Batch writes find their rows by `j.id = ANY(ids)` (an index scan by id, whatever the
-- statistics say) and look each row's attempt (and data) up in a jsonb object keyed by id
-- (`%(by_id)s`, a binary search per row). No join: joined to unnest(ids, attempts), the
-- planner either rescanned the whole id list for every row (a generic plan, 460 ms per 1000
-- jobs) or, with statistics taken while nothing was locked (`locked_by = me` estimated at one
-- row), scanned the whole table for every batch (40 ms per 200 jobs at 20 000 rows).

-- name: worker_claim
-- Batch claim of handled, unpaused kinds. The sub-select is fenced (`= ANY(ARRAY(…))` runs it
-- once, as an InitPlan) so the planner cannot turn it into a nested loop that locks more than
-- `limit` rows; it walks the partial index jobs_claim in (priority DESC, run_at, id) order and
-- the UPDATE then finds the rows by primary key. Paused kinds, and kinds with a limit (issue
-- 13: claim_limited takes those; read here so an operator's new limit applies at once), are
-- removed from the kinds list
-- rather than filtered per row: a `kind <> ALL(…)` filter is estimated to keep almost no rows
-- when there are few kinds, and the planner then sorts every pending row instead.
-- The attempt limit is the effective one, by the one rule of jobtui_max_attempts (migration
-- 0023: the kind's handler declaration in kind_handlers, else the row's), and the claim
-- writes it into the row, so the handler is told the limit it ran under. A row with a cancel
-- request is never claimed (a cancel wins over every path back to running).
-- Those conditions are the sub-select's alone, and enough: under READ COMMITTED its FOR UPDATE
-- locks the newest version of each row and re-checks every condition on it (a row whose cancel,
-- claim or completion committed after the statement's snapshot is skipped), and nobody can
-- change a row this statement holds locked, so the UPDATE, which takes only the ids it
-- returned, re-checks nothing. Re-checked there, they cost a claim about 140 µs (of ~650,
-- benchmarks.write_cost --in-server) whenever the UPDATE's plan scans the table (a plan made
-- while the table was small): the attempt limit was looked up in jsonb for every row.
-- The payload comes back as text and is decoded job by job (statements.decode_payload): one
-- payload Python cannot decode (nested too deeply) must fail its own job, not the whole batch.
-- Payloads come back only while the reply's running total stays within 64 KiB (well inside
-- the sockets' buffers); the others come back NULL and are read after the claim committed
-- (worker_claimed_payloads): the server sends a reply before it commits, so a reply larger
-- than the sockets' buffers, to a worker that froze, would keep the claimed rows locked, and
-- skipped by every other worker, for as long as it stays frozen (issue 25).
WITH am AS MATERIALIZED (
  SELECT __schema__.jobtui_attempt_limits() AS m
), claimed AS (
UPDATE __schema__.jobs j
SET locked_at = now(), locked_by = %(worker)s, attempts = j.attempts + 1,
    max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
WHERE j.id = ANY(ARRAY(
    SELECT x.id
    FROM __schema__.jobs x
    WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND x.run_at <= now()
      AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind, x.max_attempts)
      AND NOT x.cancel_requested
      AND x.kind = ANY(ARRAY(SELECT unnest(%(kinds)s::text[])
                             EXCEPT SELECT p.kind FROM __schema__.paused_kinds p
                             EXCEPT SELECT l.kind FROM __schema__.kind_limits l
                                    WHERE l.limited))
    ORDER BY x.priority DESC, x.run_at, x.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED))
RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts
)
SELECT c.id, c.kind,
       CASE WHEN sum(octet_length(c.payload)) OVER (ORDER BY c.id) <= 65536
            THEN c.payload END AS payload,
       c.attempts, c.max_attempts
FROM claimed c

-- name: worker_claim_per_kind
-- worker_claim for a worker some of whose kinds have a limit (they are left out here, and
-- claimed by claim_limited): each remaining kind is walked on its own through jobs_claim_kind
-- (kind, priority DESC, run_at, id), up to `limit` rows each, and the walks are merged in
-- claim order, so a large backlog of a limited kind ahead of the others costs nothing (see
-- migration 0007). The kind is matched as a one-value range so the planner keeps to that
-- index (see limits_claim). Everything else as in worker_claim.
WITH am AS MATERIALIZED (
  SELECT __schema__.jobtui_attempt_limits() AS m
), claimed AS (
UPDATE __schema__.jobs j
SET locked_at = now(), locked_by = %(worker)s, attempts = j.attempts + 1,
    max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
WHERE j.id = ANY(ARRAY(
    SELECT c.id
    FROM (SELECT unnest(%(kinds)s::text[])
          EXCEPT SELECT p.kind FROM __schema__.paused_kinds p
          EXCEPT SELECT l.kind FROM __schema__.kind_limits l WHERE l.limited) AS k(kind)
    CROSS JOIN LATERAL (
      SELECT x.id, x.priority, x.run_at
      FROM __schema__.jobs x
      WHERE x.kind >= k.kind AND x.kind <= k.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind, x.max_attempts)
        AND NOT x.cancel_requested
      ORDER BY x.kind, x.priority DESC, x.run_at, x.id
      LIMIT %(limit)s
      FOR UPDATE SKIP LOCKED) c
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT %(limit)s))
RETURNING j.id, j.kind, j.payload::text AS payload, j.attempts, j.max_attempts
)
SELECT c.id, c.kind,
       CASE WHEN sum(octet_length(c.payload)) OVER (ORDER BY c.id) <= 65536
            THEN c.payload END AS payload,
       c.attempts, c.max_attempts
FROM claimed c

-- name: worker_claimed_payloads
-- The payloads a claim left out of its reply (past its byte budget), read after it committed.
SELECT j.id, j.payload::text FROM __schema__.jobs j WHERE j.id = ANY(%(ids)s::bigint[])

-- name: worker_complete
-- Group commit of successful jobs: one statement for every completion buffered so far.
UPDATE __schema__.jobs j
SET finished_at = now()
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
RETURNING j.id

-- name: worker_cancelled
-- Jobs whose handler was cancelled at an operator's request.
UPDATE __schema__.jobs j
SET finished_at = now(), cancelled_at = now()
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
RETURNING j.id

-- name: worker_release
-- Jobs interrupted by this worker's shutdown (or claimed but never started): back to ready,
-- the attempt given back because the job did not fail, and other workers woken. A job whose
-- cancel was requested meanwhile ends cancelled instead (a cancel wins), with the cancel noted
-- in its history.
WITH released AS (
  UPDATE __schema__.jobs j
  SET locked_at    = CASE WHEN j.cancel_requested THEN j.locked_at END,
      locked_by    = CASE WHEN j.cancel_requested THEN j.locked_by END,
      attempts     = CASE WHEN j.cancel_requested THEN j.attempts
                          ELSE greatest(j.attempts - 1, 0) END,
      finished_at  = CASE WHEN j.cancel_requested THEN now() END,
      cancelled_at = CASE WHEN j.cancel_requested THEN now() END,
      errors       = CASE WHEN j.cancel_requested THEN j.errors || jsonb_build_array(
                       jsonb_build_object('attempt', j.attempts, 'at', to_jsonb(now()),
                         'started', to_jsonb(j.locked_at),
                         'error', 'Cancelled: cancel requested while the worker was stopping',
                         'traceback', NULL, 'worker', %(worker)s::text))
                     ELSE j.errors END
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
    AND j.attempts = (%(by_id)s::jsonb ->> j.id::text)::int
  RETURNING j.id, j.cancel_requested
)
SELECT id, CASE WHEN cancel_requested THEN NULL ELSE pg_notify(%(channel)s, 'requeue') END
FROM released

-- name: worker_release_orphans
-- Rows locked by this worker that it does not know about (a claim whose reply was lost with
-- the connection): back to ready with the attempt given back, or cancelled if a cancel was
-- requested (a cancel wins).
WITH released AS (
  UPDATE __schema__.jobs j
  SET locked_at    = CASE WHEN j.cancel_requested THEN j.locked_at END,
      locked_by    = CASE WHEN j.cancel_requested THEN j.locked_by END,
      attempts     = CASE WHEN j.cancel_requested THEN j.attempts
                          ELSE greatest(j.attempts - 1, 0) END,
      finished_at  = CASE WHEN j.cancel_requested THEN now() END,
      cancelled_at = CASE WHEN j.cancel_requested THEN now() END
  WHERE j.locked_by = %(worker)s AND j.finished_at IS NULL AND j.locked_at IS NOT NULL
    AND j.id <> ALL(%(known)s::bigint[])
  RETURNING j.id
)
SELECT id FROM released

-- name: worker_retry
-- Failed attempts that will be retried: back-off in run_at, error appended, lock cleared. A
-- job whose cancel was requested ends cancelled instead (a cancel wins over the retry); the
-- failure stays in its history. The effective max_attempts was written by the claim.
-- `by_id`: {"id": [attempt, delay_s, error, traceback], …}. Returns (id, cancelled).
UPDATE __schema__.jobs j
SET run_at = CASE WHEN j.cancel_requested THEN j.run_at
                  ELSE now() + make_interval(secs => (%(by_id)s::jsonb -> j.id::text ->> 1)::float8) END,
    locked_at    = CASE WHEN j.cancel_requested THEN j.locked_at END,
    locked_by    = CASE WHEN j.cancel_requested THEN j.locked_by END,
    finished_at  = CASE WHEN j.cancel_requested THEN now() END,
    cancelled_at = CASE WHEN j.cancel_requested THEN now() END,
    last_error = %(by_id)s::jsonb -> j.id::text ->> 2,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
      'attempt', j.attempts, 'at', to_jsonb(now()), 'started', to_jsonb(j.locked_at),
      'error', %(by_id)s::jsonb -> j.id::text -> 2,
      'traceback', %(by_id)s::jsonb -> j.id::text -> 3, 'worker', %(worker)s::text))
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
  AND j.attempts = (%(by_id)s::jsonb -> j.id::text ->> 0)::int
RETURNING j.id, j.cancel_requested

-- name: worker_bury
-- Failed last attempts: moved to dead_letters (jobtui_move_to_dead, the one definition of
-- that move) keeping the id, with the final error appended to the history. A job whose cancel
-- was requested ends cancelled instead, its failure in its history (a cancel wins).
-- `by_id`: {"id": [attempt, error, traceback], …}. Returns (id, fate).
WITH mine AS MATERIALIZED (
  SELECT j.id, j.attempts, j.cancel_requested,
         jsonb_build_object(
           'attempt', j.attempts, 'at', to_jsonb(now()), 'started', to_jsonb(j.locked_at),
           'error', %(by_id)s::jsonb -> j.id::text -> 1,
           'traceback', %(by_id)s::jsonb -> j.id::text -> 2,
           'worker', %(worker)s::text) AS entry
  FROM __schema__.jobs j
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.locked_by = %(worker)s AND j.finished_at IS NULL
    AND j.attempts = (%(by_id)s::jsonb -> j.id::text ->> 0)::int
  ORDER BY j.id
  FOR UPDATE
), cancelled AS (
  UPDATE __schema__.jobs j
  SET finished_at = now(), cancelled_at = now(),
      last_error = %(by_id)s::jsonb -> j.id::text ->> 1,
      errors = j.errors || jsonb_build_array(mine.entry)
  FROM mine
  WHERE j.id = mine.id AND mine.cancel_requested
  RETURNING j.id
)
SELECT moved_id, 'dead' FROM __schema__.jobtui_move_to_dead(
  ARRAY(SELECT id FROM mine WHERE NOT cancel_requested),
  (SELECT jsonb_object_agg(id::text, jsonb_build_object('entry', entry)) FROM mine),
  'failed')
UNION ALL
SELECT id, 'cancelled' FROM cancelled

-- name: worker_heartbeat
-- The worker's row: its own liveness settings (rescuers judge its jobs by these), what it runs,
-- threads it abandoned and outcomes it could not write. Returns the server's clock, which the
-- worker uses for its per-minute statistics. heartbeat_at is the clock when the row is written,
-- not when the statement began: one that waited for a lock on `workers` (rescuers read it) must
-- not commit a heartbeat already old.
INSERT INTO __schema__.workers AS w
  (id, host, pid, kinds, concurrency, running, heartbeat_interval_s, heartbeat_timeout_s,
   abandoned, outcome_errors, last_outcome_error, wakeup_mode, wakeup_note, listen_connected,
   last_wakeup_at, poll_interval_s)
VALUES (%(worker)s, %(host)s, %(pid)s, %(kinds)s::text[], %(concurrency)s, %(running)s,
        %(heartbeat_interval)s, %(heartbeat_timeout)s, %(abandoned)s, %(outcome_errors)s,
        %(last_outcome_error)s, %(wakeup_mode)s, %(wakeup_note)s, %(listen_connected)s,
        %(last_wakeup_at)s, %(poll_interval_s)s)
ON CONFLICT (id) DO UPDATE
SET heartbeat_at = clock_timestamp(), running = EXCLUDED.running, kinds = EXCLUDED.kinds,
    concurrency = EXCLUDED.concurrency,
    heartbeat_interval_s = EXCLUDED.heartbeat_interval_s,
    heartbeat_timeout_s = EXCLUDED.heartbeat_timeout_s,
    abandoned = EXCLUDED.abandoned, outcome_errors = EXCLUDED.outcome_errors,
    last_outcome_error = EXCLUDED.last_outcome_error,
    wakeup_mode = EXCLUDED.wakeup_mode, wakeup_note = EXCLUDED.wakeup_note,
    listen_connected = EXCLUDED.listen_connected, last_wakeup_at = EXCLUDED.last_wakeup_at,
    poll_interval_s = EXCLUDED.poll_interval_s
RETURNING extract(epoch FROM now())::float8 AS server_epoch

-- name: worker_probe_notify
-- The listener's self-NOTIFY probe (jobtui/worker/listener.py), sent on another connection.
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: worker_unregister
DELETE FROM __schema__.workers WHERE id = %(worker)s

-- name: worker_my_jobs
-- What this worker holds according to the database: cancellations to deliver, and jobs
-- rescued from under it (absent here) whose handlers must stop.
SELECT id, attempts, cancel_requested
FROM __schema__.jobs
WHERE locked_by = %(worker)s AND finished_at IS NULL AND locked_at IS NOT NULL

-- name: worker_rescue
-- Jobs whose owner is dead, judged by the owner's own settings: a `workers` row whose
-- heartbeat is older than that row's `heartbeat_timeout_s`, or no row at all for its
-- locked_by (workers register before they claim). Rows locked without a locked_by (the
-- article's consumer, which never heartbeats) are rescued after the lock timeout.
-- The owner's row is locked first (FOR UPDATE SKIP LOCKED): READ COMMITTED then judges its
-- staleness again on the newest committed version (a heartbeat that committed after this
-- statement's snapshot, e.g. one held back by a lock on `workers`, saves its jobs), a row whose
-- heartbeat is being written is skipped, and no heartbeat can commit until this rescue has.
-- Only jobs whose owner row was so locked (or who have no owner row) are candidates, read
-- through jobs_running in its own order (locked_by, locked_at), up to 1,000 a round: running
-- rows are few, and any other order (id, through jobs_pkey) would step over every waiting and
-- finished row whenever fewer than 1,000 qualify (15 s at 2M waiting rows). They are
-- read, then locked only if they are still the same
-- attempt (same attempts, locked_at, locked_by), so a job rescued and re-claimed meanwhile is
-- left alone. Then, per job:
--   cancel requested            -> ends cancelled (a cancel wins), the loss in its history;
--   attempts >= max_attempts    -> dead_letters, reason worker_lost (by jobtui_max_attempts;
--     never refused: an id an older dead letter holds moves under a new one, migration 0023);
--   otherwise                   -> back to ready with a "WorkerLost" entry in its history.
WITH stale AS MATERIALIZED (
  SELECT w.id
  FROM __schema__.workers w
  WHERE w.id <> %(worker)s
    AND w.heartbeat_at < now() - make_interval(secs => w.heartbeat_timeout_s)
    AND EXISTS (SELECT 1 FROM __schema__.jobs x
                WHERE x.locked_by = w.id AND x.finished_at IS NULL AND x.locked_at IS NOT NULL)
  FOR UPDATE OF w SKIP LOCKED
), cand AS MATERIALIZED (
  SELECT j.id, j.attempts, j.locked_at, j.locked_by
  FROM __schema__.jobs j
  LEFT JOIN __schema__.workers w ON w.id = j.locked_by
  WHERE j.finished_at IS NULL AND j.locked_at IS NOT NULL
    AND j.locked_by IS DISTINCT FROM %(worker)s
    AND CASE WHEN w.id IS NOT NULL THEN w.id IN (SELECT id FROM stale)
             WHEN j.locked_by IS NOT NULL THEN true  -- its worker's row is gone: so is it
             ELSE j.locked_at < now() - make_interval(secs => %(lock_timeout)s) END
  ORDER BY j.locked_by, j.locked_at
  LIMIT 1000
), lost AS MATERIALIZED (
  SELECT j.id, j.kind, j.locked_by, j.cancel_requested,
         j.attempts >= __schema__.jobtui_max_attempts((SELECT __schema__.jobtui_attempt_limits()),
                                                      j.kind, j.max_attempts) AS exhausted,
         CASE WHEN j.locked_by IS NULL THEN %(lock_msg)s ELSE %(lost_msg)s END AS msg,
         j.attempts, j.locked_at
  FROM __schema__.jobs j JOIN cand c ON c.id = j.id
  WHERE j.attempts = c.attempts AND j.locked_at = c.locked_at
    AND j.locked_by IS NOT DISTINCT FROM c.locked_by AND j.finished_at IS NULL
  FOR UPDATE OF j SKIP LOCKED
), entries AS MATERIALIZED (
  SELECT lost.*, jsonb_build_object('attempt', attempts, 'at', to_jsonb(now()), 'error', msg,
                                    'started', to_jsonb(locked_at),
                                    'traceback', NULL, 'worker', locked_by) AS entry
  FROM lost
), dead AS (
  SELECT moved_id AS id, moved_kind AS kind FROM __schema__.jobtui_move_to_dead(
    ARRAY(SELECT id FROM entries WHERE exhausted AND NOT cancel_requested),
    (SELECT jsonb_object_agg(id::text, jsonb_build_object('entry', entry)) FROM entries),
    'worker_lost')
), ended AS (
  UPDATE __schema__.jobs j
  SET locked_at    = CASE WHEN e.cancel_requested THEN j.locked_at END,
      locked_by    = CASE WHEN e.cancel_requested THEN j.locked_by END,
      finished_at  = CASE WHEN e.cancel_requested THEN now() END,
      cancelled_at = CASE WHEN e.cancel_requested THEN now() END,
      last_error = e.msg,
      errors = j.errors || jsonb_build_array(e.entry)
  FROM entries e
  WHERE j.id = e.id AND (e.cancel_requested OR NOT e.exhausted)
  RETURNING j.id, j.kind, CASE WHEN e.cancel_requested THEN 'cancelled' ELSE 'retry' END AS fate
)
SELECT 'dead' AS fate, id, kind FROM dead
UNION ALL
SELECT fate, id, kind FROM ended

-- name: worker_bury_exhausted
-- Unlocked, unfinished rows with no attempt left, of ANY kind (issue 15: a consumer written
-- from the article gives up by leaving the row so, and such rows can never run): moved to
-- dead_letters. Every row is judged by the one rule of jobtui_max_attempts (migration 0023:
-- its kind's handler declaration, else the row's max_attempts), the rule the claim uses, so a
-- lowered handler limit never strands a job the claim will not take. Rows of kinds this worker
-- handles keep reason `exhausted`; rows of other kinds (nothing jobtui runs) get reason
-- `exhausted by another consumer`. One statement, rows taken with
-- SKIP LOCKED and moved by jobtui_move_to_dead, so workers sweeping at once never move a row
-- twice. A row whose id a dead letter already holds moves too, under a new id (migration 0023).
-- Only a row tried before or exhausted by its own max_attempts can be exhausted (a handler's
-- limit is at least 1): that condition is jobs_waiting_tried's predicate (migration 0028), so
-- the sweep reads those few rows, not every waiting one.
WITH am AS MATERIALIZED (
  SELECT __schema__.jobtui_attempt_limits() AS m
), pick AS MATERIALIZED (
  SELECT x.id, x.kind = ANY(%(kinds)s::text[]) AS ours,
         __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind, x.max_attempts) AS lim
  FROM __schema__.jobs x
  WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND NOT x.cancel_requested
    AND (x.attempts > 0 OR x.attempts >= x.max_attempts)
    AND x.attempts >= __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind, x.max_attempts)
  ORDER BY x.id
  LIMIT 1000
  FOR UPDATE SKIP LOCKED
), mine AS (
  SELECT moved_id, moved_kind FROM __schema__.jobtui_move_to_dead(
    ARRAY(SELECT id FROM pick WHERE ours),
    (SELECT jsonb_object_agg(id::text, jsonb_build_object('max_attempts', lim)) FROM pick),
    'exhausted')
), others AS (
  SELECT moved_id, moved_kind FROM __schema__.jobtui_move_to_dead(
    ARRAY(SELECT id FROM pick WHERE NOT ours), '{}'::jsonb, 'exhausted by another consumer')
)
SELECT moved_id, moved_kind FROM mine
UNION ALL
SELECT moved_id, moved_kind FROM others

-- name: worker_finish_cancelled
-- Unlocked rows with a cancel request (left so by an older worker, which released or retried
-- them without looking): they end cancelled, as the cancel asked. Read through
-- jobs_waiting_cancel (migration 0028), which holds just these rows. The UPDATE re-checks
-- nothing but the ids: the sub-select's FOR UPDATE judged each row on its newest version and
-- holds it until the statement ends (a re-check in the UPDATE let the planner of a table
-- without statistics read every waiting row through jobs_pending to find them).
UPDATE __schema__.jobs j
SET finished_at = now(), cancelled_at = now()
WHERE j.id = ANY(ARRAY(
    SELECT x.id FROM __schema__.jobs x
    WHERE x.finished_at IS NULL AND x.locked_at IS NULL AND x.cancel_requested
    LIMIT 1000
    FOR UPDATE SKIP LOCKED))
RETURNING j.id

-- name: worker_forget_stale_workers
-- Rows of workers that have not heartbeat for an hour (their jobs were rescued long ago).
DELETE FROM __schema__.workers
WHERE heartbeat_at < now() - interval '1 hour' AND id <> %(worker)s

-- name: worker_prune
-- One batch of finished jobs older than the retention window; dead letters are never pruned.
WITH gone AS (
  DELETE FROM __schema__.jobs j
  WHERE j.id IN (
    SELECT x.id FROM __schema__.jobs x
    WHERE x.finished_at < now() - make_interval(secs => %(retention)s)
    ORDER BY x.finished_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*) FROM gone

-- name: worker_stats_flush
-- Per-minute, per-kind figures accumulated in memory, added in one statement. `done` counts
-- successful runs and runtime_sum_ms/hist describe those runs; `failed` counts every failed
-- attempt (the last one too); `dead` counts jobs moved to dead letters by the worker.
INSERT INTO __schema__.kind_stats AS s (minute, kind, done, failed, dead, runtime_sum_ms, hist)
SELECT d.minute, d.kind, d.done, d.failed, d.dead, d.runtime_sum_ms, d.hist
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS d(minute timestamptz, kind text, done int, failed int, dead int,
          runtime_sum_ms float8, hist int[])
ORDER BY d.minute, d.kind  -- one fixed lock order for every worker: no deadlocks
ON CONFLICT (minute, kind) DO UPDATE
SET done = s.done + EXCLUDED.done,
    failed = s.failed + EXCLUDED.failed,
    dead = s.dead + EXCLUDED.dead,
    runtime_sum_ms = s.runtime_sum_ms + EXCLUDED.runtime_sum_ms,
    hist = ARRAY(
      SELECT coalesce(a, 0) + coalesce(b, 0)
      FROM unnest(s.hist, EXCLUDED.hist) WITH ORDINALITY AS t(a, b, i)
      ORDER BY i)

-- name: worker_queue_sample
-- One sample of the queue per minute, by whichever worker gets there first. The figures are
-- the Overview's: its state counts (metrics_state_counts, from the exact count rows: a few rows
-- a kind, whatever the backlog) summed over the kinds, so `ready` and `scheduled` leave out the
-- exhausted rows as the Overview does; the oldest ready job is the first entry of jobs_pending
-- that may still run; dead letters from their count rows. It used to count every
-- unfinished row (38 ms a sample at 200,000 waiting, against 2 ms now, measured 2026-12-07 on
-- a quiet 2-core machine; tests/test_housekeeping_scale.py bounds its buffers). The NOT
-- EXISTS is checked first, so later workers in the same minute read nothing else.
INSERT INTO __schema__.queue_samples
  (minute, ready, scheduled, running, retrying, dead, oldest_ready_age_s)
SELECT date_trunc('minute', now()),
       coalesce(sum(s.ready), 0), coalesce(sum(s.scheduled), 0),
       coalesce(sum(s.running), 0), coalesce(sum(s.retrying), 0),
       (SELECT coalesce(sum(d.dead), 0) FROM __schema__.jobtui_dead_letter_counts() d),
       (SELECT extract(epoch FROM now() - o.run_at)::float8
        FROM __schema__.jobs o
        WHERE o.finished_at IS NULL AND o.locked_at IS NULL
          AND o.attempts < o.max_attempts AND o.run_at <= now()
        ORDER BY o.run_at
        LIMIT 1)
FROM (
__statement:metrics_state_counts__
) s
WHERE NOT EXISTS (SELECT 1 FROM __schema__.queue_samples q
                  WHERE q.minute = date_trunc('minute', now()))
HAVING NOT EXISTS (SELECT 1 FROM __schema__.queue_samples q
                   WHERE q.minute = date_trunc('minute', now()))
ON CONFLICT (minute) DO NOTHING

-- name: worker_analyze
-- Run when a claim was slow: fresh statistics let the planner walk jobs_claim in order
-- instead of sorting every due row (see SLOW_CLAIM_S in jobtui/worker/dispatcher.py). With the
-- owner's rights (migration 0032), so that the worker role may run it too.
SELECT __schema__.jobtui_analyze_jobs()

-- name: worker_analyze_plain
-- worker_analyze on a schema before 0032, or for a role not granted it yet: the table's owner
-- analyses, any other role gets a WARNING and no statistics.
ANALYZE __schema__.jobs

-- name: worker_jobs_vacuum_due
-- Whether the housekeeper should VACUUM `jobs` because autovacuum will not: autovacuum is off
-- for the table (the server switch or the table's own `autovacuum_enabled`), the table has
-- more dead row versions than the count at which autovacuum would have vacuumed it
-- (dbhealth_tables' rule: threshold + scale factor × tuples, the table's own settings first)
-- and more than the `min_dead` parameter, the last manual VACUUM (any worker's) ended more
-- than `pause_s` seconds ago, no VACUUM of it is under way (another worker's, or autovacuum's
-- anti-wraparound one: a second would only be skipped for the lock), and this role may vacuum
-- it (owner or superuser; otherwise PostgreSQL only warns and skips). Why: every claimed and finished row leaves its
-- waiting version's entries in the claim indexes, and a claim walks them from the start of the
-- index until a VACUUM removes them. Without one, a drain of 2,000,000 jobs walked ~1,000,000
-- dead entries a claim half-way through (7 ms a claim of 100, against 2.7 ms at the start;
-- the index scan 16.6 ms, then 0.5 ms after one VACUUM; 2026-12-07, PostgreSQL 15).
SELECT coalesce(bool_and(NOT t.autovacuum AND t.dead > greatest(t.vacuum_trigger, %(min_dead)s)
                         AND coalesce(t.last_vacuum
                                      < now() - make_interval(secs => %(pause_s)s::float8), true)
                         AND pg_has_role(c.relowner, 'USAGE')
                         AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum p
                                         WHERE p.relid = c.oid)), false)
FROM (
__statement:dbhealth_tables__
) t
JOIN pg_class c ON c.oid = '__schema__.jobs'::regclass

-- name: worker_vacuum_jobs
-- The VACUUM worker_jobs_vacuum_due asks for. SKIP_LOCKED: another worker's VACUUM, an
-- autovacuum or DDL holding the table is enough, and nothing waits for a lock (PostgreSQL
-- then only sends a WARNING, SQLSTATE 55P03, which WorkerDB.vacuum_jobs listens for).
VACUUM (SKIP_LOCKED) __schema__.jobs

-- name: worker_vacuum_blocks
-- Whether a VACUUM of `jobs` holds up a session that wants a lock on it strong enough to stop
-- claims and INSERTs (SHARE and above: an ALTER TABLE, a CREATE INDEX, a migration), which
-- every later claim and INSERT then queues behind. PostgreSQL cancels autovacuum for such a
-- waiter; the housekeeper cancels its own VACUUM when this is true. Waiters for SHARE UPDATE
-- EXCLUSIVE (an ANALYZE, another VACUUM, CREATE INDEX CONCURRENTLY) stop nobody and are left
-- to wait: yielding to every ANALYZE would keep a large table's VACUUM from ever ending.
SELECT EXISTS (
  SELECT 1
  FROM pg_stat_progress_vacuum v
  JOIN pg_locks l ON l.relation = v.relid AND NOT l.granted
                 AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock',
                                'AccessExclusiveLock')
  WHERE v.relid = '__schema__.jobs'::regclass AND v.pid = ANY (pg_blocking_pids(l.pid))
)

-- name: worker_session_timeouts
-- Set once per worker connection: no statement may hang for ever (a claim on a half-open
-- connection, a housekeeping statement behind a lock). Values are PostgreSQL durations.
-- And the server ends this session on its own if the worker freezes (SIGSTOP, a VM pause, a
-- network split; issue 25): a transaction left idle (idle_in_transaction_session_timeout),
-- a peer that stops answering keepalives (tcp_keepalives_*) or acknowledging what the server
-- sends (tcp_user_timeout, ms) ends the session and its locks within the worker's heartbeat
-- timeout (jobtui.worker.link.frozen_session_settings).
-- And the counting triggers do not fold on the worker's connections (migration 0019): its
-- housekeeper folds every heartbeat interval, so claims and completions never wait for a fold.
SELECT set_config('statement_timeout', %(statement_timeout)s, false),
       set_config('lock_timeout', %(lock_timeout)s, false),
       set_config('idle_in_transaction_session_timeout', %(idle_in_transaction)s, false),
       set_config('tcp_keepalives_idle', %(keepalives_idle)s, false),
       set_config('tcp_keepalives_interval', %(keepalives_interval)s, false),
       set_config('tcp_keepalives_count', %(keepalives_count)s, false),
       set_config('tcp_user_timeout', %(tcp_user_timeout)s, false),
       set_config('jobtui.fold_in_trigger', 'off', false)

-- name: worker_fold_counts
-- Merge the delta rows that migration 0016's triggers append to job_counts and job_flow (one
-- or two per statement that writes `jobs`) and dead_group_counts, so the snapshot and the Dead
-- letters tab sum a few hundred rows. Since migration 0019 the triggers never fold on the
-- worker's own connections (worker_session_timeouts): this, every heartbeat interval and at
-- least every 5 s (jobtui/worker/housekeeper.py), does.
SELECT __schema__.jobtui_fold_job_counts()

-- name: worker_vacuum_counts
-- Each fold deletes the rows it merged; without a VACUUM their space is never reused, so with
-- autovacuum off the tables the snapshot reads would grow by ~100 bytes per write to `jobs`.
-- Tiny tables, a millisecond or two; SKIP_LOCKED: another worker's VACUUM is enough. A role
-- that does not own them gets a warning from PostgreSQL and autovacuum does the work.
VACUUM (SKIP_LOCKED) __schema__.job_counts, __schema__.job_flow, __schema__.dead_group_counts
