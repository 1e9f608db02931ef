-- Statements of the migrator (jobtui.schema.migrator); the schema itself is the baseline and
-- the numbered migrations after it, in jobtui/schema/.

-- name: migrate_lock
SELECT pg_advisory_xact_lock(%s)

-- name: migrate_schema_exists
SELECT 1 FROM pg_namespace WHERE nspname = %s

-- name: migrate_create_schema
CREATE SCHEMA __schema__

-- name: migrate_create_version_table
CREATE TABLE IF NOT EXISTS __schema__.jobtui_migrations (
    version int primary key,
    name text not null,
    applied_at timestamptz not null default now())

-- name: migrate_version_table_exists
SELECT to_regclass('__schema__.jobtui_migrations') IS NOT NULL

-- name: migrate_applied_versions
SELECT version FROM __schema__.jobtui_migrations

-- name: migrate_record_version
INSERT INTO __schema__.jobtui_migrations (version, name) VALUES (%s, %s)

-- name: migrate_jobs_columns
-- Each column's name, type, NOT NULL, whether its type is a domain, and whether that domain
-- is NOT NULL (which the column loses when ALTERed to the base type: the refusal's hint adds
-- SET NOT NULL, with no NULL rows to fill first); then its default (ALTER … TYPE casts it
-- only by an assignment cast: text '{}' to jsonb fails, so the hint drops and sets it again),
-- and the quoted name of a serial's sequence that is not bigint (ALTER … TYPE bigint leaves
-- it an integer one, ending at 2147483647; an identity's changes with the column).
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, t.typtype = 'd',
       t.typtype = 'd' AND t.typnotnull, pg_get_expr(d.adbin, d.adrelid),
       (SELECT quote_ident(sn.nspname) || '.' || quote_ident(sc.relname)
        FROM pg_depend dep
        JOIN pg_sequence s ON s.seqrelid = dep.objid
        JOIN pg_class sc ON sc.oid = s.seqrelid
        JOIN pg_namespace sn ON sn.oid = sc.relnamespace
        WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass
          AND dep.refobjid = c.oid AND dep.refobjsubid = a.attnum AND dep.deptype = 'a'
          AND s.seqtypid <> 'bigint'::regtype
        LIMIT 1)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %s AND c.relname = 'jobs' AND a.attnum > 0 AND NOT a.attisdropped

-- name: migrate_jobs_relkind
SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = 'jobs'

-- name: migrate_analyze_jobs
ANALYZE __schema__.jobs

-- name: migrate_jobtui_tables_exist
-- jobtui's own tables (not the article's `jobs`, which a first migrate extends): present with
-- an empty version table, they mean a schema-only restore (or a lost version table).
SELECT to_regclass('__schema__.dead_letters') IS NOT NULL
   AND to_regclass('__schema__.workers') IS NOT NULL
   AND to_regclass('__schema__.audit_log') IS NOT NULL

-- name: migrate_quote_ident
SELECT quote_ident(%(schema)s)

-- name: migrate_create_probe_schema
CREATE SCHEMA __schema__

-- name: migrate_fingerprint
-- The objects of one schema, one line each, to tell which migration version a schema without
-- version rows is at: columns (type, nullability, default or generation), indexes, constraints,
-- functions (with their source) and triggers. The caller strips the schema's name.
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') AS line
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND a.attnum > 0
  AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'constraint ' || cl.relname || '.' || con.conname || ' ' || pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class cl ON cl.oid = con.conrelid
JOIN pg_namespace n ON n.oid = con.connamespace
WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '
       || p.prosrc
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND NOT t.tgisinternal

-- name: migrate_lock_timeout
-- How long each statement of this migrate transaction may wait for a lock (SET LOCAL: it ends
-- with the transaction). While a migration waits in the lock queue of `jobs` for ACCESS
-- EXCLUSIVE, every claim and INSERT queues behind it; this bounds how long.
SELECT set_config('lock_timeout', %(timeout)s, true), pg_backend_pid()

-- name: migrate_blockers
-- Who keeps backend `pid` (a migrate) waiting for a lock, seen from a second connection while
-- it waits: the lock it waits for (not the advisory lock that serialises migrates: another
-- migrate holding that is no stall) and each session pg_blocking_pids names, with the modes it
-- holds on that relation (none: it is queued ahead of migrate), its transaction's age, state
-- and application. Holders first, oldest transaction first.
WITH waiting AS (
  SELECT l.locktype, l.relation, l.mode
  FROM pg_locks l
  WHERE l.pid = %(pid)s AND NOT l.granted AND l.locktype <> 'advisory'
  LIMIT 1
)
SELECT a.pid, a.usename, a.application_name, a.state,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s,
       w.locktype, w.relation::regclass::text AS relation, w.mode AS wanted, h.held
FROM waiting w
CROSS JOIN LATERAL unnest(pg_blocking_pids(%(pid)s)) AS b(pid)
JOIN pg_stat_activity a ON a.pid = b.pid
CROSS JOIN LATERAL (
  SELECT string_agg(DISTINCT l.mode, ', ' ORDER BY l.mode) AS held
  FROM pg_locks l
  WHERE l.pid = a.pid AND l.granted AND l.locktype = w.locktype
    AND l.relation IS NOT DISTINCT FROM w.relation
) h
ORDER BY h.held IS NULL, a.xact_start NULLS LAST, a.pid

