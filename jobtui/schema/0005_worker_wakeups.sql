-- How each worker is woken (issues 12 and 15). A worker behind a transaction pooler, or whose
-- LISTEN hears nothing (checked by a self-NOTIFY probe sent from another connection), falls
-- back to polling and says so here, so the console and `stats` can show it instead of
-- assuming LISTEN works.
--   wakeup_mode      'listen' (LISTEN connected and its last probe was heard) or 'polling'
--   wakeup_note      why it polls, in words (e.g. "behind a transaction pooler; no --listen-dsn")
--   listen_connected whether the LISTEN connection is up right now
--   last_wakeup_at   when a NOTIFY last woke it (a probe's echo counts)
--   poll_interval_s  how often it polls for ready jobs when no NOTIFY comes
ALTER TABLE __schema__.workers
  ADD COLUMN IF NOT EXISTS wakeup_mode      text not null default 'listen',
  ADD COLUMN IF NOT EXISTS wakeup_note      text,
  ADD COLUMN IF NOT EXISTS listen_connected boolean not null default true,
  ADD COLUMN IF NOT EXISTS last_wakeup_at   timestamptz,
  ADD COLUMN IF NOT EXISTS poll_interval_s  double precision not null default 1;
