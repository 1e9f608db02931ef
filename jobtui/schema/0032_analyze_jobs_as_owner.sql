-- The worker's ANALYZE of `jobs` after a slow claim (worker_analyze, SLOW_CLAIM_S in
-- jobtui/worker/dispatcher.py) needs the table's owner or a superuser: under the worker role
-- `jobtui roles` creates, PostgreSQL skipped it with a WARNING ("only table or database owner
-- can analyze it") and the statistics a stale or never-analysed `jobs` needed never came
-- (a claim of 50,000 jobs come due after the last ANALYZE stayed on the plan that reads the
-- whole backlog; tests/test_attack_0031.py, tests/test_roles.py).
--
-- jobtui_analyze_jobs() runs that ANALYZE with the rights of its owner (the role that ran
-- migrate, which owns `jobs`) and a fixed search_path; it takes nothing from its caller, so
-- all it can do is what autovacuum does. EXECUTE is revoked from PUBLIC, unlike the other
-- functions (the baseline leaves them to PUBLIC): an ANALYZE reads a sample of the table
-- (a second or more on a large one) and holds SHARE UPDATE EXCLUSIVE while it runs, which a
-- VACUUM or a CREATE INDEX CONCURRENTLY of `jobs` waits for (and it for them): a read-only
-- role must not be able to repeat it. `jobtui roles` (jobtui/sql/roles.sql) grants it to the worker role.
-- The rate stays the worker's: the housekeeper asks at most once every
-- ANALYZE_AT_MOST_EVERY_S (60 s) per worker, only after a slow claim, and under its lock
-- timeout like its other chores (which apply inside the function: it is the caller's
-- statement). A worker on a schema before this migration, or whose role was not granted
-- EXECUTE yet, runs the plain ANALYZE as before.
--
-- A new function only: no table or index change, no lock on jobs.

CREATE FUNCTION __schema__.jobtui_analyze_jobs() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  ANALYZE __schema__.jobs;
END
$fn$;

REVOKE EXECUTE ON FUNCTION __schema__.jobtui_analyze_jobs() FROM PUBLIC;
