-- "Why isn't this job running?" (issue 12 item 2; jobtui/why.py). Each statement reads one
-- job's situation from the live database by primary key or small indexes; none scans `jobs`.

-- name: why_job
-- The job with what decides its fate: pause, the worker holding it (and that worker's own
-- heartbeat settings, by which rescuers judge it), its kind's limits, its effective attempt
-- limit (jobtui_max_attempts, the claim's and the sweep's one rule; the row's own beside it)
-- and whether a dead letter already has its id. The server's clock
-- comes with it so every age is the database's.
SELECT j.id, j.kind, j.priority, j.run_at, j.attempts,
       __schema__.jobtui_max_attempts((SELECT __schema__.jobtui_attempt_limits()), j.kind,
                                      j.max_attempts) AS max_attempts,
       j.max_attempts AS row_max_attempts,
       EXISTS (SELECT 1 FROM __schema__.dead_letters d WHERE d.id = j.id) AS id_in_dead,
       j.locked_at,
       j.locked_by, j.finished_at, j.cancelled_at, j.cancel_requested, now() AS now,
       p.paused_at, p.paused_by,
       w.id IS NOT NULL AS worker_known,
       extract(epoch FROM now() - w.heartbeat_at)::float8 AS heartbeat_age_s,
       w.heartbeat_timeout_s,
       l.limited AS limited, l.concurrency, l.per_worker, l.rate, l.period_s,
       CASE WHEN l.rate IS NULL THEN NULL ELSE
         least(l.rate::float8, l.tokens + l.rate::float8 / l.period_s
               * greatest(0, extract(epoch FROM statement_timestamp() - l.tokens_at)))
       END AS tokens
FROM __schema__.jobs j
LEFT JOIN __schema__.paused_kinds p ON p.kind = j.kind
LEFT JOIN __schema__.workers w ON w.id = j.locked_by
LEFT JOIN __schema__.kind_limits l ON l.kind = j.kind
WHERE j.id = %(id)s

-- name: why_dead
-- A job that is no longer in `jobs` may be a dead letter (same id).
SELECT d.id, d.kind, d.reason, d.died_at, d.attempts, d.max_attempts, now() AS now
FROM __schema__.dead_letters d
WHERE d.id = %(id)s

-- name: why_workers
-- Every worker that handles the kind (its `kinds`, or `*`), live or not (judged by its own
-- heartbeat timeout), with what it runs: all its jobs, the threads of handlers that overran
-- their timeout and still hold a slot (`abandoned`), and its jobs of this kind (the small
-- partial index of running jobs).
SELECT w.id,
       now() - w.heartbeat_at <= make_interval(secs => w.heartbeat_timeout_s) AS live,
       w.running, w.abandoned, w.concurrency, w.control,
       (SELECT count(*) FROM __schema__.jobs r
        WHERE r.locked_by = w.id AND r.finished_at IS NULL AND r.locked_at IS NOT NULL
          AND r.kind = %(kind)s) AS running_kind
FROM __schema__.workers w
WHERE %(kind)s = ANY(w.kinds) OR '*' = ANY(w.kinds)
ORDER BY w.id

-- name: why_running_kind
-- Jobs of the kind locked and unfinished right now, on any worker (what a concurrency limit
-- counts, as limits_claim does).
SELECT count(*) AS running FROM __schema__.jobs r
WHERE r.kind >= %(kind)s AND r.kind <= %(kind)s
  AND r.finished_at IS NULL AND r.locked_at IS NOT NULL

-- name: why_position
-- The job's place in line for its kind: claimable jobs of the kind that a claim takes before
-- it, plus one. Claim order is worker_claim's (priority DESC, run_at, id) for every kind:
-- jobtui_claim_limited takes a limited kind's jobs in that order too (migration 0029; a limit
-- bounds how many run, not which goes first), FIFO by id among equal priority and run_at.
-- Across kinds a worker fills its slots in that order too (migration 0030), so jobs of the
-- other kinds a worker handles can go ahead of this one: the place is in its kind's own line.
-- Claimable as those claims say: unlocked, unfinished, due, attempts left
-- (jobtui_max_attempts), no cancel request.
-- Each branch is one range of jobs_claim_kind, in that order, from the head of the kind's
-- line to the job (higher priorities, then its own priority before it), so the read grows with
-- the job's place, not with the kind's waiting rows: one row-wise comparison over the whole
-- line read every due row of the kind (10,000 of them: 15-57 ms of each job detail at position
-- 1, benchmarks/console_scale.py; now 0.05 ms there, 7-15 ms at position 5,000-10,000). The
-- kind is matched with `=` so that the priority and run_at bound the scan (a range of the kind
-- would leave them as filters).
SELECT count(*) + 1 AS position
FROM (SELECT x.run_at, x.attempts, x.kind, x.max_attempts, x.cancel_requested
      FROM __schema__.jobs x
      WHERE x.kind = %(kind)s
        AND x.finished_at IS NULL AND x.locked_at IS NULL AND x.priority > %(priority)s
      UNION ALL
      SELECT x.run_at, x.attempts, x.kind, x.max_attempts, x.cancel_requested
      FROM __schema__.jobs x
      WHERE x.kind = %(kind)s
        AND x.finished_at IS NULL AND x.locked_at IS NULL AND x.priority = %(priority)s
        AND (x.run_at, x.id) < (%(run_at)s::timestamptz, %(id)s::bigint)) x
WHERE x.run_at <= now() AND NOT x.cancel_requested
  AND x.attempts < __schema__.jobtui_max_attempts((SELECT __schema__.jobtui_attempt_limits()),
                                                   x.kind, x.max_attempts)

-- name: why_any_live_worker
-- Whether any worker is live (judged by its own heartbeat timeout): the sweep that moves jobs
-- with no attempt left runs on every worker, whatever kinds it handles.
SELECT EXISTS (SELECT 1 FROM __schema__.workers w
               WHERE now() - w.heartbeat_at <= make_interval(secs => w.heartbeat_timeout_s))
       AS live
