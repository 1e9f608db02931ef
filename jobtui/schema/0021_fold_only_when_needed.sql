-- Issue 14 (enqueue): a writer's count trigger folds job_counts only when it has grown.
--
-- Since 0019 one trigger firing in 64 folds job_counts (jobtui_fold_job_counts(): it reads and
-- rewrites every delta row) on every connection but the bundled worker's, whose housekeeper
-- folds every few seconds. So an application's producer paid for a fold every 64th INSERT
-- even while a worker kept the table small, and a producer's fold and the housekeeper's
-- competed for the same rows. Now a trigger also folds only when job_counts holds more than
-- 10,000 live rows (the statistics' live-tuple count, read only on the firing that drew the
-- 1-in-64). A producer beside a worker then folds only when the worker's own writes pass that
-- between two of its housekeeper's folds (a worker draining about 2,000 jobs/s does); with
-- classic consumers alone the table stays near that size (seen: 87-10,506 rows under 4
-- producers and 4 consumers for 90 s), each snapshot summing at most that many rows. The
-- statistics lag the table by up to a second, so after a fold a few more folds may run on a
-- table that is already small; each then reads only those rows.
--
-- With `track_counts = off` the statistics count nothing (pg_stat_get_live_tuples stays 0):
-- there a trigger folds 1 firing in 64 whatever the size, as before. A writer in REPEATABLE
-- READ or SERIALIZABLE never folds (0016: a fold there could fail the caller's statement).
CREATE OR REPLACE FUNCTION __schema__.jobtui_trigger_folds_now() RETURNS boolean
LANGUAGE sql VOLATILE AS $fn$
  SELECT random() < 1.0 / 64
     AND current_setting('transaction_isolation') = 'read committed'
     AND current_setting('jobtui.fold_in_trigger', true) IS DISTINCT FROM 'off'
     AND (pg_stat_get_live_tuples('__schema__.job_counts'::regclass) > 10000
          OR current_setting('track_counts') = 'off')
$fn$;