-- name: migrate_describe_search_path
-- Every name in the description qualified, and every constant spelled, the same way whatever
-- the caller's settings (a timestamptz default prints in the session's time zone).
SELECT set_config('search_path', 'pg_catalog', true), set_config('TimeZone', 'UTC', true),
       set_config('DateStyle', 'ISO, YMD', true), set_config('IntervalStyle', 'postgres', true),
       set_config('extra_float_digits', '1', true)

-- name: migrate_describe
-- Everything a migration can create in one schema, one item per row (sorted by the caller),
-- in a form no server version or owner changes: tables with their storage options, columns in
-- their order (type, nullability, default, generation), constraints other than NOT NULL
-- (PostgreSQL 18 lists those as constraints too; attnotnull says the same on every version),
-- indexes, sequences, functions (signature, attributes and body), triggers, views and grants
-- (the owner spelled OWNER). The caller strips the schema's name. For tools/schema_describe.py
-- and the test that the baseline builds what the old migration files built.
SELECT 'table ' || c.relname || ' kind ' || c.relkind::text || ' persistence ' || c.relpersistence::text
       || coalesce(' options ' || (SELECT string_agg(o, ',' ORDER BY o)
                                   FROM unnest(c.reloptions) o), '') AS item
FROM pg_class c
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
UNION ALL
SELECT 'column ' || c.relname || ' #'
       || lpad((row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum))::text, 2, '0')
       || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || CASE WHEN a.attgenerated <> '' THEN ' generated (' || pg_get_expr(d.adbin, d.adrelid)
                                              || ') ' || a.attgenerated::text
               ELSE coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') END
       || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
               THEN ' collate ' || a.attcollation::regcollation::text ELSE '' END
       || coalesce(' acl ' || array_to_string(a.attacl, ','), '')
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
UNION ALL
SELECT 'constraint ' || cl.relname || '.' || con.conname || ' ' || pg_get_constraintdef(con.oid)
FROM pg_constraint con
JOIN pg_class cl ON cl.oid = con.conrelid
WHERE con.connamespace = quote_ident(%(schema)s)::regnamespace AND con.contype <> 'n'
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace
UNION ALL
SELECT 'sequence ' || c.relname || ' ' || format_type(s.seqtypid, NULL)
       || ' start ' || s.seqstart || ' increment ' || s.seqincrement || ' min ' || s.seqmin
       || ' max ' || s.seqmax || ' cache ' || s.seqcache
       || CASE WHEN s.seqcycle THEN ' cycle' ELSE '' END
       || coalesce(' owned by ' || (SELECT t.relname || '.' || a.attname
                                    FROM pg_depend dep
                                    JOIN pg_class t ON t.oid = dep.refobjid
                                    JOIN pg_attribute a ON a.attrelid = dep.refobjid
                                                       AND a.attnum = dep.refobjsubid
                                    WHERE dep.classid = 'pg_class'::regclass
                                      AND dep.objid = c.oid AND dep.deptype IN ('a', 'i')
                                      AND dep.refclassid = 'pg_class'::regclass), '')
FROM pg_sequence s
JOIN pg_class c ON c.oid = s.seqrelid
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace
UNION ALL
SELECT 'function ' || p.proname || '(' || pg_get_function_arguments(p.oid) || ') returns '
       || pg_get_function_result(p.oid) || ' language ' || l.lanname
       || ' volatility ' || p.provolatile::text || ' parallel ' || p.proparallel::text
       || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END
       || CASE WHEN p.proisstrict THEN ' strict' ELSE '' END
       || CASE WHEN p.proleakproof THEN ' leakproof' ELSE '' END
       || ' cost ' || p.procost || ' rows ' || p.prorows
       || coalesce(' set ' || array_to_string(p.proconfig, ','), '')
       || E' body:\n' || p.prosrc
FROM pg_proc p
JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = quote_ident(%(schema)s)::regnamespace
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'view ' || c.relname || E':\n' || pg_get_viewdef(c.oid)
FROM pg_class c
WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace AND c.relkind IN ('v', 'm')
UNION ALL
SELECT 'grant on ' || o.what || ' to '
       || CASE WHEN x.grantee = 0 THEN 'PUBLIC' WHEN x.grantee = o.owner THEN 'OWNER'
               ELSE x.grantee::regrole::text END
       || ' ' || x.privilege_type || CASE WHEN x.is_grantable THEN ' with grant option' ELSE '' END
FROM (
  SELECT 'relation ' || c.relname AS what, c.relowner AS owner, c.relacl AS acl
  FROM pg_class c
  WHERE c.relnamespace = quote_ident(%(schema)s)::regnamespace AND c.relacl IS NOT NULL
  UNION ALL
  SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
         p.proowner, p.proacl
  FROM pg_proc p
  WHERE p.pronamespace = quote_ident(%(schema)s)::regnamespace AND p.proacl IS NOT NULL
) o
CROSS JOIN LATERAL aclexplode(o.acl) x

-- name: migrate_drop_scratch_schema
DROP SCHEMA IF EXISTS __schema__ CASCADE
