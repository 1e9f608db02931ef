-- Operator actions. Each runs inside one transaction together with its audit row (jobtui.ops).
-- Bulk ("matching") variants fix an upper bound first and then work through the rows in id
-- order, one batch per transaction, locking with SKIP LOCKED so concurrent operators and workers
-- never wait on each other; `__job_where__` / `__dead_where__` are the browse filters.

-- name: ops_audit
INSERT INTO __schema__.audit_log (os_user, action, ids, filter, count)
VALUES (%(os_user)s, %(action)s, %(ids)s::bigint[], %(filter)s::jsonb, %(count)s)

-- name: ops_audit_open
-- The audit row of a bulk action, inserted by its first batch that changed something.
INSERT INTO __schema__.audit_log (os_user, action, ids, filter, count)
VALUES (%(os_user)s, %(action)s, %(ids)s::bigint[], %(filter)s::jsonb, %(count)s)
RETURNING id

-- name: ops_audit_add
-- A later batch of the same action adds what it changed (0014 lets a count only grow).
UPDATE __schema__.audit_log SET count = count + %(count)s WHERE id = %(id)s

-- name: ops_dead_pick_batch
-- The next batch of dead letters matching now, locked; unique_requeue_dead_ids then moves
-- them in the same transaction (keys held by unfinished jobs stay behind, reported skipped).
SELECT d.id FROM __schema__.dead_letters d
WHERE d.id > %(after)s AND d.id <= %(bound)s AND d.died_at <= %(t0)s
  AND __dead_where__ AND __dead_text__
ORDER BY d.id
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED

-- name: ops_requeue_ids
-- The move out of dead letters is one statement: a dead letter deleted by a concurrent requeue
-- is skipped here (its row is gone when our DELETE gets the lock), so racing callers make one job.
WITH moved AS (
  DELETE FROM __schema__.dead_letters d
  WHERE d.id = ANY(%(ids)s::bigint[])
    AND NOT EXISTS (SELECT 1 FROM __schema__.jobs x WHERE x.id = d.id)
  RETURNING d.id, d.kind, d.payload, d.priority, d.max_attempts, d.errors, d.last_error,
            d.created_at
)
INSERT INTO __schema__.jobs
  (id, kind, payload, priority, max_attempts, attempts, errors, last_error, created_at, run_at)
SELECT id, kind, payload, priority, max_attempts, 0, errors, last_error, created_at, now()
FROM moved
RETURNING id

-- name: ops_dead_bound
-- The last id matching now, and the moment: rows dead-lettered later are never swept.
SELECT max(d.id) AS bound, statement_timestamp() AS t0
FROM __schema__.dead_letters d
WHERE __dead_where__ AND __dead_text__

-- name: ops_delete_dead_ids
DELETE FROM __schema__.dead_letters d
WHERE d.id = ANY(%(ids)s::bigint[])
RETURNING d.id

-- name: ops_delete_dead_batch
WITH pick AS MATERIALIZED (
  __dead_pick_batch__
), gone AS (
  DELETE FROM __schema__.dead_letters d USING pick WHERE d.id = pick.id RETURNING d.id
)
SELECT (SELECT max(id) FROM pick) AS last_id,
       coalesce((SELECT array_agg(id ORDER BY id) FROM gone), '{}') AS ids

-- name: ops_cancel_picked
-- A fragment, not a statement: cancels the rows of a `pick` CTE (jobtui.browse splices it).
-- One statement decides per row on its latest version: a pending row is finished as cancelled,
-- a running one is asked to stop (its worker cancels the handler and records the outcome).
UPDATE __schema__.jobs j SET
  finished_at      = CASE WHEN j.locked_at IS NULL THEN now() ELSE j.finished_at END,
  cancelled_at     = CASE WHEN j.locked_at IS NULL THEN now() ELSE j.cancelled_at END,
  cancel_requested = j.locked_at IS NOT NULL OR j.cancel_requested
FROM pick
WHERE j.id = pick.id
  AND j.finished_at IS NULL
  AND (j.locked_at IS NULL OR NOT j.cancel_requested)
RETURNING j.id, j.locked_at IS NOT NULL AS running

