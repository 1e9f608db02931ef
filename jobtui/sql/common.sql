-- Statements shared by every part of jobtui.

-- name: schema_present
SELECT to_regclass('__schema__.jobs') IS NOT NULL
   AND to_regclass('__schema__.dead_letters') IS NOT NULL
