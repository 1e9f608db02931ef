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

-- name: enqueue_copy_defaults
-- A batch whose jobs all have the default options, into a table whose column defaults are
-- those options (transaction_now says so): the server fills run_at, max_attempts and priority.
COPY __schema__.jobs (kind, payload) FROM STDIN

-- name: transaction_now
-- The transaction's now() (run_at of a job given none), and whether `jobs`' own defaults are
-- the options a job given none gets: run_at now() (that same instant), max_attempts and
-- priority as the caller's defaults. jobtui's migrations write them; a table extended in place
-- (the article's, as its owner made it) may have others or none, and then every column is sent.
SELECT now(), (
  SELECT count(*) = 3
  FROM pg_attribute a JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attrelid = '__schema__.jobs'::regclass AND NOT a.attisdropped
    AND (a.attname::text, pg_get_expr(d.adbin, d.adrelid)) IN (
      ('run_at', 'now()'),
      ('max_attempts', %(max_attempts)s::text),
      ('priority', %(priority)s::text))
) AS defaults_match

-- name: notify
SELECT pg_notify(%(channel)s, %(message)s)

-- name: enqueue_unique
-- A keyed job: inserted unless an unfinished job of the same (kind, key) exists or, with a
-- window, one finished within it. The partial unique index jobs_unique_key is what enforces
-- it: a producer racing on the key waits (ON CONFLICT) for the other to commit or roll back.
-- When it committed, this statement's snapshot cannot see that row and returns nothing; the
-- caller runs it again (a new statement, a new snapshot) and gets the row as `existing`.
WITH existing AS MATERIALIZED (
  SELECT j.id FROM __schema__.jobs j
  WHERE j.kind = %(kind)s AND j.unique_key = %(unique_key)s
    AND (j.finished_at IS NULL OR j.finished_at >= now() - %(window)s::interval)
  ORDER BY j.finished_at IS NULL DESC, j.id DESC
  LIMIT 1
), ins AS (
  INSERT INTO __schema__.jobs (kind, payload, run_at, max_attempts, priority, unique_key)
  SELECT %(kind)s, %(payload)s::jsonb,
         coalesce(%(run_at)s::timestamptz, now()) + %(delay)s::interval,
         %(max_attempts)s, %(priority)s, %(unique_key)s
  WHERE NOT EXISTS (SELECT 1 FROM existing)
  ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND finished_at IS NULL
  DO NOTHING
  RETURNING id
)
SELECT i.id, true AS created
FROM ins i CROSS JOIN LATERAL (SELECT pg_notify(%(channel)s, %(kind)s)) n
UNION ALL
SELECT e.id, false AS created FROM existing e

-- name: enqueue_unique_lock
-- Serialises producers of keys that use a window (which no index can enforce): held until the
-- caller's transaction ends. Keys are locked in one order, so two batches never deadlock.
SELECT pg_advisory_xact_lock(k.a, k.b)
FROM (SELECT DISTINCT hashtext(t.kind) AS a, hashtext(t.unique_key) AS b
      FROM unnest(%(kinds)s::text[], %(keys)s::text[]) AS t(kind, unique_key)
      ORDER BY 1, 2) k

-- name: enqueue_unique_many
-- The keyed part of enqueue_many (keyless jobs go by COPY). Keys are distinct within the call
-- (the caller keeps the first of each); rows are inserted in (kind, key) order so two batches
-- racing on the same keys wait for each other instead of deadlocking. Rows that neither
-- existed nor were inserted (a racing producer committed meanwhile) come back missing; the
-- caller sends them again.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest(%(kinds)s::text[], %(payloads)s::text[], %(run_ats)s::timestamptz[],
                       %(max_attempts)s::int[], %(priorities)s::int[], %(keys)s::text[],
                       %(windows)s::interval[])
    AS t(kind, payload, run_at, max_attempts, priority, unique_key, win)
), existing AS MATERIALIZED (
  SELECT i.kind, i.unique_key, e.id
  FROM input i CROSS JOIN LATERAL (
    SELECT j.id FROM __schema__.jobs j
    WHERE j.kind = i.kind AND j.unique_key = i.unique_key
      AND (j.finished_at IS NULL OR j.finished_at >= now() - i.win)
    ORDER BY j.finished_at IS NULL DESC, j.id DESC
    LIMIT 1) e
), ins AS (
  INSERT INTO __schema__.jobs (kind, payload, run_at, max_attempts, priority, unique_key)
  SELECT i.kind, i.payload::jsonb, i.run_at, i.max_attempts, i.priority, i.unique_key
  FROM input i
  WHERE NOT EXISTS (SELECT 1 FROM existing e
                    WHERE e.kind = i.kind AND e.unique_key = i.unique_key)
  ORDER BY i.kind, i.unique_key
  ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND finished_at IS NULL
  DO NOTHING
  RETURNING id, kind, unique_key
)
SELECT id, kind, unique_key, true AS created FROM ins
UNION ALL
SELECT id, kind, unique_key, false AS created FROM existing
