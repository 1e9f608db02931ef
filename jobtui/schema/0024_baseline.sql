-- jobtui's schema, version 24: the baseline.
--
-- Read top to bottom: the tables with their final columns, then the indexes (those of `jobs`
-- by the phase of a job's life they serve), then the functions, the triggers that keep the
-- counts, and the counts of rows already there. Nothing was released before it, so this one
-- file replaced migrations 0001-0024; later changes are numbered migrations after it (0025_…),
-- each applied once, in order. `__schema__` is replaced by the quoted, validated schema name.
-- The migrator (jobtui/schema/migrator.py) runs it in one transaction behind an advisory lock,
-- each try bounded by a lock timeout, and records version 24.
--
-- Grants: none here. Every function is executable by PUBLIC, as PostgreSQL creates it (the
-- counting ones run with the owner's rights and a fixed search_path, so roles need no grant on
-- the counts tables); `jobtui roles` (jobtui/sql/roles.sql) creates the worker, operator and
-- read-only roles and grants them what they need.

-- ============================================================================== the tables

-- The queue. A superset of the article's `jobs` table: every column the article names keeps
-- its name, type and default, so producers and consumers written against the article keep
-- working. A database that already has the article's table (with its rows) is extended in
-- place; one whose `jobs` differs is refused beforehand by the migrator, nothing changed.
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

-- The strongest lock this file takes on `jobs`, taken before any other: a try that cannot get
-- it (a transaction that read `jobs` idles) gives up within its lock timeout having built
-- nothing, instead of holding writers through index builds and then failing.
LOCK TABLE __schema__.jobs IN ACCESS EXCLUSIVE MODE;

-- What operating the queue needs. Each column is nullable or has a default, so the article's
-- `INSERT INTO jobs (kind, payload)` and a COPY of its columns keep working.
--   created_at        when the job was enqueued (run_at may be later)
--   priority          higher is claimed first among due jobs
--   locked_by         the worker (workers.id) that holds a running job
--   errors            one entry per failed attempt: {attempt, at, error, traceback, worker}
--   cancel_requested  an operator asked to cancel a running job; its handler is told
--   cancelled_at      when it was cancelled (a cancelled job is finished with this set)
--   unique_key        at most one unfinished job per (kind, unique_key); NULL: no key
--   rerun_of          the job this one runs again ("run again" of a finished job). No foreign
--                     key: pruning the original must neither fail nor lose the link.
ALTER TABLE __schema__.jobs
  ADD COLUMN IF NOT EXISTS created_at       timestamptz not null default now(),
  ADD COLUMN IF NOT EXISTS priority         int not null default 0,
  ADD COLUMN IF NOT EXISTS locked_by        text,
  ADD COLUMN IF NOT EXISTS errors           jsonb not null default '[]'::jsonb,
  ADD COLUMN IF NOT EXISTS cancel_requested boolean not null default false,
  ADD COLUMN IF NOT EXISTS cancelled_at     timestamptz,
  ADD COLUMN IF NOT EXISTS unique_key       text,
  ADD COLUMN IF NOT EXISTS rerun_of         bigint;

-- Every job is inserted, updated two or three times, then pruned: vacuum and analyze after a
-- small fraction of changes rather than the default 20 %, and leave room on each page for the
-- updated versions.
ALTER TABLE __schema__.jobs SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  fillfactor = 90
);

-- Jobs that failed for good (or were moved here by an operator). A job keeps its id and its
-- unique_key here; requeueing it checks the key again.
CREATE TABLE __schema__.dead_letters (
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
  ) stored,
  unique_key      text
);

