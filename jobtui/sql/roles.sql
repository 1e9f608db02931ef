-- Least-privilege group roles for jobtui, printed by `jobtui roles --print-sql`.
-- `__schema__` is the quoted, validated schema; `__prefix__` a validated lower-case prefix
-- (default `jobtui_`). The roles are NOLOGIN groups: GRANT them to your login roles.
-- Running the script twice is harmless.

-- name: roles_script
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__prefix__monitor') THEN
    CREATE ROLE __prefix__monitor NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__prefix__operator') THEN
    CREATE ROLE __prefix__operator NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__prefix__worker') THEN
    CREATE ROLE __prefix__worker NOLOGIN;
  END IF;
END
$roles$;

-- monitor: reads everything jobtui keeps (console in read-only mode, `stats`, `check`).
GRANT USAGE ON SCHEMA __schema__ TO __prefix__monitor;
GRANT SELECT ON __schema__.jobs, __schema__.dead_letters, __schema__.workers,
  __schema__.paused_kinds, __schema__.audit_log, __schema__.kind_stats,
  __schema__.queue_samples, __schema__.jobtui_migrations
  TO __prefix__monitor;
-- Issue 13's tables: schedules and their ticks, per-kind limits.
GRANT SELECT ON __schema__.schedules, __schema__.schedule_ticks, __schema__.kind_limits
  TO __prefix__monitor;

-- operator: monitor plus the operator actions (requeue, delete, cancel, run now, pause,
-- resume, prune), each of which writes one audit_log row.
GRANT SELECT ON __schema__.kind_handlers TO __prefix__monitor;
GRANT __prefix__monitor TO __prefix__operator;
GRANT UPDATE (control, control_at, control_by) ON __schema__.workers TO __prefix__operator;
GRANT INSERT, UPDATE, DELETE ON __schema__.jobs TO __prefix__operator;
GRANT INSERT, DELETE ON __schema__.dead_letters TO __prefix__operator;
-- Bulk requeue/delete lock their batch with FOR UPDATE SKIP LOCKED, which PostgreSQL allows
-- only with UPDATE on at least one column; granting it on `reason` alone keeps payloads and
-- error histories unalterable.
GRANT UPDATE (reason) ON __schema__.dead_letters TO __prefix__operator;
GRANT INSERT, DELETE ON __schema__.paused_kinds TO __prefix__operator;
-- Pause, resume and run-now of schedules; run-time overrides of kind limits.
GRANT UPDATE ON __schema__.schedules TO __prefix__operator;
GRANT INSERT ON __schema__.schedule_ticks TO __prefix__operator;
GRANT INSERT, UPDATE ON __schema__.kind_limits TO __prefix__operator;
-- Column list: the role and time of an audit row come from the column defaults
-- (current_user, now()) and cannot be forged.
GRANT INSERT (os_user, action, ids, filter, count) ON __schema__.audit_log TO __prefix__operator;
-- One audit row per bulk action: later batches add to its count (migration 0014's trigger lets
-- a count only grow, and only on the role's own rows).
GRANT UPDATE (count) ON __schema__.audit_log TO __prefix__operator;
GRANT USAGE ON SEQUENCE __schema__.audit_log_id_seq, __schema__.jobs_id_seq
  TO __prefix__operator;

-- worker: what `jobtui worker` needs (claim, complete, retry, dead-letter, heartbeats,
-- statistics, pruning of finished jobs), and enqueueing from inside handlers.
GRANT USAGE ON SCHEMA __schema__ TO __prefix__worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON __schema__.jobs TO __prefix__worker;
GRANT SELECT, INSERT ON __schema__.dead_letters TO __prefix__worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON __schema__.workers TO __prefix__worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON __schema__.kind_stats TO __prefix__worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON __schema__.queue_samples TO __prefix__worker;
GRANT SELECT ON __schema__.paused_kinds, __schema__.jobtui_migrations TO __prefix__worker;
-- Schedules declared in code are upserted and ticked by workers; limits declared on handlers
-- are upserted at start and their rate buckets updated at claim time.
GRANT SELECT, INSERT, UPDATE ON __schema__.schedules, __schema__.kind_limits TO __prefix__worker;
GRANT SELECT, INSERT, DELETE ON __schema__.schedule_ticks TO __prefix__worker;
GRANT SELECT, INSERT, UPDATE ON __schema__.kind_handlers TO __prefix__worker;
GRANT INSERT (os_user, action, ids, filter, count) ON __schema__.audit_log TO __prefix__worker;
-- Pruning is one audit row too: RETURNING id, WHERE id and count + n read those columns only.
GRANT SELECT (id, count), UPDATE (count) ON __schema__.audit_log TO __prefix__worker;
GRANT USAGE ON SEQUENCE __schema__.audit_log_id_seq, __schema__.jobs_id_seq
  TO __prefix__worker;
-- ANALYZE of jobs after a slow claim, with the owner's rights (migration 0032; PUBLIC may not).
-- On a schema before 0032 there is nothing to grant (the worker runs the plain ANALYZE there):
-- run the script again after migrating.
DO $analyze$
BEGIN
  IF to_regprocedure('__schema__.jobtui_analyze_jobs()') IS NOT NULL THEN
    GRANT EXECUTE ON FUNCTION __schema__.jobtui_analyze_jobs() TO __prefix__worker;
  END IF;
END
$analyze$;
