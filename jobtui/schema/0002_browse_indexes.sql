-- Indexes for the console's keyset pages (jobtui.browse): each page is `ORDER BY id DESC LIMIT n`
-- under a filter, and these let the common filters read only the rows they show.
-- All but dead_letters_group are partial and small: finished rows never enter the first two,
-- and only cancelled rows enter the third, so the worker's hot path pays little for them.

-- Jobs in a pending state (ready, scheduled, retrying, running), newest first, without walking
-- the finished rows that make up most of the table.
CREATE INDEX IF NOT EXISTS jobs_pending_id ON __schema__.jobs (id)
  WHERE finished_at IS NULL;

-- Running jobs, newest first (a handful of rows, however old they are).
CREATE INDEX IF NOT EXISTS jobs_running_id ON __schema__.jobs (id)
  WHERE finished_at IS NULL AND locked_at IS NOT NULL;

-- Cancelled jobs, newest first.
CREATE INDEX IF NOT EXISTS jobs_cancelled_id ON __schema__.jobs (id)
  WHERE cancelled_at IS NOT NULL;

-- Dead letters of one group (kind + error signature) newest first, and grouping them by an
-- index-only scan (died_at included for first/last seen).
CREATE INDEX IF NOT EXISTS dead_letters_group
  ON __schema__.dead_letters (kind, error_signature, id) INCLUDE (died_at);