-- Live workers, one row each, upserted by every heartbeat. A row whose heartbeat is older than
-- its own heartbeat_timeout_s is a dead worker: a rescuer judges each worker by the settings
-- it wrote, never by its own (a rolling deploy that changes --heartbeat must not make workers
-- rescue each other's live jobs).
--   abandoned           plain handlers that overran their timeout (or ignored a cancel) and
--                       still hold a thread, and so a slot, until they really end
--   outcome_errors      outcomes the worker could not write (a row the database refused for a
--                       reason retrying cannot fix), how many since it started
--   last_outcome_error  the last of them, as PostgreSQL gave it
--   wakeup_mode         'listen' (LISTEN connected and its self-NOTIFY probe heard) or
--                       'polling' (behind a transaction pooler, or LISTEN hears nothing)
--   wakeup_note         why it polls, in words
--   listen_connected    whether the LISTEN connection is up right now
--   last_wakeup_at      when a NOTIFY last woke it (a probe's echo counts)
--   poll_interval_s     how often it polls for ready jobs when no NOTIFY comes
--   control             what an operator asked of it: 'quiet' (stop claiming, finish running
--                       jobs, keep heartbeating), 'stop' (drain and exit as on SIGTERM), or
--                       NULL (work normally; a resume clears 'quiet'); with control_at (the
--                       server's clock) and control_by (the audit log's os_user)
--   control_applied     what the worker says it is doing about it, written when it acts, so
--                       the console tells a request not yet seen from one carried out
-- The heartbeat's upsert leaves the control columns alone, so a request survives heartbeats.
CREATE TABLE __schema__.workers (
  id                   text primary key,
  host                 text not null,
  pid                  int not null,
  kinds                text[] not null,
  concurrency          int not null,
  running              int not null default 0,
  started_at           timestamptz not null default now(),
  heartbeat_at         timestamptz not null default now(),
  heartbeat_interval_s double precision not null default 5,
  heartbeat_timeout_s  double precision not null default 30,
  abandoned            int not null default 0,
  outcome_errors       int not null default 0,
  last_outcome_error   text,
  wakeup_mode          text not null default 'listen',
  wakeup_note          text,
  listen_connected     boolean not null default true,
  last_wakeup_at       timestamptz,
  poll_interval_s      double precision not null default 1,
  control              text CONSTRAINT workers_control_check CHECK (control IN ('quiet', 'stop')),
  control_at           timestamptz,
  control_by           text,
  control_applied      text
    CONSTRAINT workers_control_applied_check CHECK (control_applied IN ('quiet', 'stop'))
);

-- Kinds an operator paused: no worker claims their jobs until they are resumed.
CREATE TABLE __schema__.paused_kinds (
  kind      text primary key,
  paused_at timestamptz not null default now(),
  paused_by text not null
);

-- What the handler of each kind declares that the database otherwise never sees (the kind
-- screen shows it): its max_attempts (NULL: each job row's own decides; else it is the
-- attempt limit everywhere, see jobtui_attempt_limits), timeout (NULL: none) and retry
-- back-off, as written by the last worker that started with a handler for the kind (during a
-- rolling deploy workers may differ: the row says which one wrote it).
CREATE TABLE __schema__.kind_handlers (
  kind          text primary key,
  max_attempts  int,
  timeout_s     double precision,
  backoff_base_s double precision not null,
  backoff_cap_s  double precision not null,
  declared_by   text not null,
  declared_at   timestamptz not null default now()
);

-- Per-kind concurrency and rate limits, enforced at claim time (jobtui_claim_limited).
-- Declared values come from the handlers (upserted by workers at start); an operator override
-- replaces the declared set as a whole until it is cleared. The effective values are
-- generated columns so that every reader (claim, console, CLI) applies the same rule.
CREATE TABLE __schema__.kind_limits (
  kind                  text primary key,
  declared_concurrency  int check (declared_concurrency >= 1),
  declared_per_worker   int check (declared_per_worker >= 1),
  declared_rate         int check (declared_rate >= 1),
  declared_period_s     int not null default 1 check (declared_period_s IN (1, 60)),
  declared_at           timestamptz,
  overridden            boolean not null default false,
  override_concurrency  int check (override_concurrency >= 1),
  override_per_worker   int check (override_per_worker >= 1),
  override_rate         int check (override_rate >= 1),
  override_period_s     int not null default 1 check (override_period_s IN (1, 60)),
  overridden_by         text,
  overridden_at         timestamptz,
  concurrency int generated always as (
    CASE WHEN overridden THEN override_concurrency ELSE declared_concurrency END) stored,
  per_worker int generated always as (
    CASE WHEN overridden THEN override_per_worker ELSE declared_per_worker END) stored,
  rate int generated always as (
    CASE WHEN overridden THEN override_rate ELSE declared_rate END) stored,
  period_s int generated always as (
    CASE WHEN overridden THEN override_period_s ELSE declared_period_s END) stored,
  limited boolean generated always as (
    CASE WHEN overridden
         THEN override_concurrency IS NOT NULL OR override_per_worker IS NOT NULL
              OR override_rate IS NOT NULL
         ELSE declared_concurrency IS NOT NULL OR declared_per_worker IS NOT NULL
              OR declared_rate IS NOT NULL END) stored,
  -- Token bucket for the rate: `tokens` as of `tokens_at`, refilled at rate/period_s per
  -- second up to `rate`. 1970 means "full".
  tokens                double precision not null default 0,
  tokens_at             timestamptz not null default 'epoch'
);

-- Periodic jobs. Definitions are declared in code and upserted by workers at start
-- (jobtui.schedules.sync_schedules); operators pause and resume them; the housekeeper of every
-- worker enqueues due ticks (jobtui.schedules.enqueue_due_ticks).
CREATE TABLE __schema__.schedules (
  name             text primary key,
  cron             text not null,
  timezone         text not null default 'UTC',
  kind             text not null,
  payload          jsonb not null default '{}'::jsonb,
  priority         int not null default 0,
  max_attempts     int not null default 5,
  -- After downtime: 'skip' enqueues nothing for ticks missed by more than the grace,
  -- 'latest' enqueues the latest missed tick once.
  missed           text not null default 'skip' check (missed IN ('skip', 'latest')),
  declared_at      timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  paused_at        timestamptz,
  paused_by        text,
  -- Every tick at or before this has been dealt with (enqueued or skipped as missed).
  checked_until    timestamptz not null default now(),
  -- The first tick after checked_until, so the housekeeper reads only due schedules.
  next_tick        timestamptz,
  last_tick        timestamptz,
  last_job_id      bigint,
  last_enqueued_at timestamptz
);

-- One row per enqueued tick. The unique (schedule, tick) (schedule_ticks_once below) is what
-- makes a tick enqueue exactly once however many workers try; it lives apart from `jobs`, so
-- pruning jobs cannot lose it. Manual runs (run-now) are recorded too, outside that uniqueness.
CREATE TABLE __schema__.schedule_ticks (
  schedule    text not null references __schema__.schedules (name) ON DELETE CASCADE,
  tick        timestamptz not null,
  job_id      bigint not null,
  manual      boolean not null default false,
  enqueued_at timestamptz not null default now(),
  enqueued_by text
);

-- Every operator action, one row each: who (OS user@host and database role), when, what, how
-- many. A bulk action works in batches, one transaction each; its first batch that changes
-- something inserts the row and every later batch adds its count to it, so the row always
-- equals what is committed. jobtui_audit_count_guard keeps that from rewriting history.
CREATE TABLE __schema__.audit_log (
  id       bigserial primary key,
  at       timestamptz not null default now(),
  os_user  text not null,
  db_role  text not null default current_user,
  action   text not null,
  ids      bigint[],
  filter   jsonb,
  count    int not null
);

-- Per-minute, per-kind figures written in batches by workers, so charts and run-time
-- percentiles survive restarts and pruning. `hist` counts run times in the buckets of
-- jobtui.stats.BUCKETS_MS (upper bounds in ms; the last bucket is open-ended).
CREATE TABLE __schema__.kind_stats (
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
CREATE TABLE __schema__.queue_samples (
  minute                timestamptz primary key,
  ready                 int not null,
  scheduled             int not null,
  running               int not null,
  retrying              int not null,
  dead                  int not null,
  oldest_ready_age_s    double precision
);

-- The exact counts, kept as delta rows by statement triggers, so that a snapshot sums a table
-- of a few hundred rows instead of counting millions (an index-only count of 250,000 unfinished
-- rows takes 340-400 ms once the visibility map is stale, and autovacuum may be off). Every
-- writer is counted: the bundled worker, the article's producers and consumers, an operator's
-- SQL. Readers call the SECURITY DEFINER functions below and need no grant on these tables.
--
-- job_counts: the net change of rows per (kind, state). States: `waiting` (unfinished,
-- unlocked, attempts < max_attempts), `running` (locked), `exhausted` (unlocked, attempts >=
-- max_attempts), `succeeded` and `cancelled` (finished); `retrying` (waiting with attempts >
-- 0) and `cancel_open` (unfinished with cancelled_at set) count rows again, beside their
-- state. A waiting row is counted by `due`, the UTC minute of its run_at, so ready and
-- scheduled split at read time (the clock moves without writes); the fold widens far-off due
-- times into hour and day rows, `until` (exclusive) bounding the run_at they count, so the
-- table holds O(kinds) rows whatever the spread of due times (jobtui_fold_job_counts_at).
CREATE TABLE __schema__.job_counts (
  kind  text        not null,
  state text        not null,
  due   timestamptz,
  n     bigint      not null,
  until timestamptz
);

-- Per minute and kind, how many unfinished rows arrived (an INSERT) and departed (a finish, a
-- DELETE, a move to dead letters); kept 7 days. The arrival and departure rates, and the kind
-- screen's depth chart, come from here. Rows count in the minute their transaction began.
CREATE TABLE __schema__.job_flow (
  minute   timestamptz not null,
  kind     text        not null,
  arrived  bigint      not null,
  departed bigint      not null
);

-- Dead letters per kind, and per (kind, error signature) for the Dead letters tab's groups,
-- kept the same way. Dead letters are written only when jobs die, are requeued or deleted,
-- never on the claim/complete path, so these cost the drain nothing.
CREATE TABLE __schema__.dead_letter_counts (
  kind text   not null,
  n    bigint not null
);

CREATE TABLE __schema__.dead_group_counts (
  kind            text   not null,
  error_signature text   not null,
  n               bigint not null
);

-- ============================================================================= the indexes

-- `jobs`: each index holds the rows of one phase of a job's life, so that each row version
-- enters only the indexes of its own phase. A job's row is written three times: inserted
-- (waiting), claimed (running: locked_at set), finished (finished_at set). locked_at and
-- finished_at are in the predicates, so neither update is HOT and each new version enters every
-- index whose predicate it meets: with one phase per index that is twelve entries a job (jobs_pkey
-- for each version), two at the claim. Readers that span phases (a kind's rows in every state,
-- the unfinished rows in id order) read each phase through its own index and merge them
-- (`__union:NAME__` over `job_phase_*`, see jobtui/sql/common.sql).

-- Waiting (finished_at IS NULL AND locked_at IS NULL): entered once, at insert.
-- The claim, in claim order. A claimed row leaves it, so finished rows never weigh on it.
CREATE INDEX jobs_claim ON __schema__.jobs (priority DESC, run_at, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
-- The fast claim of a worker that also handles a limited kind walks each of its unlimited
-- kinds on its own, in claim order: walking jobs_claim it would step over every ready row of
-- a kind left out of its list (100,000 such rows took a claim of 50 from 3.6 ms to 27 ms).
-- Since migration 0029 the limited kinds' claim (jobtui_claim_limited) walks it too.
CREATE INDEX jobs_claim_kind ON __schema__.jobs (kind, priority DESC, run_at, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
-- The article's index, under its own name, for the article's claim (`where finished_at is null
-- and locked_at is null and run_at <= now() order by run_at`), the console's oldest ready job
-- and the fold's recount of a stretch of due times. The article's own holds locked rows too, so
-- a claim would write an entry into it: a table that already has it gets this one instead.
DROP INDEX IF EXISTS __schema__.jobs_pending;
CREATE INDEX jobs_pending ON __schema__.jobs (run_at)
  WHERE finished_at IS NULL AND locked_at IS NULL;
-- Per kind in run_at order: the per-kind oldest ready row, the per-kind counts (an index-only
-- scan, attempts and max_attempts included to tell `exhausted` rows) and, until migration
-- 0029, the limited kinds' claim (jobtui_claim_limited).
CREATE INDEX jobs_pending_kind ON __schema__.jobs (kind, run_at)
  INCLUDE (attempts, max_attempts)
  WHERE finished_at IS NULL AND locked_at IS NULL;
-- The console's keyset pages (`ORDER BY id DESC LIMIT n` under a filter) of waiting rows, all
-- kinds or one.
CREATE INDEX jobs_waiting_id ON __schema__.jobs (id)
  WHERE finished_at IS NULL AND locked_at IS NULL;
CREATE INDEX jobs_waiting_kind_id ON __schema__.jobs (kind, id)
  WHERE finished_at IS NULL AND locked_at IS NULL;

-- Running (finished_at IS NULL AND locked_at IS NOT NULL): entered at the claim. Running jobs
-- by worker, for rescue and the Workers tab. Running rows are few (the workers' slots), so what
-- needs them by id or by kind sorts that small set.
CREATE INDEX jobs_running ON __schema__.jobs (locked_by, locked_at)
  WHERE finished_at IS NULL AND locked_at IS NOT NULL;

-- Finished (finished_at IS NOT NULL): entered at the finish. Pruning in batches by age, and
-- browsing finished rows by kind newest first.
CREATE INDEX jobs_finished ON __schema__.jobs (finished_at)
  WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_finished_kind_id ON __schema__.jobs (kind, id)
  WHERE finished_at IS NOT NULL;

-- Small indexes only some rows enter.
-- The unique-jobs guarantee: at most one unfinished job per (kind, unique_key). A finished job
-- frees its key, and so does a dead letter (another table). Producers that race on one key
-- serialise here: the second waits for the first to commit or roll back (INSERT … ON CONFLICT
-- DO NOTHING). The optional window also looks at finished jobs of the key.
CREATE UNIQUE INDEX jobs_unique_key ON __schema__.jobs (kind, unique_key)
  WHERE unique_key IS NOT NULL AND finished_at IS NULL;
CREATE INDEX jobs_unique_key_finished ON __schema__.jobs (kind, unique_key, finished_at)
  WHERE unique_key IS NOT NULL AND finished_at IS NOT NULL;
-- Cancelled jobs newest first, and a job's reruns ("run again as" on its detail view).
CREATE INDEX jobs_cancelled_id ON __schema__.jobs (id)
  WHERE cancelled_at IS NOT NULL;
CREATE INDEX jobs_rerun_of ON __schema__.jobs (rerun_of)
  WHERE rerun_of IS NOT NULL;

-- Dead letters: browsing by kind, grouping by error signature (a group's newest id, and its
-- first and last death, by index probes: died_at included), pruning by age, the `key:` filter.
CREATE INDEX dead_letters_kind ON __schema__.dead_letters (kind, id);
CREATE INDEX dead_letters_signature ON __schema__.dead_letters (kind, error_signature);
CREATE INDEX dead_letters_group
  ON __schema__.dead_letters (kind, error_signature, id) INCLUDE (died_at);
CREATE INDEX dead_letters_group_died ON __schema__.dead_letters (kind, error_signature, died_at);
CREATE INDEX dead_letters_died ON __schema__.dead_letters (died_at);
CREATE INDEX dead_letters_unique_key ON __schema__.dead_letters (kind, unique_key)
  WHERE unique_key IS NOT NULL;

-- Each tick at most once (manual runs aside), and a schedule's recent ticks.
CREATE UNIQUE INDEX schedule_ticks_once
  ON __schema__.schedule_ticks (schedule, tick) WHERE NOT manual;
CREATE INDEX schedule_ticks_recent ON __schema__.schedule_ticks (schedule, enqueued_at);

-- Pruning the audit log, the counts and the flow by age or kind.
CREATE INDEX audit_log_at ON __schema__.audit_log (at);
CREATE INDEX dead_letter_counts_kind ON __schema__.dead_letter_counts (kind);
CREATE INDEX job_flow_minute ON __schema__.job_flow (minute);

-- =========================================================================== the functions

-- ---- the attempt limit and the claim of limited kinds

-- One rule everywhere (claim, retry, rescue, sweep, `why`, the console): a job's effective
-- max_attempts is its kind's handler declaration in `kind_handlers` when that declares one,
-- else the row's own. jobtui_attempt_limits() reads the declarations once per statement (call
-- it as an uncorrelated sub-select); jobtui_max_attempts() applies them to a row. A lowered
-- declaration applies at once: the claim stops taking the jobs it leaves no attempt, and the
-- sweep moves them to dead letters (reason 'exhausted').
CREATE FUNCTION __schema__.jobtui_attempt_limits() RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
  SELECT coalesce(jsonb_object_agg(h.kind, h.max_attempts), '{}'::jsonb)
  FROM __schema__.kind_handlers h
  WHERE h.max_attempts IS NOT NULL
$fn$;

CREATE FUNCTION __schema__.jobtui_max_attempts(
  p_limits jsonb, p_kind text, p_row_max int
) RETURNS int
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce((p_limits ->> p_kind)::int, p_row_max)
$fn$;

-- The claim of kinds with a concurrency or rate limit (jobtui.limits), as ONE statement: it
-- locks the kinds' `kind_limits` rows (SKIP LOCKED: a kind another claim holds is skipped),
-- then, in a second statement inside this function and so with a new snapshot that sees every
-- claim committed before those locks were granted, counts what runs and claims within the
-- limits. The locks end with the statement, so a worker frozen between two round trips (SIGSTOP,
-- a VM pause, a network split) can never hold a kind's row.
-- Rows: claimed jobs (id, kind, attempts, max_attempts), without their payloads: the reply
-- of a statement that holds locks stays a few bytes a job, so a frozen client can never make
-- the server block sending it before its commit (the caller reads the payloads afterwards,
-- holding nothing: worker_claimed_payloads). Rows with id NULL carry, per rate-limited kind
-- out of tokens, the seconds until its next whole token; per kind at its concurrency limit
-- with jobs ready, p_full_poll_s; per kind not looked at (another claim held it, paused, or no
-- longer limited), wait_s NULL.
-- Running jobs are counted in one pass over the small partial index of running jobs; ready
-- rows are taken per kind in run_at order through jobs_pending_kind (the kind matched as a
-- one-value range so the planner keeps to that index; since migration 0029 in claim order,
-- priority first, through jobs_claim_kind).
CREATE FUNCTION __schema__.jobtui_claim_limited(
  p_kinds text[], p_worker text, p_want int, p_full_poll_s float8
) RETURNS TABLE (id bigint, kind text, attempts int, max_attempts int, wait_s float8)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  held text[];
BEGIN
  SELECT coalesce(array_agg(s.kind), '{}') INTO held FROM (
    SELECT l.kind
    FROM __schema__.kind_limits l
    WHERE l.kind = ANY(p_kinds) AND l.limited
      AND NOT EXISTS (SELECT 1 FROM __schema__.paused_kinds p WHERE p.kind = l.kind)
    ORDER BY l.kind
    FOR UPDATE OF l SKIP LOCKED) s;
  RETURN QUERY
  SELECT NULL::bigint, k.k, NULL::int, NULL::int, NULL::float8
  FROM unnest(p_kinds) AS k(k) WHERE k.k <> ALL(held);
  IF cardinality(held) = 0 OR p_want < 1 THEN
    RETURN;
  END IF;
  RETURN QUERY
  WITH am AS MATERIALIZED (
    SELECT __schema__.jobtui_attempt_limits() AS m
  ), lim AS MATERIALIZED (
    SELECT l.kind, l.concurrency, l.per_worker, l.rate, l.period_s,
           CASE WHEN l.rate IS NULL THEN NULL ELSE
             least(l.rate::float8, l.tokens + l.rate::float8 / l.period_s
                   * greatest(0, extract(epoch FROM statement_timestamp() - l.tokens_at)))
           END AS tokens
    FROM __schema__.kind_limits l
    WHERE l.kind = ANY(held)
  ), running AS MATERIALIZED (
    SELECT r.kind, count(*) AS n, count(*) FILTER (WHERE r.locked_by = p_worker) AS mine
    FROM __schema__.jobs r
    WHERE r.finished_at IS NULL AND r.locked_at IS NOT NULL
    GROUP BY r.kind
  ), room AS MATERIALIZED (
    SELECT lim.kind, lim.rate, lim.period_s, lim.tokens,
           greatest(0, least(
             p_want,
             lim.concurrency - coalesce(run.n, 0),
             lim.per_worker - coalesce(run.mine, 0),
             floor(lim.tokens)::int)) AS n
    FROM lim LEFT JOIN running run ON run.kind = lim.kind
  ), pick AS MATERIALIZED (
    SELECT c.id FROM room
    CROSS JOIN LATERAL (
      SELECT x.id, x.priority, x.run_at
      FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts)
        AND NOT x.cancel_requested
      ORDER BY x.kind, x.run_at
      LIMIT room.n
      FOR UPDATE OF x SKIP LOCKED) c
    ORDER BY c.priority DESC, c.run_at, c.id
    LIMIT p_want
  ), claimed AS (
    UPDATE __schema__.jobs j
    SET locked_at = now(), locked_by = p_worker, attempts = j.attempts + 1,
        max_attempts = __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
    WHERE j.id IN (SELECT pick.id FROM pick)
      AND j.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), j.kind, j.max_attempts)
      AND NOT j.cancel_requested
    RETURNING j.id, j.kind, j.attempts, j.max_attempts
  ), taken AS (
    SELECT room.kind, room.rate, room.period_s,
           room.tokens - (SELECT count(*) FROM claimed c WHERE c.kind = room.kind) AS left_
    FROM room WHERE room.rate IS NOT NULL
  ), spent AS (
    UPDATE __schema__.kind_limits l
    SET tokens = t.left_, tokens_at = statement_timestamp()
    FROM taken t WHERE l.kind = t.kind
  )
  SELECT c.id, c.kind, c.attempts, c.max_attempts, NULL::float8 FROM claimed c
  UNION ALL
  SELECT NULL, t.kind, NULL, NULL, ((1 - t.left_) * t.period_s / t.rate)::float8
  FROM taken t WHERE t.left_ < 1
  UNION ALL
  -- A kind with no room for want of a free slot under its concurrency (or per-worker) limit
  -- while jobs of it are ready: room comes back when another worker's job of it finishes,
  -- which sends no NOTIFY. The caller looks again after p_full_poll_s seconds.
  SELECT NULL, room.kind, NULL, NULL, p_full_poll_s
  FROM room
  WHERE room.n = 0 AND (room.tokens IS NULL OR room.tokens >= 1)
    AND EXISTS (
      SELECT 1 FROM __schema__.jobs x
      WHERE x.kind >= room.kind AND x.kind <= room.kind
        AND x.finished_at IS NULL AND x.locked_at IS NULL
        AND x.run_at <= now()
        AND x.attempts < __schema__.jobtui_max_attempts((SELECT m FROM am), x.kind,
                                                         x.max_attempts));
END
$fn$;

-- ---- the move to dead letters

-- The one move of jobs into dead_letters (worker burials, rescues, the exhausted-row sweep).
-- The caller has already chosen and locked the rows (its conditions differ); one statement
-- deletes them from jobs and inserts them into dead_letters, so a job is never in both tables
-- and never in neither. `p_entries` holds, per id (as text), the history entry of the attempt
-- that ended ({attempt, at, error, traceback, worker}) and optionally the effective
-- `max_attempts` to record; an id without an entry keeps its last error and history.
-- The move is never refused. A job keeps its id, except when a dead letter already has that id
-- (the jobs sequence was reset, e.g. by TRUNCATE … RESTART IDENTITY, or a producer chose its
-- ids): then it moves under the next id of the jobs sequence that neither table holds, with an
-- entry in its history naming its old id (nextval only: the worker's role may use the
-- sequence, not set it). Returns the dead letters' ids (the new one for a renumbered job).
CREATE FUNCTION __schema__.jobtui_move_to_dead(
  p_ids bigint[], p_entries jsonb, p_reason text
) RETURNS TABLE (moved_id bigint, moved_kind text)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
DECLARE
  seq regclass := pg_get_serial_sequence('__schema__.jobs', 'id')::regclass;
  renumber jsonb := '{}';
  clash bigint;
  fresh bigint;
BEGIN
  FOR clash IN SELECT d.id FROM __schema__.dead_letters d WHERE d.id = ANY(p_ids) LOOP
    LOOP
      fresh := nextval(seq);
      EXIT WHEN NOT EXISTS (SELECT 1 FROM __schema__.dead_letters d WHERE d.id = fresh)
            AND NOT EXISTS (SELECT 1 FROM __schema__.jobs j WHERE j.id = fresh);
    END LOOP;
    renumber := renumber || jsonb_build_object(clash::text, fresh);
  END LOOP;
  RETURN QUERY
  WITH moved AS (
    DELETE FROM __schema__.jobs j
    WHERE j.id = ANY(p_ids)
    RETURNING j.id, j.kind, j.payload, j.priority, j.attempts, j.max_attempts, j.created_at,
              j.run_at, j.last_error, j.errors, j.unique_key
  ), placed AS (
    SELECT m.*, coalesce((renumber ->> m.id::text)::bigint, m.id) AS new_id FROM moved m
  )
  INSERT INTO __schema__.dead_letters AS d
    (id, kind, payload, priority, attempts, max_attempts, created_at, run_at, last_error,
     errors, reason, unique_key)
  SELECT m.new_id, m.kind, m.payload, m.priority, m.attempts,
         coalesce((p_entries -> m.id::text ->> 'max_attempts')::int, m.max_attempts),
         m.created_at, m.run_at,
         coalesce(p_entries -> m.id::text -> 'entry' ->> 'error', m.last_error),
         m.errors
         || CASE WHEN p_entries -> m.id::text ? 'entry'
                 THEN jsonb_build_array(p_entries -> m.id::text -> 'entry')
                 ELSE '[]'::jsonb END
         || CASE WHEN m.new_id <> m.id
                 THEN jsonb_build_array(jsonb_build_object(
                        'attempt', m.attempts, 'at', to_jsonb(now()), 'traceback', NULL,
                        'worker', NULL,
                        'error', format('Renumbered: job %s moved to dead letters as %s, '
                                        'its id being taken by an older dead letter',
                                        m.id, m.new_id)))
                 ELSE '[]'::jsonb END,
         p_reason, m.unique_key
  FROM placed m
  RETURNING d.id, d.kind;
END
$fn$;

-- ---- the audit log

-- A count only grows, and only on a row written by the same database role (roles.sql grants
-- UPDATE (count) only, for the batches of one action).
CREATE FUNCTION __schema__.jobtui_audit_count_guard() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.count < OLD.count OR OLD.db_role IS DISTINCT FROM current_user
     OR NEW.db_role IS DISTINCT FROM OLD.db_role OR NEW.action IS DISTINCT FROM OLD.action
     OR NEW.filter IS DISTINCT FROM OLD.filter OR NEW.ids IS DISTINCT FROM OLD.ids
     OR NEW.at IS DISTINCT FROM OLD.at OR NEW.os_user IS DISTINCT FROM OLD.os_user THEN
    RAISE EXCEPTION 'audit_log rows are append-only: only the role that wrote a row may add to its count'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$fn$;

-- ---- the counts

-- A row's state (see job_counts). Plain SQL, no SET clause, so the planner inlines it into the
-- triggers' queries.
CREATE FUNCTION __schema__.jobtui_job_state(
  attempts int, max_attempts int, locked_at timestamptz, finished_at timestamptz,
  cancelled_at timestamptz
) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN finished_at IS NOT NULL AND cancelled_at IS NOT NULL THEN 'cancelled'
              WHEN finished_at IS NOT NULL THEN 'succeeded'
              WHEN locked_at IS NOT NULL THEN 'running'
              WHEN attempts >= max_attempts THEN 'exhausted'
              ELSE 'waiting' END
$fn$;

-- Whether a trigger firing folds job_counts now: 1 in 64, in READ COMMITTED only (a fold under
-- REPEATABLE READ could meet a concurrent fold's deletes and fail the caller's statement), not
-- on a connection that said `jobtui.fold_in_trigger = off` (the bundled worker's own,
-- jobtui/worker/link.py, whose housekeeper folds every few seconds, so no claim or completion
-- waits for a fold), and only once job_counts holds more than 10,000 live rows by the
-- statistics (with `track_counts = off` they count nothing: then 1 in 64 whatever the size).
-- Every other writer (the article's producers and consumers, an operator's SQL, a worker
-- behind a transaction pooler, which sets nothing) still folds, so the table stays small
-- with classic consumers alone.
CREATE FUNCTION __schema__.jobtui_trigger_folds_now() RETURNS boolean
LANGUAGE sql VOLATILE AS $fn$
  SELECT random() < 1.0 / 64
     AND current_setting('transaction_isolation') = 'read committed'
     AND current_setting('jobtui.fold_in_trigger', true) IS DISTINCT FROM 'off'
     AND (pg_stat_get_live_tuples('__schema__.job_counts'::regclass) > 10000
          OR current_setting('track_counts') = 'off')
$fn$;

-- The INSERT and UPDATE triggers' functions: one firing per statement (transition tables),
-- never per row, one statement each. A one-row INSERT (a producer), a claim's batch (waiting ->
-- running) and a completion's batch (running -> succeeded) each add a few small rows: the net
-- change per (kind, state, due) with its retrying and cancel_open rows to job_counts, and each
-- kind's net change of unfinished rows to job_flow (an INSERT arrives, a finish departs; a
-- claim or a retry moves a row between unfinished states and changes neither).
CREATE FUNCTION __schema__.jobtui_job_count_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  WITH g AS (
    SELECT s.kind, s.state, s.due, count(*) AS n,
           count(*) FILTER (WHERE s.state = 'waiting' AND s.attempts > 0) AS retrying,
           count(*) FILTER (WHERE s.finished_at IS NULL AND s.cancelled_at IS NOT NULL)
             AS cancel_open
    FROM (SELECT w.kind, w.attempts, w.finished_at, w.cancelled_at,
                 __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                             w.finished_at, w.cancelled_at) AS state,
                 CASE WHEN w.finished_at IS NULL AND w.locked_at IS NULL
                           AND w.attempts < w.max_attempts
                      THEN date_trunc('minute', w.run_at, 'UTC') END AS due
          FROM new_rows w) s
    GROUP BY 1, 2, 3
  ), counts AS (
    INSERT INTO __schema__.job_counts (kind, state, due, n)
    SELECT g.kind, g.state, g.due, g.n FROM g
    UNION ALL
    SELECT g.kind, 'retrying', NULL, g.retrying FROM g WHERE g.retrying <> 0
    UNION ALL
    SELECT g.kind, 'cancel_open', NULL, g.cancel_open FROM g WHERE g.cancel_open <> 0
  )
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), g.kind, sum(g.n), 0
  FROM g
  WHERE g.state IN ('waiting', 'running', 'exhausted')
  GROUP BY g.kind;
  IF __schema__.jobtui_trigger_folds_now() THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION __schema__.jobtui_job_count_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  WITH g AS (
    SELECT s.kind, s.state, s.due, sum(s.sign) AS n,
           coalesce(sum(s.sign) FILTER (WHERE s.state = 'waiting' AND s.attempts > 0), 0)
             AS retrying,
           coalesce(sum(s.sign) FILTER (WHERE s.finished_at IS NULL
                                          AND s.cancelled_at IS NOT NULL), 0) AS cancel_open
    FROM (SELECT -1 AS sign, o.kind, o.attempts, o.finished_at, o.cancelled_at,
                 __schema__.jobtui_job_state(o.attempts, o.max_attempts, o.locked_at,
                                             o.finished_at, o.cancelled_at) AS state,
                 CASE WHEN o.finished_at IS NULL AND o.locked_at IS NULL
                           AND o.attempts < o.max_attempts
                      THEN date_trunc('minute', o.run_at, 'UTC') END AS due
          FROM old_rows o
          UNION ALL
          SELECT 1, w.kind, w.attempts, w.finished_at, w.cancelled_at,
                 __schema__.jobtui_job_state(w.attempts, w.max_attempts, w.locked_at,
                                             w.finished_at, w.cancelled_at),
                 CASE WHEN w.finished_at IS NULL AND w.locked_at IS NULL
                           AND w.attempts < w.max_attempts
                      THEN date_trunc('minute', w.run_at, 'UTC') END
          FROM new_rows w) s
    GROUP BY 1, 2, 3
  ), counts AS (
    INSERT INTO __schema__.job_counts (kind, state, due, n)
    SELECT g.kind, g.state, g.due, g.n FROM g WHERE g.n <> 0
    UNION ALL
    SELECT g.kind, 'retrying', NULL, g.retrying FROM g WHERE g.retrying <> 0
    UNION ALL
    SELECT g.kind, 'cancel_open', NULL, g.cancel_open FROM g WHERE g.cancel_open <> 0
  )
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), g.kind, greatest(sum(g.n), 0),
         greatest(-sum(g.n), 0)
  FROM g
  WHERE g.state IN ('waiting', 'running', 'exhausted')
  GROUP BY g.kind HAVING sum(g.n) <> 0;
  IF __schema__.jobtui_trigger_folds_now() THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

