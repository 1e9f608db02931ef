-- Issue 11: an operator quiets, resumes or stops a worker through the database.
--   control          what an operator asked of this worker: 'quiet' (stop claiming, finish
--                    running jobs, keep heartbeating), 'stop' (drain and exit as on SIGTERM),
--                    or NULL (work normally; a resume clears 'quiet')
--   control_at       when it was asked (the server's clock)
--   control_by       who asked (the audit log's os_user, user@host)
--   control_applied  what the worker itself says it is doing about it ('quiet', 'stop' or
--                    NULL): written by the worker when it acts, so the console can tell a
--                    request not yet seen (a worker that is not listening and has not yet
--                    heartbeat) from one carried out
-- The heartbeat's upsert leaves these columns alone, so a request survives heartbeats.
ALTER TABLE __schema__.workers
  ADD COLUMN IF NOT EXISTS control         text
    CONSTRAINT workers_control_check CHECK (control IN ('quiet', 'stop')),
  ADD COLUMN IF NOT EXISTS control_at      timestamptz,
  ADD COLUMN IF NOT EXISTS control_by      text,
  ADD COLUMN IF NOT EXISTS control_applied text
    CONSTRAINT workers_control_applied_check CHECK (control_applied IN ('quiet', 'stop'));

-- What the handler of each kind declares that the database otherwise never sees (issue 11's
-- kind screen shows it): its max_attempts (NULL: each job row's own decides), timeout (NULL:
-- none) and retry back-off, as
-- written by the last worker that started with a handler for the kind (jobtui.worker.supervisor;
-- during a rolling deploy, workers may differ: the row says which one wrote it).
CREATE TABLE IF NOT EXISTS __schema__.kind_handlers (
  kind          text primary key,
  max_attempts  int,
  timeout_s     double precision,
  backoff_base_s double precision not null,
  backoff_cap_s  double precision not null,
  declared_by   text not null,
  declared_at   timestamptz not null default now()
);
