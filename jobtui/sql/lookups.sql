-- name: lookup_ids
-- Where each of these ids is now (the queue, the dead letters, or nowhere), so a command
-- given an id that does not exist can say so instead of "done 0".
SELECT i.id,
       EXISTS (SELECT 1 FROM __schema__.jobs j WHERE j.id = i.id) AS in_jobs,
       EXISTS (SELECT 1 FROM __schema__.dead_letters d WHERE d.id = i.id) AS in_dead
FROM unnest(%(ids)s::bigint[]) AS i(id)
ORDER BY i.id

-- name: lookup_kind_known
-- Whether anything knows this kind: a worker that handles it by name, a declared limit or an
-- override, a pause, a job (finished or not), a dead letter or a schedule. Each an index probe.
SELECT EXISTS (SELECT 1 FROM __schema__.workers w WHERE %(kind)s = ANY (w.kinds))
    OR EXISTS (SELECT 1 FROM __schema__.kind_limits l
               WHERE l.kind = %(kind)s AND (l.declared_at IS NOT NULL OR l.overridden))
    OR EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = %(kind)s)
    OR EXISTS (SELECT 1 FROM __schema__.jobs j WHERE j.kind = %(kind)s)
    OR EXISTS (SELECT 1 FROM __schema__.dead_letters d WHERE d.kind = %(kind)s)
    OR EXISTS (SELECT 1 FROM __schema__.schedules s WHERE s.kind = %(kind)s)
