-- Quiet, resume or stop a worker (issue 11, migration 0018): the operator's side writes a
-- request on the worker's `workers` row (jobtui.worker_control, audited with ops_audit and
-- announced with `notify` as 'control:<worker id>'); the worker's side reads it at once on that
-- NOTIFY and, as a fallback, after every heartbeat (jobtui.worker.control).

-- name: control_lock
-- The worker's row as it is now, locked so two operators' requests apply one after the other.
SELECT control, control_applied,
       heartbeat_at < now() - make_interval(secs => heartbeat_timeout_s) AS stale
FROM __schema__.workers
WHERE id = %(worker)s
FOR UPDATE

-- name: control_set
-- Set (or, with NULL, clear) the request; returns the row when it changed anything.
UPDATE __schema__.workers
SET control = %(control)s, control_at = now(), control_by = %(os_user)s
WHERE id = %(worker)s AND control IS DISTINCT FROM %(control)s
RETURNING id

-- name: control_read
-- The worker's own check: what is asked of it (NULL: work normally).
SELECT control FROM __schema__.workers WHERE id = %(worker)s

-- name: control_applied
-- The worker says what it is doing about the request, for the console and `jobtui stats`.
UPDATE __schema__.workers SET control_applied = %(applied)s
WHERE id = %(worker)s AND control_applied IS DISTINCT FROM %(applied)s
