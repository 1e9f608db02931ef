-- Issue 11: "run a finished or cancelled job again" makes a new job linked to the original.
-- The link is a column, not a payload field, so a handler sees the payload it always saw.
-- Nullable with no default: producers (and the article's INSERT) never set it. No foreign
-- key: pruning the original must neither fail nor lose the fact that this job is a rerun.
ALTER TABLE __schema__.jobs ADD COLUMN IF NOT EXISTS rerun_of bigint;

-- "Run again as" on the original's detail view: only reruns enter this index.
CREATE INDEX IF NOT EXISTS jobs_rerun_of ON __schema__.jobs (rerun_of)
  WHERE rerun_of IS NOT NULL;