-- The DELETE and TRUNCATE triggers' function (its INSERT and UPDATE branches are not fired:
-- the two above took those over). A DELETE departs; a TRUNCATE empties the counts and writes
-- no departures.
CREATE FUNCTION __schema__.jobtui_job_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text[];
  s text[];
  d timestamptz[];
  n bigint[];
  r bigint[];
  c bigint[];
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.job_counts;
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n),
           array_agg(x.retrying), array_agg(x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, count(*) AS n,
                 count(*) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0) AS retrying,
                 count(*) FILTER (WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL)
                   AS cancel_open
          FROM (SELECT w.*, CASE WHEN w.state = 'waiting'
                                 THEN date_trunc('minute', w.run_at, 'UTC') END AS due
                FROM (SELECT w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
                             __schema__.jobtui_job_state(w.attempts, w.max_attempts,
                               w.locked_at, w.finished_at, w.cancelled_at) AS state
                      FROM new_rows w) w) j
          GROUP BY 1, 2, 3) x;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(-x.n),
           array_agg(-x.retrying), array_agg(-x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, count(*) AS n,
                 count(*) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0) AS retrying,
                 count(*) FILTER (WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL)
                   AS cancel_open
          FROM (SELECT o.*, CASE WHEN o.state = 'waiting'
                                 THEN date_trunc('minute', o.run_at, 'UTC') END AS due
                FROM (SELECT o.kind, o.run_at, o.attempts, o.finished_at, o.cancelled_at,
                             __schema__.jobtui_job_state(o.attempts, o.max_attempts,
                               o.locked_at, o.finished_at, o.cancelled_at) AS state
                      FROM old_rows o) o) j
          GROUP BY 1, 2, 3) x;
  ELSE
    SELECT array_agg(x.kind), array_agg(x.state), array_agg(x.due), array_agg(x.n),
           array_agg(x.retrying), array_agg(x.cancel_open)
    INTO k, s, d, n, r, c
    FROM (SELECT j.kind, j.state, j.due, sum(j.sign) AS n,
                 coalesce(sum(j.sign) FILTER (WHERE j.state = 'waiting' AND j.attempts > 0), 0)
                   AS retrying,
                 coalesce(sum(j.sign) FILTER (WHERE j.finished_at IS NULL
                                                AND j.cancelled_at IS NOT NULL), 0)
                   AS cancel_open
          FROM (SELECT u.*, CASE WHEN u.state = 'waiting'
                                 THEN date_trunc('minute', u.run_at, 'UTC') END AS due
                FROM (SELECT -1 AS sign, o.kind, o.run_at, o.attempts, o.finished_at,
                             o.cancelled_at,
                             __schema__.jobtui_job_state(o.attempts, o.max_attempts,
                               o.locked_at, o.finished_at, o.cancelled_at) AS state
                      FROM old_rows o
                      UNION ALL
                      SELECT 1, w.kind, w.run_at, w.attempts, w.finished_at, w.cancelled_at,
                             __schema__.jobtui_job_state(w.attempts, w.max_attempts,
                               w.locked_at, w.finished_at, w.cancelled_at)
                      FROM new_rows w) u) j
          GROUP BY 1, 2, 3) x
    WHERE x.n <> 0 OR x.retrying <> 0 OR x.cancel_open <> 0;
  END IF;
  -- The changes, grouped by (kind, state, due) with the net number of rows (`n`) and of
  -- retrying and cancel_open rows among them, go to job_counts; the net change of each kind's
  -- unfinished rows goes to job_flow (an INSERT arrives, a finish or a DELETE departs; a claim
  -- or a retry moves a row between unfinished states and changes neither).
  IF k IS NOT NULL THEN
    WITH g AS (
      SELECT * FROM unnest(k, s, d, n, r, c) g(kind, state, due, n, retrying, cancel_open)
    ), counts AS (
      INSERT INTO __schema__.job_counts (kind, state, due, n)
      SELECT g.kind, g.state, g.due, g.n FROM g WHERE g.n <> 0
      UNION ALL
      SELECT g.kind, 'retrying', NULL, sum(g.retrying) FROM g
      GROUP BY g.kind HAVING sum(g.retrying) <> 0
      UNION ALL
      SELECT g.kind, 'cancel_open', NULL, sum(g.cancel_open) FROM g
      GROUP BY g.kind HAVING sum(g.cancel_open) <> 0
    )
    INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
    SELECT date_trunc('minute', now(), 'UTC'), g.kind, greatest(sum(g.n), 0),
           greatest(-sum(g.n), 0)
    FROM g
    WHERE g.state IN ('waiting', 'running', 'exhausted')
    GROUP BY g.kind HAVING sum(g.n) <> 0;
  END IF;
  IF random() < 1.0 / 64 AND current_setting('transaction_isolation') = 'read committed' THEN
    PERFORM __schema__.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION __schema__.jobtui_dead_letter_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  k text;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.dead_letter_counts;
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, count(*) FROM new_rows r GROUP BY r.kind;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT r.kind, -count(*) FROM old_rows r GROUP BY r.kind;
  ELSE  -- UPDATE: only a changed kind moves a count
    INSERT INTO __schema__.dead_letter_counts (kind, n)
    SELECT u.kind, sum(u.n) FROM (
      SELECT r.kind, 1 AS n FROM new_rows r
      UNION ALL
      SELECT r.kind, -1 FROM old_rows r
    ) u GROUP BY u.kind HAVING sum(u.n) <> 0;
  END IF;
  IF random() < 0.05 THEN
    FOR k IN SELECT DISTINCT c.kind FROM __schema__.dead_letter_counts c ORDER BY 1 LOOP
      WITH gone AS (
        DELETE FROM __schema__.dead_letter_counts c WHERE c.kind = k RETURNING c.n
      )
      INSERT INTO __schema__.dead_letter_counts (kind, n)
      SELECT k, sum(g.n) FROM gone g HAVING sum(g.n) <> 0;
    END LOOP;
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION __schema__.jobtui_dead_group_count() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM __schema__.dead_group_counts;
    RETURN NULL;
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT r.kind, r.error_signature, count(*) FROM new_rows r GROUP BY 1, 2;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT r.kind, r.error_signature, -count(*) FROM old_rows r GROUP BY 1, 2;
  ELSE
    INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
    SELECT u.kind, u.error_signature, sum(u.n) FROM (
      SELECT r.kind, r.error_signature, 1 AS n FROM new_rows r
      UNION ALL
      SELECT r.kind, r.error_signature, -1 FROM old_rows r
    ) u GROUP BY 1, 2 HAVING sum(u.n) <> 0;
  END IF;
  RETURN NULL;
