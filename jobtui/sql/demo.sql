-- Statements of the demo (jobtui.demo): seeding and the headless summary.

-- name: demo_insert_dead
INSERT INTO __schema__.dead_letters
  (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error, errors,
   reason, died_at)
VALUES (nextval(pg_get_serial_sequence('__schema__.jobs', 'id')), %(kind)s, %(payload)s, 0,
        %(attempts)s, %(max_attempts)s, now() - %(age)s::interval - interval '3 minutes',
        now() - %(age)s::interval - interval '2 minutes', %(last_error)s, %(errors)s,
        %(reason)s, now() - %(age)s::interval)

-- name: demo_insert_kind_stats
INSERT INTO __schema__.kind_stats (minute, kind, done, failed, dead, runtime_sum_ms, hist)
VALUES (date_trunc('minute', now()) - make_interval(mins => %(ago)s), %(kind)s, %(done)s,
        %(failed)s, %(dead)s, %(runtime_sum_ms)s, %(hist)s)
ON CONFLICT (minute, kind) DO NOTHING

-- name: demo_insert_queue_sample
INSERT INTO __schema__.queue_samples
  (minute, ready, scheduled, running, retrying, dead, oldest_ready_age_s)
VALUES (date_trunc('minute', now()) - make_interval(mins => %(ago)s), %(ready)s, %(scheduled)s,
        %(running)s, %(retrying)s, %(dead)s, %(oldest)s)
ON CONFLICT (minute) DO NOTHING

-- name: demo_dead_count
SELECT count(*) FROM __schema__.dead_letters

-- name: demo_summary
SELECT
  (SELECT count(*) FROM __schema__.jobs
    WHERE finished_at IS NOT NULL AND cancelled_at IS NULL AND finished_at >= %(since)s)
    AS succeeded,
  (SELECT count(*) FROM __schema__.jobs
    WHERE finished_at IS NULL AND locked_at IS NULL AND attempts > 0) AS retrying,
  (SELECT count(*) FROM __schema__.dead_letters) AS dead,
  (SELECT count(*) FROM __schema__.dead_letters WHERE died_at >= %(since)s) AS new_dead,
  (SELECT count(*) FROM __schema__.jobs WHERE finished_at IS NULL) AS pending

-- name: demo_pending_count
SELECT count(*) FROM __schema__.jobs WHERE finished_at IS NULL

-- name: demo_clock
SELECT now()
