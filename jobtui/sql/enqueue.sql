-- Producer statements. A NOTIFY goes out once per statement (not per row) and is delivered
-- when the caller's transaction commits, so idle workers wake only for committed jobs.

-- name: enqueue
WITH ins AS (
  INSERT INTO __schema__.jobs (kind, payload, run_at, max_attempts, priority)
  VALUES (%(kind)s, %(payload)s::jsonb,
          coalesce(%(run_at)s::timestamptz, now()) + %(delay)s::interval,
          %(max_attempts)s, %(priority)s)
  RETURNING id
)
SELECT id, pg_notify(%(channel)s, %(kind)s) FROM ins

-- name: enqueue_copy
COPY __schema__.jobs (kind, payload, run_at, max_attempts, priority) FROM STDIN

-- name: transaction_now
SELECT now()

-- name: notify
SELECT pg_notify(%(channel)s, %(message)s)
