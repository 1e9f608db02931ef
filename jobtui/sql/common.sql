-- Statements shared by every part of jobtui.

-- name: schema_present
SELECT to_regclass('__schema__.jobs') IS NOT NULL
   AND to_regclass('__schema__.dead_letters') IS NOT NULL

-- name: backend_pid
-- The server's idea of this session's pid: behind PgBouncer it differs from the pid the client
-- was given at startup (jobtui.db decides prepared statements by it).
SELECT pg_backend_pid()

-- name: output_styles
-- The date and interval output styles psycopg reads (it parses ISO dates and the `postgres`
-- interval style only). Sent only when the server reported another style for the session: a
-- role or database with `DateStyle = 'SQL, DMY'` made every timestamptz fail to load. Both are
-- reported parameters; PgBouncer keeps DateStyle per client across server connections, but
-- IntervalStyle only from 1.20 on, so behind a pooler only DateStyle is set (jobtui.db).
SET DateStyle TO ISO; SET IntervalStyle TO postgres

-- name: output_date_style
SET DateStyle TO ISO

-- name: output_interval_style
SET IntervalStyle TO postgres

-- name: job_phase_waiting
-- Fragments, not statements: the rows of `jobs` in one phase of a job's life, with the phase as
-- a constant `jobtui_phase` column (prefixed: an application's own `jobs` may have a `phase`).
-- Since migration 0020 each index on `jobs` holds the rows of one phase (waiting, running,
-- finished), so a reader whose rows span phases (a kind's rows in every
-- state, the unfinished rows in id order) is written once over `__job_phase__` and run once per
-- phase, each run with its own ORDER BY and LIMIT on that phase's index, and the runs merged:
-- a `__union:NAME__` in a statement is fragment NAME once per phase, joined by UNION ALL
-- (jobtui.browse.statement). In each run the reader's tests of the phase fold to constants, so a
-- run its filter cannot match is never executed. A row is in exactly one phase under any
-- snapshot. Written as a union of whole queries because the planner neither pushes an outer
-- LIMIT into UNION ALL branches nor merges their orders when the branches have WHERE clauses.
(SELECT 'waiting'::text AS jobtui_phase, * FROM __schema__.jobs
 WHERE finished_at IS NULL AND locked_at IS NULL)

-- name: job_phase_running
-- Running rows are few (the workers' slots), and the statistics rarely know how few: asked for
-- them newest first, the planner walked the primary key past every other row (2.2M rows, 0.5 s).
-- So they are all read at once from jobs_running (OFFSET 0 keeps the reader's ORDER BY and
-- LIMIT out) and the reader's filter and order apply to that set: a millisecond for a few
-- thousand running jobs, ~25 ms for 20,000 (tests/test_attack_0020.py). The phase is outside
-- the fence, so a reader that cannot match running rows still never reads them.
(SELECT 'running'::text AS jobtui_phase, running.*
 FROM (SELECT * FROM __schema__.jobs
       WHERE finished_at IS NULL AND locked_at IS NOT NULL OFFSET 0) running)

-- name: job_phase_finished
-- Finished rows have no index in id order but the primary key, and above the newest of them
-- lie the unfinished rows, all of them when a backlog waits (the newest ids): a read of
-- finished rows newest first walked past every one (250,000 rows of a backlog, 0.2-0.5 s at
-- 2.35M rows, benchmarks/console_scale.py). So it starts at the newest finished id, found in
-- jobs_finished_kind_id (kind, id): one probe per kind for the kinds (skipping through the
-- index) and one for each kind's newest row (the kind as a range of one value, as in
-- browse_job_where: with `=` the planner walked the primary key instead). Exact in the
-- statement's snapshot: no finished row lies above it (none at all when there is no finished
-- row). A reader of one kind (every reader here takes %(kind)s) has that kind's index in id
-- order, so the bound is skipped (the planner folds the test of the parameter away). Past
-- 1,000 kinds with finished rows the probes would cost more than the walk they save (about
-- 7.5 us a kind; 400 ms at 50,000 kinds): there the walk starts at the top, as before.
(SELECT 'finished'::text AS jobtui_phase, * FROM __schema__.jobs
 WHERE finished_at IS NOT NULL
   AND (%(kind)s::text IS NOT NULL OR id <= (
     WITH RECURSIVE kinds AS (
       (SELECT f.kind, 1 AS n FROM __schema__.jobs f WHERE f.finished_at IS NOT NULL
        ORDER BY f.kind LIMIT 1)
       UNION ALL
       SELECT (SELECT f.kind FROM __schema__.jobs f
               WHERE f.finished_at IS NOT NULL AND f.kind > k.kind ORDER BY f.kind LIMIT 1),
              k.n + 1
       FROM kinds k WHERE k.kind IS NOT NULL AND k.n < 1000
     )
     SELECT CASE WHEN (SELECT max(k.n) FROM kinds k) >= 1000 THEN 9223372036854775807
            ELSE (SELECT max((SELECT f.id FROM __schema__.jobs f
                              WHERE f.finished_at IS NOT NULL
                                AND f.kind >= k.kind AND f.kind <= k.kind
                              ORDER BY f.kind DESC, f.id DESC LIMIT 1))
                  FROM kinds k WHERE k.kind IS NOT NULL) END)))

-- name: job_rows
-- A fragment: every row of `jobs` with the same `jobtui_phase` column, from the table itself
-- (the planner pulls it up, so every index of `jobs` stays usable and FOR UPDATE works). What a
-- `__union:NAME__` becomes for a reader that no phase's index serves better than the primary
-- key (jobtui.browse.phased_read).
(SELECT CASE WHEN finished_at IS NOT NULL THEN 'finished'
             WHEN locked_at IS NOT NULL THEN 'running'
             ELSE 'waiting' END AS jobtui_phase, *
 FROM __schema__.jobs)
