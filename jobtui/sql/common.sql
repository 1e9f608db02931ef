-- Statements shared by every part of jobtui.

-- name: schema_present
SELECT to_regclass('__schema__.jobs') IS NOT NULL
   AND to_regclass('__schema__.dead_letters') IS NOT NULL

-- name: backend_pid
-- The server's idea of this session's pid: behind PgBouncer it differs from the pid the client
-- was given at startup (jobtui.db decides prepared statements by it).
SELECT pg_backend_pid()
