-- Issue 15 (console at scale): the kind screen's depth chart from the flow rows 0016 keeps.
--
-- The kind screen drew a kind's unfinished count over the last hour or day by reading every
-- unfinished row of the kind (when each was created) and every row finished or dead-lettered
-- in the span: 17,500 rows of one kind of 20 at 2.35M rows (benchmarks/console_scale.py), the
-- largest read of the screen, and one that grows with the backlog it charts. The count
-- triggers already write, per minute and kind, how many unfinished rows arrived (an INSERT)
-- and departed (a finish, a DELETE: also a move to dead_letters), for every writer, and keep
-- them 7 days: the same changes, a few hundred rows to sum. They are also right where the rows
-- were not: a prune, or a consumer that deletes what it did, no longer reads as a lower depth
-- before it (a TRUNCATE of `jobs` still does: it empties the counts and writes no departures).
-- Rows count in the minute their transaction began (now()), as created_at and finished_at do.
-- Readable by any role that reads the snapshot, as jobtui_job_flow().
CREATE OR REPLACE FUNCTION __schema__.jobtui_kind_flow_minutes(for_kind text, since timestamptz)
RETURNS TABLE (minute timestamptz, arrived bigint, departed bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT f.minute, sum(f.arrived)::bigint, sum(f.departed)::bigint FROM __schema__.job_flow f
  WHERE f.kind = for_kind AND f.minute >= since
  GROUP BY f.minute
$fn$;