-- name: ops_cancel_ids
-- Rows are locked in id order, so two multi-row cancels never deadlock each other.
WITH pick AS MATERIALIZED (
  SELECT j.id FROM __schema__.jobs j
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.finished_at IS NULL
  ORDER BY j.id
  FOR UPDATE
)
__cancel_picked__

-- name: ops_jobs_bound
-- The newest unfinished job matching the filter: the upper bound of a bulk cancel. Unfinished
-- rows are read phase by phase (job_phase_waiting in common.sql).
SELECT max(b.id) AS bound FROM (__union:ops_jobs_bound_rows__) b

-- name: ops_jobs_bound_rows
SELECT j.id FROM __job_phase__ j
WHERE j.jobtui_phase <> 'finished' AND __job_where__ AND __job_text__
ORDER BY __filter_order_desc__
LIMIT 1

-- name: ops_cancel_batch
-- The next `batch` unfinished matching rows above `after`, found phase by phase, then locked
-- by id, each tested again on its latest version (a row claimed or finished since it was found
-- is judged as it is now). `last_id` is the last row found, locked or not, so a row another
-- session holds is passed over, as SKIP LOCKED always did.
WITH found AS MATERIALIZED (
  SELECT f.id FROM (__union:ops_cancel_found_rows__) f ORDER BY f.id LIMIT %(batch)s
), pick AS MATERIALIZED (
  SELECT j.id FROM __job_rows__ j
  WHERE j.id = ANY(ARRAY(SELECT id FROM found)) AND j.jobtui_phase <> 'finished'
    AND __job_where__ AND __job_text__
  ORDER BY j.id
  FOR UPDATE SKIP LOCKED
), done AS (
  __cancel_picked__
)
SELECT (SELECT max(id) FROM found) AS last_id,
       coalesce((SELECT array_agg(id ORDER BY id) FROM done), '{}') AS ids,
       (SELECT count(*) FROM done WHERE running) AS running

-- name: ops_cancel_found_rows
SELECT j.id FROM __job_phase__ j
WHERE j.id > %(after)s AND j.id <= %(bound)s AND j.jobtui_phase <> 'finished'
  AND __job_where__ AND __job_text__
ORDER BY __filter_order_asc__
LIMIT %(batch)s

-- name: ops_run_now
-- Only rows still waiting for a future time: a due row keeps its place in the queue.
UPDATE __schema__.jobs j SET run_at = now()
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.finished_at IS NULL AND j.locked_at IS NULL AND j.run_at > now()
RETURNING j.id

-- name: ops_pause_kind
INSERT INTO __schema__.paused_kinds (kind, paused_by)
VALUES (%(kind)s, %(os_user)s)
ON CONFLICT (kind) DO NOTHING
RETURNING kind

-- name: ops_resume_kind
DELETE FROM __schema__.paused_kinds WHERE kind = %(kind)s RETURNING kind

-- name: ops_prune_batch
-- Finished rows only (dead letters live in their own table and are never pruned), oldest
-- first through the partial index on finished_at.
WITH pick AS MATERIALIZED (
  SELECT j.id FROM __schema__.jobs j
  WHERE j.finished_at IS NOT NULL AND j.finished_at < %(cutoff)s
  ORDER BY j.finished_at
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
)
DELETE FROM __schema__.jobs j
USING pick
WHERE j.id = pick.id AND j.finished_at IS NOT NULL AND j.finished_at < %(cutoff)s
RETURNING j.id

-- name: ops_now
SELECT now() AS now

-- name: ops_applicable_ids
-- The ids a by-ids action can change now, judged as its own statement judges them (so the
-- console offers and counts only those): cancel an unfinished job not already asked to stop;
-- run now an unlocked, unfinished job waiting for a future time; run again a finished job.
SELECT j.id FROM __schema__.jobs j
WHERE j.id = ANY(%(ids)s::bigint[])
  AND CASE %(action)s
        WHEN 'cancel_jobs' THEN j.finished_at IS NULL
                                AND (j.locked_at IS NULL OR NOT j.cancel_requested)
        WHEN 'run_now' THEN j.finished_at IS NULL AND j.locked_at IS NULL AND j.run_at > now()
        WHEN 'rerun_job' THEN j.finished_at IS NOT NULL
        ELSE false
      END
