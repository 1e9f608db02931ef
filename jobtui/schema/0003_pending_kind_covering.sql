-- The Overview counts every unfinished job by kind each refresh (jobtui.metrics). With the
-- per-kind pending index carrying `attempts` and `locked_at`, that count is an index-only scan
-- (no heap visit per row while the visibility map is set) instead of a read of every pending row.
-- It replaces jobs_pending_kind, same keys and predicate, so `jobs` keeps the same number of
-- indexes and the worker's claim/complete path does the same index maintenance as before
-- (entries are 12 bytes wider).
-- Rebuilding it holds a SHARE lock on `jobs` (writes wait) for one scan of the table.

DROP INDEX IF EXISTS __schema__.jobs_pending_kind;
CREATE INDEX jobs_pending_kind ON __schema__.jobs (kind, run_at) INCLUDE (attempts, locked_at)
  WHERE finished_at IS NULL;
