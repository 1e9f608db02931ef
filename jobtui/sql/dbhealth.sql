-- The database conditions that stall the queue (issue 12 item 1; jobtui/dbhealth.py), and the
-- one place where an operator signals a backend (jobtui/backends.py). Every statement here
-- reads catalogue views and statistics only: none scans a jobtui table.

-- name: dbhealth_blocker
-- The session in this database whose snapshot or transaction id is the oldest, i.e. the one
-- that holds back VACUUM here (PostgreSQL computes the removable horizon per database for
-- ordinary tables). A READ COMMITTED transaction idle between statements has no backend_xmin
-- but still holds its xid once it has written, so both are looked at. Its query is cut to 200
-- characters. `may_signal` / `signal_refusal` say whether the current role could cancel or
-- terminate it, by PostgreSQL's own rules: superuser targets only by a superuser, others by a
-- superuser, a role with the privileges of pg_signal_backend or of the target's role. The
-- server checks "has the privileges of" (an inheriting membership), so 'USAGE', not 'MEMBER':
-- since PostgreSQL 16 the role that creates another is its member without inheriting it.
WITH me AS (
  SELECT r.rolname, r.rolsuper, pg_has_role('pg_signal_backend', 'USAGE') AS signaller
  FROM pg_roles r WHERE r.rolname = current_user
)
SELECT a.pid, a.usename, a.application_name,
       CASE WHEN a.client_addr IS NULL THEN 'local'
            ELSE host(a.client_addr) || ':' || a.client_port END AS client,
       a.state, a.backend_type,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s,
       a.xact_start, a.backend_start,
       greatest(age(a.backend_xid), age(a.backend_xmin)) AS xid_age,
       left(a.query, 200) AS query,
       -- a vacuum process that still holds back (VACUUM FULL, the ANALYZE of a VACUUM, an
       -- autovacuum ANALYZE): named, but never offered a terminate
       coalesce(a.backend_type = 'autovacuum worker'
                OR a.query ~* '^\s*vacuum\M', false) AS vacuum,
       CASE WHEN a.backend_start IS NULL THEN
              format('role %s cannot see when that session started (grant it '
                     'pg_read_all_stats), so it cannot make sure it would signal that session '
                     'and not a new one with its pid', me.rolname)
            WHEN t.rolsuper AND NOT me.rolsuper THEN
              format('it belongs to superuser %s, and only a superuser may signal it; role %s '
                     'is not one', a.usename, me.rolname)
            WHEN me.rolsuper OR me.signaller OR pg_has_role(a.usesysid, 'USAGE') THEN NULL
            ELSE format('role %s is not superuser, not a member of pg_signal_backend and not '
                        'a member of role %s, whose backend it is', me.rolname, a.usename)
       END AS signal_refusal
FROM pg_stat_activity a
CROSS JOIN me
LEFT JOIN pg_roles t ON t.oid = a.usesysid
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
  -- PostgreSQL leaves vacuum processes out when it computes what VACUUM may remove (a lazy
  -- VACUUM, manual or autovacuum, is flagged PROC_IN_VACUUM; issue 26 item 14), and a walsender
  -- holds back through its slot or its standby's feedback (dbhealth_horizons), not as a session.
  -- pg_stat_progress_vacuum lists every lazy VACUUM at work; the statement's own text covers
  -- the moment between two tables. VACUUM FULL and the ANALYZE of VACUUM (ANALYZE) hold a
  -- snapshot like any statement and stay.
  -- A role without pg_read_all_stats sees another role's session with a NULL backend_type
  -- and no query: it stays (coalesce), as PostgreSQL counts it.
  AND a.backend_type IS DISTINCT FROM 'walsender'
  AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum v WHERE v.pid = a.pid)
  AND NOT coalesce(
    a.query ~* '^\s*(autovacuum:\s+)?vacuum\M' AND a.query !~* '\mfull\M'
    AND (a.state = 'active' OR a.backend_type = 'autovacuum worker')
    AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_analyze z WHERE z.pid = a.pid)
    AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_cluster z WHERE z.pid = a.pid),
    false)
ORDER BY greatest(age(a.backend_xid), age(a.backend_xmin)) DESC, a.xact_start NULLS LAST
LIMIT 1

