-- Periodic jobs (issue 13). Definitions are declared in code and upserted by workers at start
-- (jobtui.schedules.sync_schedules); operators pause and resume them; the housekeeper of every
-- worker enqueues due ticks (jobtui.schedules.enqueue_due_ticks).
CREATE TABLE IF NOT EXISTS __schema__.schedules (
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

-- One row per enqueued tick. The unique (schedule, tick) is what makes a tick enqueue exactly
-- once however many workers try; it lives apart from `jobs`, so pruning jobs cannot lose it.
-- Manual runs (run-now) are recorded too, outside that uniqueness.
CREATE TABLE IF NOT EXISTS __schema__.schedule_ticks (
  schedule    text not null references __schema__.schedules (name) ON DELETE CASCADE,
  tick        timestamptz not null,
  job_id      bigint not null,
  manual      boolean not null default false,
  enqueued_at timestamptz not null default now(),
  enqueued_by text
);
CREATE UNIQUE INDEX IF NOT EXISTS schedule_ticks_once
  ON __schema__.schedule_ticks (schedule, tick) WHERE NOT manual;
CREATE INDEX IF NOT EXISTS schedule_ticks_recent
  ON __schema__.schedule_ticks (schedule, enqueued_at);
