-- Issue 14 (drain): each index on `jobs` holds the rows of one phase of a job's life, so each
-- row version enters only the indexes of its own phase.
--
-- A job's row is written three times: inserted (waiting), claimed (running: locked_at set) and
-- finished (finished_at set). locked_at and finished_at are in the predicates of the partial
-- indexes, so neither update can be HOT, and every new row version gets an entry in every index
-- whose predicate it meets. Before this migration a claim wrote six index entries (jobs_pkey,
-- jobs_kind_id, jobs_pending_id, jobs_pending_kind, jobs_running, jobs_running_id) and a job
-- sixteen over its life; the keys of most of them did not change, so each claim also left a
-- duplicate for the index to clean up. Now:
--   waiting  (finished_at IS NULL AND locked_at IS NULL): jobs_claim, jobs_claim_kind,
--            jobs_pending (the article's), jobs_pending_kind, jobs_waiting_id,
--            jobs_waiting_kind_id                                 -- entered once, at insert
--   running  (finished_at IS NULL AND locked_at IS NOT NULL): jobs_running   -- at the claim
--   finished (finished_at IS NOT NULL): jobs_finished, jobs_finished_kind_id -- at the finish
-- plus jobs_pkey for every version: twelve entries a job, two of them at the claim. Running rows
-- are few (the workers' slots), so what needs them by id or by kind sorts that small set.
-- Readers that span phases (a kind's rows in every state, the unfinished rows in id order) read
-- each phase through its own index and merge them (`__union:NAME__` over `job_phase_*`, see
-- sql/common.sql). Measured before/after on 20,000 no-op jobs, 2 worker processes (issue 14's
-- note).
--
-- Locks: DROP INDEX needs ACCESS EXCLUSIVE on `jobs`, so it is taken first, before the builds:
-- a try of migrate that cannot get it (a long transaction has read `jobs`) gives up within its
-- lock timeout having built nothing, instead of holding writers for the builds and then
-- failing. Reads and writes of `jobs` wait for the builds (about 1-2 s per million rows).
LOCK TABLE __schema__.jobs IN ACCESS EXCLUSIVE MODE;
CREATE INDEX jobs_waiting_id ON __schema__.jobs (id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
CREATE INDEX jobs_waiting_kind_id ON __schema__.jobs (kind, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
CREATE INDEX jobs_finished_kind_id ON __schema__.jobs (kind, id)
  WHERE finished_at IS NOT NULL;
-- The per-kind oldest ready row and the limited kinds' claim read waiting rows only: locked_at
-- moves from the INCLUDE columns into the predicate.
CREATE INDEX jobs_pending_kind_0020 ON __schema__.jobs (kind, run_at)
  INCLUDE (attempts, max_attempts)
  WHERE finished_at IS NULL AND locked_at IS NULL;

DROP INDEX __schema__.jobs_kind_id;
DROP INDEX __schema__.jobs_pending_id;
DROP INDEX __schema__.jobs_running_id;
DROP INDEX __schema__.jobs_pending_kind;
ALTER INDEX __schema__.jobs_pending_kind_0020 RENAME TO jobs_pending_kind;