-- name: dbhealth_horizons
-- What holds back VACUUM here from outside pg_stat_activity's sessions (issue 26 item 15), one
-- row each, with the age in transaction ids of the horizon it holds:
-- - a prepared transaction of this database (its xid stays running until COMMIT/ROLLBACK
--   PREPARED; one of another database does not hold back this one's tables);
-- - a replication slot of any database: its `xmin` holds back every table of the server, its
--   `catalog_xmin` (logical decoding) the system catalogs only (`catalog_only`);
-- - a standby's hot_standby_feedback, held by its walsender when the standby uses no slot
--   (with a slot, the feedback is the slot's xmin).
-- `refusal` says why the current role may not end it (NULL: it may; a standby has no action
-- here: the fix is on the standby). Roles without pg_read_all_stats see no walsender details.
WITH me AS (
  SELECT r.rolname, r.rolsuper, r.rolreplication FROM pg_roles r WHERE r.rolname = current_user
)
SELECT 'prepared' AS kind, p.gid AS name, p.transaction::text AS xid, NULL::int AS pid,
       age(p.transaction) AS xid_age, extract(epoch FROM now() - p.prepared)::float8 AS age_s,
       p.prepared AS since, p.owner AS usename,
       p.database, NULL::text AS slot_type, false AS catalog_only, NULL::text AS application,
       NULL::text AS client,
       CASE WHEN me.rolsuper OR p.owner = me.rolname THEN NULL
            ELSE format('only a superuser or role %s, which prepared it, may end it; role %s '
                        'is neither', p.owner, me.rolname) END AS refusal
FROM pg_prepared_xacts p CROSS JOIN me
WHERE p.database = current_database()
UNION ALL
SELECT 'slot', s.slot_name::text, NULL, s.active_pid,
       coalesce(age(s.xmin), age(s.catalog_xmin)), NULL, NULL, NULL,
       s.database::text, s.slot_type, s.xmin IS NULL, NULL, NULL,
       CASE WHEN s.active THEN
              format('it is in use by pid %s; it can be dropped once its consumer disconnects',
                     s.active_pid)
            WHEN NOT (me.rolsuper OR me.rolreplication) THEN
              format('dropping a slot takes superuser or the REPLICATION attribute; role %s '
                     'has neither', me.rolname)
       END
FROM pg_replication_slots s CROSS JOIN me
WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
UNION ALL
SELECT 'standby', coalesce(nullif(r.application_name, ''), 'a standby'), NULL, r.pid,
       age(r.backend_xmin), NULL, r.backend_start, r.usename::text, NULL, NULL, false,
       r.application_name,
       CASE WHEN r.client_addr IS NULL THEN 'local'
            ELSE host(r.client_addr) || ':' || r.client_port END,
       NULL
FROM pg_stat_replication r
WHERE r.backend_xmin IS NOT NULL
ORDER BY catalog_only, xid_age DESC

-- name: dbhealth_server
-- Server-wide figures: connections in use against max_connections, grouped by who by their
-- application_name (the worker's connections are `jobtui worker (…)`, the console's
-- `jobtui-console`: jobtui/worker/link.py, jobtui/tui/connection.py); sessions of this database
-- whose details the current role may not see (it lacks pg_read_all_stats); the NOTIFY queue;
-- autovacuum and its nap time.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS reserved,
       count(*) FILTER (WHERE a.backend_type = 'client backend') AS in_use,
       count(*) FILTER (WHERE a.backend_type = 'client backend'
                          AND starts_with(a.application_name, 'jobtui worker')) AS workers,
       count(*) FILTER (WHERE a.backend_type = 'client backend'
                          AND a.application_name = 'jobtui-console') AS consoles,
       count(*) FILTER (WHERE a.query = '<insufficient privilege>'
                          AND (a.datname = current_database() OR a.backend_type = 'walsender'))
         AS hidden,
       pg_notification_queue_usage()::float8 AS notify_usage,
       current_setting('autovacuum')::bool AS autovacuum,
       extract(epoch FROM current_setting('autovacuum_naptime')::interval)::float8 AS naptime_s,
       current_user AS role,
       now() AS now
FROM pg_stat_activity a

-- name: dbhealth_tables
-- jobtui's tables (`%(tables)s`, in this schema): size with TOAST, live and dead tuples, the
-- last (auto)vacuum and analyze, whether autovacuum may run on it (the server switch and the
-- table's own `autovacuum_enabled`), and the dead-tuple count at which autovacuum would
-- vacuum it (threshold + scale factor × tuples, the table's own settings first).
SELECT c.relname, pg_table_size(c.oid) AS size_bytes,
       coalesce(s.n_live_tup, 0) AS live, coalesce(s.n_dead_tup, 0) AS dead,
       s.last_vacuum, s.last_autovacuum, s.last_analyze, s.last_autoanalyze,
       current_setting('autovacuum')::bool
         AND coalesce(o.enabled, 'true') NOT IN ('false', 'off', 'no', '0') AS autovacuum,
       coalesce(o.threshold::float8, current_setting('autovacuum_vacuum_threshold')::float8)
         + coalesce(o.scale::float8, current_setting('autovacuum_vacuum_scale_factor')::float8)
           * greatest(c.reltuples, 0) AS vacuum_trigger
FROM pg_class c
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
LEFT JOIN LATERAL (
  SELECT max(split_part(opt, '=', 2)) FILTER (WHERE starts_with(opt, 'autovacuum_enabled=')) AS enabled,
         max(split_part(opt, '=', 2))
           FILTER (WHERE starts_with(opt, 'autovacuum_vacuum_threshold=')) AS threshold,
         max(split_part(opt, '=', 2))
           FILTER (WHERE starts_with(opt, 'autovacuum_vacuum_scale_factor=')) AS scale
  FROM unnest(c.reloptions) AS opt
) o ON true
WHERE c.relnamespace = '__schema__'::regnamespace AND c.relkind IN ('r', 'p')
  AND c.relname = ANY(%(tables)s::text[])
ORDER BY c.relname

-- name: dbhealth_indexes
-- The indexes of jobtui's tables: size and how often they were used.
SELECT t.relname AS table_name, i.relname AS index_name, pg_relation_size(i.oid) AS size_bytes,
       coalesce(s.idx_scan, 0) AS scans
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = x.indexrelid
WHERE t.relnamespace = '__schema__'::regnamespace AND t.relname = ANY(%(tables)s::text[])
ORDER BY t.relname, i.relname

-- name: dbhealth_workers
-- How each worker is woken, as its heartbeat last wrote it (jobtui/worker/listener.py): LISTEN
-- connected, the last wake-up it received, and the polling fallback with its interval.
SELECT w.id, w.host, w.pid,
       now() - w.heartbeat_at > make_interval(secs => w.heartbeat_timeout_s) AS stale,
       extract(epoch FROM now() - w.heartbeat_at)::float8 AS heartbeat_age_s,
       w.wakeup_mode, w.wakeup_note, w.listen_connected,
       extract(epoch FROM now() - w.last_wakeup_at)::float8 AS last_wakeup_age_s,
       w.poll_interval_s
FROM __schema__.workers w
ORDER BY w.id

-- name: backend_signal
-- Cancel (`terminate` false) or terminate the backend `pid`, but only if it is still the same
-- session the operator saw (same backend_start): a pid can be reused by a new connection. The
-- signal and its audit row are one statement: the INSERT's privilege is checked before anything
-- runs, so a role that may not write the audit log signals nothing, and a signal is never
-- left unaudited. `found` false: that session has ended. A role that may not signal it gets
-- InsufficientPrivilege and nothing is written.
WITH target AS (
  SELECT a.pid, a.usename, a.application_name
  FROM pg_stat_activity a
  WHERE a.pid = %(pid)s AND a.backend_start = %(backend_start)s
), sig AS (
  SELECT CASE WHEN %(terminate)s THEN pg_terminate_backend(t.pid)
              ELSE pg_cancel_backend(t.pid) END AS signalled,
         t.pid, t.usename, t.application_name
  FROM target t
)
INSERT INTO __schema__.audit_log (os_user, action, ids, filter, count)
SELECT %(os_user)s, %(action)s, NULL,
       %(details)s::jsonb
         || CASE WHEN sig.pid IS NULL THEN '{"found": false}'::jsonb
                 ELSE jsonb_build_object('found', true, 'user', sig.usename,
                                         'application', sig.application_name) END,
       CASE WHEN sig.signalled THEN 1 ELSE 0 END
FROM (VALUES (1)) one LEFT JOIN sig ON true
RETURNING count = 1 AS signalled, (filter ->> 'found')::boolean AS found
