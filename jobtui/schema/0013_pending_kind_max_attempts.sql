-- Issue 15: rows a consumer gave up on (attempts >= max_attempts, unlocked, unfinished) are
-- counted as `exhausted`, not ready. The per-kind count in the Overview compares attempts with
-- max_attempts, so the covering index carries max_attempts too, or that count would visit the
-- heap for every pending row. Same keys and predicate as before: `jobs` keeps the same number
-- of indexes and the claim path the same index maintenance (entries 4 bytes wider).
-- Rebuilding it holds a SHARE lock on `jobs` (writes wait) for one scan of the table; a
-- schema restored without its version rows is recognised by this index (jobtui.schema.migrator)
-- and never rebuilt twice.

DROP INDEX IF EXISTS __schema__.jobs_pending_kind;
CREATE INDEX jobs_pending_kind ON __schema__.jobs (kind, run_at)
  INCLUDE (attempts, max_attempts, locked_at)
  WHERE finished_at IS NULL;
