-- Unique jobs (issue 13): at most one unfinished job per (kind, unique_key).
-- The column is nullable and has no default, so the article's `INSERT INTO jobs (kind,
-- payload)` and COPY without it keep working, and keyless rows never enter either index.

ALTER TABLE __schema__.jobs ADD COLUMN IF NOT EXISTS unique_key text;
ALTER TABLE __schema__.dead_letters ADD COLUMN IF NOT EXISTS unique_key text;

-- The guarantee itself. Partial: a finished job (succeeded or cancelled) frees its key, and a
-- dead letter lives in another table, so it frees its key too (requeueing it checks the key).
-- Producers that race on one key serialise on this index: the second waits for the first to
-- commit or roll back (INSERT … ON CONFLICT DO NOTHING).
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique_key ON __schema__.jobs (kind, unique_key)
  WHERE unique_key IS NOT NULL AND finished_at IS NULL;

-- The optional window also looks at finished jobs of the key; only keyed rows enter this index.
CREATE INDEX IF NOT EXISTS jobs_unique_key_finished
  ON __schema__.jobs (kind, unique_key, finished_at)
  WHERE unique_key IS NOT NULL AND finished_at IS NOT NULL;

-- The console's `key:` filter on dead letters.
CREATE INDEX IF NOT EXISTS dead_letters_unique_key ON __schema__.dead_letters (kind, unique_key)
  WHERE unique_key IS NOT NULL;
