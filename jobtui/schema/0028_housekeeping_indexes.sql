-- The worker's housekeeping reads only the rows it looks for, however many jobs wait.
--
-- At 2,000,000 ready jobs a drain ran at 0.21-0.25x its 20,000 rate, and ~40% of the workers'
-- database CPU went to housekeeping statements (jobtui/sql/worker.sql) that walked the whole
-- table: worker_bury_exhausted (every prune interval, each worker) walked jobs_pkey in id order
-- over every waiting row for the few with no attempt left, 14.9 s; worker_finish_cancelled
-- read jobs_pending and removed 1.59M rows by filter, 3.4 s. (worker_rescue's walk of jobs_pkey
-- is fixed in the statement alone: it reads jobs_running in that index's order.)
--
-- Two small partial indexes of waiting rows, each holding only what one sweep looks for; the
-- statements carry their predicates, so the planner takes them whatever the statistics say:
--
-- jobs_waiting_tried: waiting rows that were tried (attempts > 0: retried, released, rescued)
-- or that their own max_attempts already exhausts. Only these can be exhausted: the handler's
-- declared limit, which jobtui_max_attempts puts first, is at least 1 (jobtui/registry.py
-- refuses anything else, and the CHECK below makes it a rule of the table), so a row never
-- tried is exhausted only by its own max_attempts. A fresh INSERT does not enter it (the hot
-- path is unchanged); a retry or a release writes one more index entry, in a non-HOT update
-- that already writes an entry into every waiting-phase index.
--
-- jobs_waiting_cancel: waiting rows with a cancel request (an older worker released or retried
-- them without looking). A cancel of a waiting row ends it at once, so this holds next to
-- nothing and only such a release or retry writes into it.
--
-- Measured (shared buffers the statement's plan touched; 200,000 waiting and 100,000 finished
-- rows with a few to sweep, as tests/test_housekeeping_scale.py builds them): bury 2,781 -> 92,
-- finish_cancelled 2,715 (2,532-5,380 on waiting rows alone) -> 33, rescue 4,908 -> 86 (156,802
-- where the statistics were taken with half the rows locked), analysed or not. A 2M drain with
-- 2 workers on a shared 2-core machine: 4,139 jobs/s before, 6,241 after (noisy: load 2-6).
--
-- CREATE INDEX (not CONCURRENTLY: migrations run in one transaction) holds SHARE on jobs while
-- it reads the table once per index, blocking writers for that long (a few seconds at 2M rows);
-- `jobtui migrate` bounds the wait for the lock (LockWait) and tries again after a back-off.
-- ADD CONSTRAINT holds ACCESS EXCLUSIVE on kind_handlers (a few rows) for a moment.
-- A row below 1 (written by hand: the registry never wrote one) would fail the ADD CONSTRAINT
-- with PostgreSQL's words, which name neither the kinds nor the way out: said here instead.
DO $do$
DECLARE
  bad text;
BEGIN
  SELECT string_agg(format('%s (%s)', h.kind, h.max_attempts), ', ' ORDER BY h.kind) INTO bad
  FROM __schema__.kind_handlers h WHERE h.max_attempts < 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION '%', 'kind_handlers declares max_attempts below 1 for ' || bad
      || ': set them to NULL (each row''s own limit decides) or to 1 or more, or delete'
      || ' the rows (workers write them again at start), then migrate again';
  END IF;
END
$do$;

ALTER TABLE __schema__.kind_handlers
  ADD CONSTRAINT kind_handlers_max_attempts_check CHECK (max_attempts >= 1);

CREATE INDEX jobs_waiting_tried ON __schema__.jobs (id)
  WHERE finished_at IS NULL AND locked_at IS NULL AND (attempts > 0 OR attempts >= max_attempts);

CREATE INDEX jobs_waiting_cancel ON __schema__.jobs (id)
  WHERE finished_at IS NULL AND locked_at IS NULL AND cancel_requested;
