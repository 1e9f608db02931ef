-- jobtui schema, version 1.
-- A superset of the article's `jobs` table: every column it names keeps its name, type and
-- default, so producers and consumers written against the article keep working.
-- `__schema__` is replaced by the quoted, validated schema name.

CREATE TABLE IF NOT EXISTS __schema__.jobs (
  id           bigserial primary key,
  kind         text not null,
  payload      jsonb not null,
  run_at       timestamptz not null default now(),
  attempts     int not null default 0,
  max_attempts int not null default 5,
  locked_at    timestamptz,
  finished_at  timestamptz,
  last_error   text
);

-- What operating the queue needs; every new column has a default, so the article's
-- `INSERT INTO jobs (kind, payload)` keeps working.
ALTER TABLE __schema__.jobs
  ADD COLUMN IF NOT EXISTS created_at       timestamptz not null default now(),
  ADD COLUMN IF NOT EXISTS priority         int not null default 0,
  ADD COLUMN IF NOT EXISTS locked_by        text,
  ADD COLUMN IF NOT EXISTS errors           jsonb not null default '[]'::jsonb,
  ADD COLUMN IF NOT EXISTS cancel_requested boolean not null default false,
  ADD COLUMN IF NOT EXISTS cancelled_at     timestamptz;

-- The article's index, kept under its own name (a no-op when the article already made it).
CREATE INDEX IF NOT EXISTS jobs_pending ON __schema__.jobs (run_at) WHERE finished_at IS NULL;

-- Claim order: only unlocked, unfinished rows, so finished rows never weigh on the hot index.
CREATE INDEX IF NOT EXISTS jobs_claim ON __schema__.jobs (priority DESC, run_at, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;

-- Running jobs by worker, for rescue and the Workers tab.
CREATE INDEX IF NOT EXISTS jobs_running ON __schema__.jobs (locked_by, locked_at)
  WHERE finished_at IS NULL AND locked_at IS NOT NULL;

-- Pending rows per kind, for the per-kind overview and kind-filtered browsing.
CREATE INDEX IF NOT EXISTS jobs_pending_kind ON __schema__.jobs (kind, run_at)
  WHERE finished_at IS NULL;

-- Browsing by kind newest first (keyset on id) and pruning finished rows in batches.
CREATE INDEX IF NOT EXISTS jobs_kind_id ON __schema__.jobs (kind, id);
CREATE INDEX IF NOT EXISTS jobs_finished ON __schema__.jobs (finished_at)
  WHERE finished_at IS NOT NULL;

-- Jobs that failed for good. A job keeps its id here and when requeued.
CREATE TABLE IF NOT EXISTS __schema__.dead_letters (
  id              bigint primary key,
  kind            text not null,
  payload         jsonb not null,
  priority        int not null default 0,
  attempts        int not null,
  max_attempts    int not null,
  created_at      timestamptz not null,
  run_at          timestamptz not null,
  last_error      text,
  errors          jsonb not null default '[]'::jsonb,
  reason          text not null,
  died_at         timestamptz not null default now(),
  -- The error's first line with numbers, hex, ids and quoted values normalised, so that
  -- failures of the same cause group together.
  error_signature text generated always as (
    left(
      regexp_replace(
        regexp_replace(
          regexp_replace(
            split_part(coalesce(last_error, ''), E'\n', 1),
            '''[^'']*''|"[^"]*"', '?', 'g'),
          '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|0x[0-9a-fA-F]+',
          '?', 'g'),
        '[0-9]+(\.[0-9]+)?', 'N', 'g'),
      300)
  ) stored
);
CREATE INDEX IF NOT EXISTS dead_letters_kind ON __schema__.dead_letters (kind, id);
CREATE INDEX IF NOT EXISTS dead_letters_signature ON __schema__.dead_letters (kind, error_signature);
CREATE INDEX IF NOT EXISTS dead_letters_died ON __schema__.dead_letters (died_at);

-- Live workers; a row whose heartbeat is older than the heartbeat timeout is a dead worker.
CREATE TABLE IF NOT EXISTS __schema__.workers (
  id           text primary key,
  host         text not null,
  pid          int not null,
  kinds        text[] not null,
  concurrency  int not null,
  running      int not null default 0,
  started_at   timestamptz not null default now(),
  heartbeat_at timestamptz not null default now()
);

CREATE TABLE IF NOT EXISTS __schema__.paused_kinds (
  kind      text primary key,
  paused_at timestamptz not null default now(),
  paused_by text not null
);

-- Every operator action: who (OS user@host and database role), when, what, how many.
CREATE TABLE IF NOT EXISTS __schema__.audit_log (
  id       bigserial primary key,
  at       timestamptz not null default now(),
  os_user  text not null,
  db_role  text not null default current_user,
  action   text not null,
  ids      bigint[],
  filter   jsonb,
  count    int not null
);
CREATE INDEX IF NOT EXISTS audit_log_at ON __schema__.audit_log (at);

-- Per-minute, per-kind figures written in batches by workers, so charts and run-time
-- percentiles survive restarts and pruning. `hist` counts run times in the buckets of
-- jobtui.stats.BUCKETS_MS (upper bounds in ms; the last bucket is open-ended).
CREATE TABLE IF NOT EXISTS __schema__.kind_stats (
  minute         timestamptz not null,
  kind           text not null,
  done           int not null default 0,
  failed         int not null default 0,
  dead           int not null default 0,
  runtime_sum_ms double precision not null default 0,
  hist           int[] not null default '{}',
  primary key (minute, kind)
);

-- One sample of the queue per minute (written by whichever worker gets there first), so the
-- console's depth and oldest-age sparklines are full the moment it opens.
CREATE TABLE IF NOT EXISTS __schema__.queue_samples (
  minute                timestamptz primary key,
  ready                 int not null,
  scheduled             int not null,
  running               int not null,
  retrying              int not null,
  dead                  int not null,
  oldest_ready_age_s    double precision
);

-- The jobs table churns (every job is inserted, updated two or three times, then pruned):
-- vacuum and analyze it after a small fraction of changes rather than the default 20 %.
ALTER TABLE __schema__.jobs SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  fillfactor = 90
);
