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
