-- Statements of the migrator (jobtui.schema.migrator); the migrations themselves are the
-- numbered files in jobtui/schema/.

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
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = 'jobs' AND a.attnum > 0 AND NOT a.attisdropped

-- name: migrate_jobs_relkind
SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = 'jobs'

-- name: migrate_analyze_jobs
ANALYZE __schema__.jobs