ORDER BY j.id

-- name: ops_rerun_jobs
-- New jobs from finished (succeeded or cancelled) ones: same kind, payload, priority,
-- max_attempts and unique key, linked by rerun_of, due now, no history. Unique keys follow
-- the partial unique index like any producer's: while an unfinished job holds a key, no job
-- is made for it (ops_rerun_blocker names the holder). A unique window is not applied: the
-- operator asks for this run explicitly, and the original itself finished inside any window.
WITH orig AS (
  SELECT j.id, j.kind, j.payload, j.priority, j.max_attempts, j.unique_key
  FROM __schema__.jobs j
  WHERE j.id = ANY(%(ids)s::bigint[]) AND j.finished_at IS NOT NULL
  ORDER BY j.id
), ins AS (
  INSERT INTO __schema__.jobs (kind, payload, priority, max_attempts, unique_key, rerun_of)
  SELECT kind, payload, priority, max_attempts, unique_key, id FROM orig ORDER BY id
  ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL AND finished_at IS NULL
  DO NOTHING
  RETURNING id, kind, rerun_of
)
SELECT i.rerun_of, i.id, pg_notify(%(channel)s, i.kind) FROM ins i ORDER BY i.rerun_of

-- name: ops_rerun_blocker
-- Why a rerun made nothing: the unfinished job holding the original's unique key, if any.
SELECT x.id FROM __schema__.jobs j
JOIN __schema__.jobs x ON x.kind = j.kind AND x.unique_key = j.unique_key
  AND x.finished_at IS NULL
WHERE j.id = %(id)s
ORDER BY x.id
LIMIT 1

-- name: ops_rerun_links
-- The job a rerun was made from, and the reruns made from a job (newest first).
SELECT (SELECT j.rerun_of FROM __schema__.jobs j WHERE j.id = %(id)s) AS rerun_of,
       ARRAY(SELECT r.id FROM __schema__.jobs r WHERE r.rerun_of = %(id)s
             ORDER BY r.id DESC LIMIT 20) AS reruns

-- name: ops_prepared_find
-- The prepared transaction the operator saw, if it is still there: same gid and same xid (a
-- gid can be used again once its transaction has ended), in this database (COMMIT/ROLLBACK
-- PREPARED must run in the database where it was prepared).
SELECT p.owner FROM pg_prepared_xacts p
WHERE p.gid = %(gid)s AND p.transaction = %(xid)s::xid AND p.database = current_database()

-- name: ops_commit_prepared
-- A utility statement, which takes no server-side parameters: run with a client-side cursor,
-- which sends the gid as a quoted literal. It may not run inside a transaction block.
COMMIT PREPARED %(gid)s

-- name: ops_rollback_prepared
ROLLBACK PREPARED %(gid)s

-- name: ops_drop_slot
-- Drop the replication slot the operator saw (same name and type), unless a consumer holds it
-- now, and write the action's audit row, in one statement: the INSERT's privilege is checked
-- before anything runs, so a role that may not write the audit log drops nothing. `count` 0:
-- the slot was gone or in use; `found` says which.
WITH target AS (
  SELECT s.slot_name, s.active FROM pg_replication_slots s
  WHERE s.slot_name = %(name)s AND s.slot_type = %(slot_type)s
), dropped AS (
  SELECT t.slot_name, pg_drop_replication_slot(t.slot_name) IS NULL AS done
  FROM target t WHERE NOT t.active
)
INSERT INTO __schema__.audit_log (os_user, action, ids, filter, count)
SELECT %(os_user)s, 'drop_replication_slot', NULL,
       %(details)s::jsonb || jsonb_build_object('found', t.slot_name IS NOT NULL,
                                                'active', coalesce(t.active, false)),
       CASE WHEN d.slot_name IS NULL THEN 0 ELSE 1 END
FROM (VALUES (1)) one LEFT JOIN target t ON true LEFT JOIN dropped d ON true
RETURNING count, (filter ->> 'found')::boolean AS found