END
$fn$;

-- The fold, as of `at`: merges the delta rows into one per (kind, state, due, until) and one
-- per (minute, kind), and drops flow older than the longest snapshot window (7 days). A
-- waiting row keeps a width that grows with how far off it is, seen from the fold's minute m:
--   before m                              one row per kind, due = -infinity, until = m
--   from m to the end of the next hour    per minute (until NULL: one minute)
--   from there to the end of tomorrow     per hour   (until = due + 1 hour)
--   from the day after tomorrow (UTC) on  one row per kind: until = infinity
-- so at most 1 + 120 + 48 + 1 waiting rows per kind. The clock moves on towards coarse rows: a
-- fold that finds one starting where its width is no longer allowed counts that stretch again
-- from the jobs' own index (jobs_pending) and splits it finely; the far row keeps the rest.
-- Deleting the rows and recounting the jobs in one statement sees one snapshot, so a writer
-- still open is in neither and its delta rows come later: counts stay exact. One folder at a
-- time (the others skip); it deletes only rows it sees, so rows of transactions still open are
-- left for the next. Never later than now(), never earlier than the last fold; tests fold as
-- of earlier times to see the clock move.
CREATE FUNCTION __schema__.jobtui_fold_job_counts_at(at timestamptz) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('jobtui_fold_job_counts'),
                                   '__schema__.job_counts'::regclass::oid::int) THEN
    RETURN;
  END IF;
  at := least(at, now());
  WITH h AS (
    -- Never back in time: from where the last fold left the due rows (the -infinity row's
    -- `until`), even when `at` is earlier (a trigger's fold in a transaction that began
    -- before that fold, a clock set back). A coarse row then never starts before the rows
    -- already counted as due, and a recount never meets them.
    SELECT greatest(at, max(c.until) FILTER (WHERE c.state = 'waiting'
                                               AND c.due = '-infinity')) AS at
    FROM __schema__.job_counts c
  ), z AS (
    SELECT date_trunc('minute', h.at, 'UTC') AS m,
           date_trunc('hour', h.at, 'UTC') + interval '2 hours' AS a,
           date_trunc('day', h.at, 'UTC') + interval '2 days' AS b
    FROM h
  ), stale AS (
    -- Coarse waiting rows wider than the bucket their start now falls in: counted again.
    SELECT DISTINCT c.due AS lo, least(c.until, z.b) AS hi
    FROM __schema__.job_counts c CROSS JOIN z
    WHERE c.state = 'waiting' AND c.until IS NOT NULL
      AND CASE WHEN c.due < z.m THEN c.until > z.m
               WHEN c.due < z.a THEN c.until > c.due + interval '1 minute'
               WHEN c.due < z.b THEN c.until > date_trunc('hour', c.due, 'UTC')
                                               + interval '1 hour'
               ELSE false END
  ), gone AS (
    DELETE FROM __schema__.job_counts c RETURNING c.*
  ), redone AS (
    -- gone rows inside a stale stretch are replaced by the recount (and the far remainder)
    SELECT g.*, g.state = 'waiting'
                AND EXISTS (SELECT 1 FROM stale s WHERE g.due >= s.lo AND g.due < s.hi) AS re
    FROM gone g
  ), recount AS (
    SELECT j.kind, date_trunc('minute', j.run_at, 'UTC') AS due, count(*) AS n
    FROM __schema__.jobs j
    WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts < j.max_attempts
      AND EXISTS (SELECT 1 FROM stale s WHERE j.run_at >= s.lo AND j.run_at < s.hi)
      AND j.run_at >= (SELECT min(s.lo) FROM stale s)
      AND j.run_at < (SELECT max(s.hi) FROM stale s)
    GROUP BY 1, 2
  ), rows AS (
    SELECT r.kind, r.state, r.due, r.until, r.n FROM redone r WHERE NOT r.re
    UNION ALL
    SELECT r.kind, 'waiting', r.due, NULL, r.n FROM recount r
    UNION ALL  -- what the stale rows held beyond the recount: the far row's rest
    SELECT x.kind, 'waiting', 'infinity', NULL, sum(x.n) FROM (
      SELECT r.kind, r.n FROM redone r WHERE r.re
      UNION ALL
      SELECT r.kind, -r.n FROM recount r
    ) x GROUP BY x.kind
  )
  INSERT INTO __schema__.job_counts (kind, state, due, until, n)
  SELECT r.kind, r.state, f.due, f.until, sum(r.n)
  FROM rows r CROSS JOIN z
  CROSS JOIN LATERAL (
    SELECT CASE WHEN r.state <> 'waiting' THEN r.due
                WHEN r.due < z.m THEN '-infinity'::timestamptz
                WHEN r.due < z.a THEN date_trunc('minute', r.due, 'UTC')
                WHEN r.due < z.b THEN date_trunc('hour', r.due, 'UTC')
                ELSE z.b END AS due,
           CASE WHEN r.state <> 'waiting' THEN NULL
                WHEN r.due < z.m THEN z.m
                WHEN r.due < z.a THEN NULL
                WHEN r.due < z.b THEN date_trunc('hour', r.due, 'UTC') + interval '1 hour'
                ELSE 'infinity'::timestamptz END AS until
  ) f
  GROUP BY r.kind, r.state, f.due, f.until HAVING sum(r.n) <> 0;
  WITH gone AS (DELETE FROM __schema__.dead_group_counts c RETURNING c.*)
  INSERT INTO __schema__.dead_group_counts (kind, error_signature, n)
  SELECT g.kind, g.error_signature, sum(g.n) FROM gone g
  GROUP BY g.kind, g.error_signature HAVING sum(g.n) <> 0;
  WITH gone AS (DELETE FROM __schema__.job_flow f RETURNING f.*)
  INSERT INTO __schema__.job_flow (minute, kind, arrived, departed)
  SELECT g.minute, g.kind, sum(g.arrived), sum(g.departed)
  FROM gone g
  WHERE g.minute >= date_trunc('minute', now(), 'UTC') - interval '7 days 1 minute'
  GROUP BY g.minute, g.kind;
