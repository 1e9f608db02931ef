-- Seeding for tools/screenshots.py (development only): a believable queue to photograph.
-- The console itself never writes with its own SQL.

-- name: screenshots_dead_letter
INSERT INTO __schema__.dead_letters
  (id, kind, payload, attempts, max_attempts, created_at, run_at, last_error, errors, reason,
   died_at)
VALUES (nextval(pg_get_serial_sequence('__schema__.jobs', 'id')), %(kind)s, %(payload)s,
        %(attempts)s, %(attempts)s, %(created)s, %(created)s, %(error)s, %(errors)s,
        %(reason)s, %(died)s)

-- name: screenshots_worker
INSERT INTO __schema__.workers
  (id, host, pid, kinds, concurrency, running, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(kinds)s, %(conc)s, %(running)s, %(started)s, %(hb)s)

-- name: screenshots_kind_stats
INSERT INTO __schema__.kind_stats (minute, kind, done, failed, dead, runtime_sum_ms, hist)
VALUES (%(minute)s, %(kind)s, %(done)s, %(failed)s, %(dead)s, %(sum)s, %(hist)s)

-- name: screenshots_queue_sample
INSERT INTO __schema__.queue_samples
  (minute, ready, scheduled, running, retrying, dead, oldest_ready_age_s)
VALUES (%(minute)s, %(ready)s, %(scheduled)s, %(running)s, %(retrying)s, %(dead)s, %(oldest)s)

-- name: screenshots_running
UPDATE __schema__.jobs SET locked_at = now() - make_interval(secs => %(secs)s),
       locked_by = %(worker)s, attempts = attempts + 1
WHERE id = %(id)s

-- name: screenshots_retrying
UPDATE __schema__.jobs SET attempts = %(attempts)s, last_error = %(error)s, errors = %(errors)s,
       run_at = now() + make_interval(secs => %(delay)s)
WHERE id = %(id)s

-- name: screenshots_done
UPDATE __schema__.jobs SET attempts = 1, finished_at = now() - make_interval(secs => %(secs)s)
WHERE id = %(id)s

-- name: screenshots_pause
INSERT INTO __schema__.paused_kinds (kind, paused_by) VALUES (%(kind)s, 'ops@bastion')

-- name: screenshots_job_kinds
SELECT id, kind FROM __schema__.jobs ORDER BY id

-- name: screenshots_analyze
ANALYZE __schema__.jobs
