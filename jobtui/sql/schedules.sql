-- Periodic jobs (jobtui/schedules.py) and their operator actions (jobtui/ops.py).

-- name: schedules_sync
-- Upsert declared definitions. Pause state and tick bookkeeping are kept; a changed cron or
-- time zone counts from now (ticks of the old definition are not replayed under the new one).
INSERT INTO __schema__.schedules AS s
  (name, cron, timezone, kind, payload, priority, max_attempts, missed, next_tick)
SELECT d.name, d.cron, d.timezone, d.kind, d.payload, d.priority, d.max_attempts, d.missed,
       NULL
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS d(name text, cron text, timezone text, kind text, payload jsonb, priority int,
          max_attempts int, missed text)
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind,
    payload = EXCLUDED.payload, priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts, missed = EXCLUDED.missed, updated_at = now(),
    next_tick = NULL,
    checked_until = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM
                                (EXCLUDED.cron, EXCLUDED.timezone)
                         THEN greatest(s.checked_until, now()) ELSE s.checked_until END
WHERE (s.cron, s.timezone, s.kind, s.payload, s.priority, s.max_attempts, s.missed)
      IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.payload,
                        EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.missed)
RETURNING name

-- name: schedules_now
SELECT statement_timestamp() AS statement_timestamp

-- name: schedules_due
-- Due, unpaused schedules this worker declares, read without a lock: each is then enqueued by
-- one statement of its own (schedules_enqueue_ticks), so no lock is held across a round trip.
SELECT s.name, s.cron, s.timezone, s.kind, s.payload::text AS payload, s.priority,
       s.max_attempts, s.missed, s.checked_until
FROM __schema__.schedules s
WHERE s.name = ANY(%(names)s::text[]) AND s.paused_at IS NULL
  AND (s.next_tick IS NULL OR s.next_tick <= %(now)s)
ORDER BY s.name

-- name: schedules_enqueue_ticks
-- One schedule's due ticks, as ONE statement (issue 25: a worker frozen between statements of
-- a transaction held the schedule's row, and no other worker could enqueue its ticks): lock
-- the schedule's row (SKIP LOCKED: another housekeeper has it this round) only if it is still
-- as read (same checked_until, cron and zone, not paused; else another worker got there first
-- and this one does nothing); insert each tick's row (the job id drawn from the jobs
-- sequence), then a job for each tick row that was new (a tick already recorded, by any worker
-- at any time, inserts nothing); move the bookkeeping to `now`. The server commits it on its
-- own. Returns (tick, job_id) per job enqueued.
WITH s AS MATERIALIZED (
  SELECT x.name, x.kind, x.payload, x.max_attempts, x.priority
  FROM __schema__.schedules x
  WHERE x.name = %(name)s AND x.paused_at IS NULL AND x.checked_until = %(checked_until)s
    AND x.cron = %(cron)s AND x.timezone = %(timezone)s
  FOR UPDATE SKIP LOCKED
), tick AS (
  INSERT INTO __schema__.schedule_ticks (schedule, tick, job_id)
  SELECT s.name, t.tick, nextval(pg_get_serial_sequence('__schema__.jobs', 'id'))
  FROM s CROSS JOIN unnest(%(ticks)s::timestamptz[]) AS t(tick)
  ON CONFLICT (schedule, tick) WHERE NOT manual DO NOTHING
  RETURNING tick, job_id
), job AS (
  INSERT INTO __schema__.jobs (id, kind, payload, max_attempts, priority)
  SELECT t.job_id, s.kind, s.payload, s.max_attempts, s.priority FROM tick t CROSS JOIN s
  RETURNING id
), latest AS (
  SELECT t.tick, t.job_id FROM tick t ORDER BY t.tick DESC LIMIT 1
), checked AS (
  UPDATE __schema__.schedules x
  SET checked_until = greatest(x.checked_until, %(now)s), next_tick = %(next_tick)s,
      last_tick = coalesce((SELECT tick FROM latest), x.last_tick),
      last_job_id = coalesce((SELECT job_id FROM latest), x.last_job_id),
      last_enqueued_at = CASE WHEN EXISTS (SELECT 1 FROM latest) THEN now()
                              ELSE x.last_enqueued_at END
  FROM s WHERE x.name = s.name
)
SELECT t.tick, t.job_id
FROM tick t CROSS JOIN s CROSS JOIN LATERAL (SELECT pg_notify(%(channel)s, s.kind)) n
ORDER BY t.tick

-- name: schedules_list
-- Every schedule with its last job's state (NULL once that job was pruned).
SELECT s.name, s.cron, s.timezone, s.kind, s.payload, s.missed, s.paused_at, s.paused_by,
       s.next_tick, s.last_tick, s.last_job_id, s.last_enqueued_at,
       CASE WHEN j.id IS NOT NULL THEN
              CASE WHEN j.cancelled_at IS NOT NULL THEN 'cancelled'
                   WHEN j.finished_at IS NOT NULL THEN 'succeeded'
                   WHEN j.locked_at IS NOT NULL THEN 'running'
                   WHEN j.attempts > 0 THEN 'retrying'
                   WHEN j.run_at > now() THEN 'scheduled'
                   ELSE 'ready' END
            WHEN d.id IS NOT NULL THEN 'dead'
       END AS last_state
FROM __schema__.schedules s
LEFT JOIN __schema__.jobs j ON j.id = s.last_job_id
LEFT JOIN __schema__.dead_letters d ON d.id = s.last_job_id
ORDER BY s.name

-- name: schedules_prune_ticks
-- Tick rows older than the cutoff; checked_until already keeps those ticks from coming back.
DELETE FROM __schema__.schedule_ticks t
WHERE t.ctid = ANY(ARRAY(
  SELECT x.ctid FROM __schema__.schedule_ticks x
  WHERE x.enqueued_at < %(cutoff)s LIMIT 5000))
RETURNING 1

-- name: ops_pause_schedule
UPDATE __schema__.schedules SET paused_at = now(), paused_by = %(os_user)s
WHERE name = %(name)s AND paused_at IS NULL
RETURNING name

-- name: ops_resume_schedule
-- Ticks that fell while paused are not run, whatever the missed-tick policy.
UPDATE __schema__.schedules
SET paused_at = NULL, paused_by = NULL, checked_until = greatest(checked_until, now()),
    next_tick = NULL
WHERE name = %(name)s AND paused_at IS NOT NULL
RETURNING name

-- name: ops_schedule_exists
SELECT 1 FROM __schema__.schedules WHERE name = %(name)s

-- name: ops_run_schedule_now
-- One job now from the schedule's definition (paused or not), recorded as a manual tick.
WITH s AS (
  SELECT * FROM __schema__.schedules WHERE name = %(name)s FOR UPDATE
), job AS (
  INSERT INTO __schema__.jobs (kind, payload, max_attempts, priority)
  SELECT s.kind, s.payload, s.max_attempts, s.priority FROM s
  RETURNING id, kind
), tick AS (
  INSERT INTO __schema__.schedule_ticks (schedule, tick, job_id, manual, enqueued_by)
  SELECT %(name)s, now(), job.id, true, %(os_user)s FROM job
), upd AS (
  UPDATE __schema__.schedules s SET last_job_id = job.id, last_enqueued_at = now()
  FROM job WHERE s.name = %(name)s
)
SELECT job.id FROM job CROSS JOIN LATERAL (SELECT pg_notify(%(channel)s, job.kind)) n