END
$fn$;

-- What the worker's housekeeper and the triggers call.
CREATE FUNCTION __schema__.jobtui_fold_job_counts() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT __schema__.jobtui_fold_job_counts_at(now())
$fn$;

-- The readers, for every role that may read the snapshot, without a grant on the tables.
-- jobtui_job_counts() returns `until` for the snapshot to bound the stretch it counts from
-- the index (metrics_state_counts).
CREATE FUNCTION __schema__.jobtui_job_counts()
RETURNS TABLE (kind text, state text, due timestamptz, until timestamptz, n bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, c.state, c.due, c.until, sum(c.n)::bigint FROM __schema__.job_counts c
  GROUP BY c.kind, c.state, c.due, c.until HAVING sum(c.n) <> 0
$fn$;

CREATE FUNCTION __schema__.jobtui_job_flow(since timestamptz)
RETURNS TABLE (kind text, arrived bigint, departed bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT f.kind, sum(f.arrived)::bigint, sum(f.departed)::bigint FROM __schema__.job_flow f
  WHERE f.minute >= since GROUP BY f.kind
$fn$;

CREATE FUNCTION __schema__.jobtui_kind_flow_minutes(for_kind text, since timestamptz)
RETURNS TABLE (minute timestamptz, arrived bigint, departed bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT f.minute, sum(f.arrived)::bigint, sum(f.departed)::bigint FROM __schema__.job_flow f
  WHERE f.kind = for_kind AND f.minute >= since
  GROUP BY f.minute
$fn$;

CREATE FUNCTION __schema__.jobtui_dead_letter_counts()
RETURNS TABLE (kind text, dead bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, sum(c.n)::bigint FROM __schema__.dead_letter_counts c
  GROUP BY c.kind HAVING sum(c.n) <> 0
$fn$;

CREATE FUNCTION __schema__.jobtui_dead_group_counts()
RETURNS TABLE (kind text, error_signature text, n bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT c.kind, c.error_signature, sum(c.n)::bigint FROM __schema__.dead_group_counts c
  GROUP BY c.kind, c.error_signature HAVING sum(c.n) <> 0
$fn$;

-- ============================================================================ the triggers

CREATE TRIGGER jobtui_audit_count_guard BEFORE UPDATE ON __schema__.audit_log
  FOR EACH ROW EXECUTE FUNCTION __schema__.jobtui_audit_count_guard();

-- The counts, one firing per statement.
CREATE TRIGGER jobtui_job_count_ins AFTER INSERT ON __schema__.jobs
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count_added();
CREATE TRIGGER jobtui_job_count_upd AFTER UPDATE ON __schema__.jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count_changed();
CREATE TRIGGER jobtui_job_count_del AFTER DELETE ON __schema__.jobs
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();
CREATE TRIGGER jobtui_job_count_trunc AFTER TRUNCATE ON __schema__.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_job_count();

CREATE TRIGGER jobtui_dead_count_ins AFTER INSERT ON __schema__.dead_letters
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_del AFTER DELETE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_upd AFTER UPDATE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();
CREATE TRIGGER jobtui_dead_count_trunc AFTER TRUNCATE ON __schema__.dead_letters
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_letter_count();

CREATE TRIGGER jobtui_dead_group_ins AFTER INSERT ON __schema__.dead_letters
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_del AFTER DELETE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_upd AFTER UPDATE ON __schema__.dead_letters
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();
CREATE TRIGGER jobtui_dead_group_trunc AFTER TRUNCATE ON __schema__.dead_letters
  FOR EACH STATEMENT EXECUTE FUNCTION __schema__.jobtui_dead_group_count();

-- ==================================================================== the rows already there

-- An existing article table's rows, counted once. The triggers above hold jobs' lock from here
-- to commit, so no row is missed or counted twice between this count and the first firing.
-- Flow starts empty: rates need history. (dead_letters was created above: it has no rows.)
WITH j AS (
  SELECT j.kind, j.run_at, j.attempts, j.finished_at, j.cancelled_at,
         __schema__.jobtui_job_state(j.attempts, j.max_attempts, j.locked_at, j.finished_at,
                                     j.cancelled_at) AS state
  FROM __schema__.jobs j
)
INSERT INTO __schema__.job_counts (kind, state, due, n)
SELECT j.kind, j.state, CASE WHEN j.state = 'waiting'
                             THEN date_trunc('minute', j.run_at, 'UTC') END, count(*)
FROM j GROUP BY 1, 2, 3
UNION ALL
SELECT j.kind, 'retrying', NULL, count(*) FROM j
WHERE j.state = 'waiting' AND j.attempts > 0 GROUP BY 1
UNION ALL
SELECT j.kind, 'cancel_open', NULL, count(*) FROM j
WHERE j.finished_at IS NULL AND j.cancelled_at IS NOT NULL GROUP BY 1;
SELECT __schema__.jobtui_fold_job_counts();
