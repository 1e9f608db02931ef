-- Read queries of the console and the CLI: keyset pages (newest first; jobs in the order of
-- browse_jobs_page: running, waiting in claim order, finished), counts, groups.
--
-- `browse_job_where`, `browse_job_text`, `browse_dead_where` and `browse_dead_text` are filter
-- fragments, not statements: jobtui.browse splices them where a statement says `__job_where__`,
-- `__job_text__`, `__dead_where__` or `__dead_text__`. Every optional part
-- tests its parameter (`%(kind)s::text IS NULL OR …`); the statements run unprepared, so each is
-- planned with its values and the parts left unused fold away before the index is chosen.
-- States as in DESIGN.md: `ready` (unlocked, unfinished, due) and `scheduled` (the same, due
-- later) include retries; `retrying` is the unlocked, unfinished rows with attempts > 0, so a
-- retry matches both `retrying` and `ready` or `scheduled`. The one-word `state` column of a
-- row says `retrying` for those. `exhausted` rows (unlocked, unfinished, attempts >=
-- max_attempts: a consumer gave up on them) can never run and are in no other state.

-- name: browse_job_where
-- Over rows with a `jobtui_phase` column (job_rows, job_phase_* in common.sql), so that in a
-- read split by phase each state's test folds to a constant in the phases it cannot match. The
-- kind and the unique key are matched as ranges of one value (the same rows as `=`) and readers
-- order by them first (browse_filter_order): with `=` the planner takes them as fixed, an id
-- order as good as any, and walked the primary key past every newer row of other kinds.
(%(kind)s::text IS NULL OR (j.kind >= %(kind)s::text AND j.kind <= %(kind)s::text))
AND (%(unique_key)s::text IS NULL
     OR (j.unique_key >= %(unique_key)s::text AND j.unique_key <= %(unique_key)s::text))
AND (NOT %(pending_only)s::boolean OR j.jobtui_phase <> 'finished')
AND (NOT %(cancelled_only)s::boolean OR j.cancelled_at IS NOT NULL)
AND (NOT %(by_state)s::boolean
     OR (%(s_ready)s::boolean AND j.jobtui_phase = 'waiting'
         AND j.run_at <= now() AND j.attempts < j.max_attempts)
     OR (%(s_scheduled)s::boolean AND j.jobtui_phase = 'waiting'
         AND j.run_at > now() AND j.attempts < j.max_attempts)
     OR (%(s_retrying)s::boolean AND j.jobtui_phase = 'waiting'
         AND j.attempts > 0 AND j.attempts < j.max_attempts)
     OR (%(s_running)s::boolean AND j.jobtui_phase = 'running')
     OR (%(s_exhausted)s::boolean AND j.jobtui_phase = 'waiting' AND j.attempts >= j.max_attempts)
     OR (%(s_succeeded)s::boolean AND j.jobtui_phase = 'finished' AND j.cancelled_at IS NULL)
     OR (%(s_cancelled)s::boolean AND j.cancelled_at IS NOT NULL))

-- name: browse_filter_order
-- A fragment: the sort keys of a jobs reader split by phase (see browse_job_where), `__dir__`
-- being DESC or ASC: the kind and the unique key when asked for, else nothing (the planner folds
-- each CASE either way), then the id. Ordered by the kind, a phase's rows come from its index by
-- (kind, id); ordered by the key (no index leads with it), the rows holding it are fetched
-- through a unique-key index and sorted, instead of walking every waiting row newest first in
-- the hope of meeting one (250,000 rows for a key nobody waiting holds).
CASE WHEN %(kind)s::text IS NULL THEN NULL ELSE j.kind END __dir__,
CASE WHEN %(unique_key)s::text IS NULL THEN NULL ELSE j.unique_key END __dir__,
j.id __dir__

-- name: browse_job_text
(%(pattern)s::text IS NULL
 OR j.id = %(text_id)s::bigint
 OR j.payload::text ILIKE %(pattern)s::text ESCAPE '\'
 OR j.last_error ILIKE %(pattern)s::text ESCAPE '\')

-- name: browse_dead_where
(%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
AND (%(unique_key)s::text IS NULL OR d.unique_key = %(unique_key)s::text)
AND (%(signature)s::text IS NULL OR d.error_signature = %(signature)s::text)
AND (%(error)s::text IS NULL OR d.last_error ILIKE %(error)s::text ESCAPE '\')

-- name: browse_dead_text
(%(pattern)s::text IS NULL
 OR d.id = %(text_id)s::bigint
 OR d.payload::text ILIKE %(pattern)s::text ESCAPE '\')

-- name: browse_job_columns
-- The columns of a JobRow (spliced in as __job_columns__). Payloads come back as text and
-- run_at is clamped to years 1-9999, so that one row a Python client cannot decode (jsonb
-- nested deeper than json.loads allows, a date after 9999 or `-infinity`, all insertable by
-- plain SQL) shows as such instead of breaking the page. max_attempts (and so `exhausted`) is
-- the effective limit, by the engine's one rule (jobtui_max_attempts, migration 0023).
j.id, j.kind,
CASE WHEN j.cancelled_at IS NOT NULL THEN 'cancelled'
     WHEN j.finished_at IS NOT NULL THEN 'succeeded'
     WHEN j.locked_at IS NOT NULL THEN 'running'
     WHEN j.attempts >= __schema__.jobtui_max_attempts((SELECT __schema__.jobtui_attempt_limits()),
                                                       j.kind, j.max_attempts) THEN 'exhausted'
     WHEN j.attempts > 0 THEN 'retrying'
     WHEN j.run_at > now() THEN 'scheduled'
     ELSE 'ready' END AS state,
j.payload::text AS payload, j.priority, j.attempts,
__schema__.jobtui_max_attempts((SELECT __schema__.jobtui_attempt_limits()), j.kind,
                               j.max_attempts) AS max_attempts,
greatest(least(j.run_at, '9999-12-31 23:59:59+00'::timestamptz),
         '0001-01-02 00:00:00+00'::timestamptz) AS run_at, j.created_at,
j.locked_at, j.locked_by, j.finished_at, j.cancelled_at, j.cancel_requested,
j.last_error, j.errors, j.unique_key

-- name: browse_dead_columns
-- The columns of a DeadLetterRow (spliced in as __dead_columns__), read as for jobs.
d.id, d.kind, d.payload::text AS payload, d.priority, d.attempts, d.max_attempts,
d.created_at,
greatest(least(d.run_at, '9999-12-31 23:59:59+00'::timestamptz),
         '0001-01-02 00:00:00+00'::timestamptz) AS run_at,
d.last_error, d.errors, d.reason, d.died_at, d.error_signature, d.unique_key

-- name: browse_jobs_page
-- A keyset page of jobs in the console's order: running rows (few) newest first, then waiting
-- rows in claim order (priority DESC, run_at, id: what runs next comes first), then finished
-- rows newest first. Each phase is read through its own index (job_phase_* in common.sql) and
-- the runs merged. Waiting rows come from the claim's own indexes, jobs_claim (priority DESC,
-- run_at, id) or for a kind jobs_claim_kind (kind, priority DESC, …): migration 0025 dropped the
-- waiting rows' indexes in id order, which only this page needed. The page continues after the
-- cursor (jobtui.browse.JobCursor): `c_rank` the phase of the last row (0 running, 1 waiting,
-- 2 finished), `c_id` its id, and for a waiting row `c_priority` and `c_run_at` (run_at as
-- text: exact, and infinite dates too). Within its priority a waiting cursor continues on
-- (run_at, id) as one index condition, the lower priorities in a second run from their start:
-- never a walk over the rows already shown. A row moves forward in this order when it finishes
-- (a waiting or running row already shown would come again among the finished ones), so the
-- finished rows shown are those finished by `c_listed_at`, when the listing's first page was
-- read (a row finished later, shown or not, is left out; one retried, from running back to
-- waiting, can still come twice). `jobtui_rank`, `jobtui_cursor_run_at` and
-- `jobtui_listed_at` are what the next cursor is made of. `c_listed_at` is the first page's
-- now(), or the newest finished_at if later: rows finished before the listing began can carry
-- a finished_at past now() (the server's clock stepped back, a restore from a host whose clock
-- ran ahead), and the first page, which has no bound, shows them; later pages must too (one
-- probe of jobs_finished; until the clock catches up, a row that finishes during the walk may
-- then come twice, never none).
SELECT p.*,
       coalesce(%(c_listed_at)s::text,
                greatest(now(), (SELECT max(f.finished_at) FROM __schema__.jobs f
                                 WHERE f.finished_at IS NOT NULL))::text) AS jobtui_listed_at
FROM (
  (SELECT 0 AS jobtui_rank, j.run_at::text AS jobtui_cursor_run_at, __job_columns__
   FROM __job_phase_running__ j
   WHERE (%(c_rank)s::int IS NULL OR (%(c_rank)s::int = 0 AND j.id < %(c_id)s::bigint))
     AND __job_where__ AND __job_text__
   ORDER BY __filter_order_desc__
   LIMIT %(limit)s)
  UNION ALL
  (SELECT 1, j.run_at::text, __job_columns__
   FROM __job_phase_waiting__ j
   WHERE %(c_rank)s::int = 1 AND j.priority = %(c_priority)s::int
     AND (j.run_at, j.id) > (%(c_run_at)s::timestamptz, %(c_id)s::bigint)
     AND __job_where__ AND __job_text__
   ORDER BY __claim_order__
   LIMIT %(limit)s)
  UNION ALL
  (SELECT 1, j.run_at::text, __job_columns__
   FROM __job_phase_waiting__ j
   WHERE (%(c_rank)s::int IS NULL OR %(c_rank)s::int = 0
          OR (%(c_rank)s::int = 1 AND j.priority < %(c_priority)s::int))
     AND __job_where__ AND __job_text__
   ORDER BY __claim_order__
   LIMIT %(limit)s)
  UNION ALL
  (SELECT 2, j.run_at::text, __job_columns__
   FROM __job_phase_finished__ j
   WHERE (%(c_rank)s::int IS NULL OR %(c_rank)s::int < 2 OR j.id < %(c_id)s::bigint)
     AND (%(c_listed_at)s::timestamptz IS NULL OR j.finished_at <= %(c_listed_at)s::timestamptz)
     AND __job_where__ AND __job_text__
   ORDER BY __filter_order_desc__
   LIMIT %(limit)s)
) p
ORDER BY p.jobtui_rank,
         CASE WHEN p.jobtui_rank = 1 THEN p.priority END DESC,
         CASE WHEN p.jobtui_rank = 1 THEN p.jobtui_cursor_run_at::timestamptz END,
         CASE WHEN p.jobtui_rank = 1 THEN p.id END,
         CASE WHEN p.jobtui_rank <> 1 THEN p.id END DESC
LIMIT %(limit)s

-- name: browse_claim_order
-- A fragment: the claim order of waiting rows (spliced in as __claim_order__), after the kind
-- and the unique key when asked for (as browse_filter_order): jobs_claim_kind serves a kind,
-- jobs_claim all kinds.
CASE WHEN %(kind)s::text IS NULL THEN NULL ELSE j.kind END,
CASE WHEN %(unique_key)s::text IS NULL THEN NULL ELSE j.unique_key END,
j.priority DESC, j.run_at, j.id

-- name: browse_job_position
-- Where the job with this id stands in browse_jobs_page's order, for a page continued from a
-- bare id (a caller that kept only the id of the last row it saw).
SELECT CASE WHEN j.finished_at IS NOT NULL THEN 2 WHEN j.locked_at IS NOT NULL THEN 0 ELSE 1 END
         AS rank,
       j.priority, j.run_at::text AS run_at
FROM __schema__.jobs j
WHERE j.id = %(id)s

-- name: browse_job_by_id
SELECT __job_columns__
FROM __schema__.jobs j
WHERE j.id = %(id)s

-- name: browse_jobs_count
SELECT coalesce(sum(c.n), 0)::bigint AS n FROM (__union:browse_jobs_count_rows__) c

-- name: browse_jobs_count_rows
SELECT count(*) AS n FROM __job_phase__ j WHERE __job_where__ AND __job_text__

-- name: browse_jobs_count_capped
-- At most `cap` + 1 rows are read: more than `cap` shows as "10k+" (jobtui.browse).
SELECT count(*) FROM (
  SELECT 1 FROM (__union:browse_jobs_capped_rows__) u LIMIT %(cap)s + 1
) c

-- name: browse_jobs_capped_rows
SELECT 1 FROM __job_phase__ j WHERE __job_where__ AND __job_text__ LIMIT %(cap)s + 1

-- name: browse_oldest_ready_job
-- The ready job that has waited longest (of one kind, or of all): the console's `o`. One probe
-- of an index on unfinished rows in run_at order: jobs_pending_kind (kind, run_at) for a kind,
-- jobs_pending (run_at) for all kinds (jobs_claim leads with priority, not run_at); ahead of
-- the first ready entry are only running and exhausted rows. EXPLAIN at 2.35M rows
-- (benchmarks/scale.py): an index scan of either and an incremental sort on id, 0.1 ms.
SELECT j.id FROM __schema__.jobs j
WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.attempts < j.max_attempts
  AND j.run_at <= now()
  AND (%(kind)s::text IS NULL OR j.kind = %(kind)s::text)
ORDER BY j.run_at, j.id
LIMIT 1

-- name: browse_dead_page
SELECT __dead_columns__
FROM __schema__.dead_letters d
WHERE (%(before)s::bigint IS NULL OR d.id < %(before)s::bigint)
  AND __dead_where__
  AND __dead_text__
ORDER BY d.id DESC
LIMIT %(limit)s

-- name: browse_dead_by_id
SELECT __dead_columns__
FROM __schema__.dead_letters d
WHERE d.id = %(id)s

-- name: browse_dead_count
SELECT count(*) FROM __schema__.dead_letters d WHERE __dead_where__ AND __dead_text__

-- name: browse_dead_count_capped
SELECT count(*) FROM (
  SELECT 1 FROM __schema__.dead_letters d WHERE __dead_where__ AND __dead_text__
  LIMIT %(cap)s + 1
) c

-- name: browse_dead_groups
SELECT d.kind, d.error_signature, count(*) AS count,
       min(d.died_at) AS first_seen, max(d.died_at) AS last_seen, max(d.id) AS sample_id
FROM __schema__.dead_letters d
WHERE __dead_where__ AND __dead_text__
GROUP BY d.kind, d.error_signature
ORDER BY count(*) DESC, max(d.died_at) DESC, d.kind, d.error_signature
LIMIT %(limit)s

-- name: browse_dead_groups_counted
-- browse_dead_groups when no filter needs the rows (none, a kind, a signature): each group's
-- size from migration 0016's per-group counts, its first and last death and newest id from
-- one index probe each, so a few dozen index entries are read instead of every dead letter.
SELECT g.kind, g.error_signature, g.n AS count, f.first_seen, l.last_seen, s.sample_id
FROM __schema__.jobtui_dead_group_counts() g
CROSS JOIN LATERAL (
  SELECT d.died_at AS first_seen FROM __schema__.dead_letters d
  WHERE d.kind = g.kind AND d.error_signature = g.error_signature
  ORDER BY d.died_at LIMIT 1) f
CROSS JOIN LATERAL (
  SELECT d.died_at AS last_seen FROM __schema__.dead_letters d
  WHERE d.kind = g.kind AND d.error_signature = g.error_signature
  ORDER BY d.died_at DESC LIMIT 1) l
CROSS JOIN LATERAL (
  SELECT d.id AS sample_id FROM __schema__.dead_letters d
  WHERE d.kind = g.kind AND d.error_signature = g.error_signature
  ORDER BY d.id DESC LIMIT 1) s
WHERE (%(kind)s::text IS NULL OR g.kind = %(kind)s::text)
  AND (%(signature)s::text IS NULL OR g.error_signature = %(signature)s::text)
ORDER BY g.n DESC, l.last_seen DESC, g.kind, g.error_signature
LIMIT %(limit)s

-- name: browse_kinds
-- Distinct kinds by skipping through the indexes (one probe per kind), not by reading rows:
-- waiting rows' kinds through an index by kind, running rows' (few) from jobs_running.
WITH RECURSIVE pending AS (
  (SELECT j.kind FROM __schema__.jobs j WHERE j.finished_at IS NULL AND j.locked_at IS NULL
   ORDER BY j.kind LIMIT 1)
  UNION ALL
  SELECT (SELECT j.kind FROM __schema__.jobs j
          WHERE j.finished_at IS NULL AND j.locked_at IS NULL AND j.kind > p.kind
          ORDER BY j.kind LIMIT 1)
  FROM pending p WHERE p.kind IS NOT NULL
), running AS (
  SELECT DISTINCT j.kind FROM __schema__.jobs j
  WHERE j.finished_at IS NULL AND j.locked_at IS NOT NULL
), dead AS (
  (SELECT d.kind FROM __schema__.dead_letters d ORDER BY d.kind LIMIT 1)
  UNION ALL
  SELECT (SELECT d.kind FROM __schema__.dead_letters d
          WHERE d.kind > x.kind ORDER BY d.kind LIMIT 1)
  FROM dead x WHERE x.kind IS NOT NULL
)
SELECT kind FROM pending WHERE kind IS NOT NULL
UNION
SELECT kind FROM running
UNION
SELECT kind FROM dead WHERE kind IS NOT NULL
UNION
SELECT kind FROM __schema__.paused_kinds
ORDER BY 1

-- name: browse_can_write
-- Each reason an operator action would fail, apart, so the console can say which.
SELECT has_any_column_privilege('__schema__.jobs', 'UPDATE')
   AND has_table_privilege('__schema__.dead_letters', 'DELETE')
   AND has_any_column_privilege('__schema__.audit_log', 'INSERT') AS privileged,
       current_setting('transaction_read_only') = 'on'
    OR current_setting('default_transaction_read_only') = 'on' AS read_only,
       pg_is_in_recovery() AS replica

-- name: browse_dead_by_ids_page
SELECT __dead_columns__
FROM __schema__.dead_letters d
WHERE d.id = ANY(%(ids)s::bigint[])
  AND (%(before)s::bigint IS NULL OR d.id < %(before)s::bigint)
  AND __dead_where__
  AND __dead_text__
ORDER BY d.id DESC
LIMIT %(limit)s

-- name: browse_jobs_search_page
-- Text search cannot use an index, so each page examines a bounded scope: the newest
-- `scan` rows below `before` that pass the indexable filters. `scope_lo`/`scope_n` tell the
-- caller where the scope ended, so the next page can carry on below it.
WITH scope AS MATERIALIZED (
  SELECT u.* FROM (__union:browse_jobs_scope_rows__) u ORDER BY u.id DESC LIMIT %(scan)s
), hits AS MATERIALIZED (
  SELECT j.id FROM scope j WHERE __job_text__ ORDER BY j.id DESC LIMIT %(limit)s
), bounds AS (
  SELECT min(id) AS scope_lo, count(*) AS scope_n FROM scope
)
SELECT b.scope_lo, b.scope_n, r.*
FROM bounds b
LEFT JOIN LATERAL (
  SELECT __job_columns__
  FROM __schema__.jobs j
  WHERE j.id = ANY(ARRAY(SELECT id FROM hits))
) r ON true
ORDER BY r.id DESC

-- name: browse_jobs_scope_rows
SELECT j.id, j.payload, j.last_error FROM __job_phase__ j
WHERE (%(before)s::bigint IS NULL OR j.id < %(before)s::bigint)
  AND __job_where__
ORDER BY __filter_order_desc__
LIMIT %(scan)s

-- name: browse_dead_search_page
WITH scope AS MATERIALIZED (
  SELECT d.id, d.payload FROM __schema__.dead_letters d
  WHERE (%(before)s::bigint IS NULL OR d.id < %(before)s::bigint)
    AND __dead_where__
  ORDER BY d.id DESC
  LIMIT %(scan)s
), hits AS MATERIALIZED (
  SELECT d.id FROM scope d WHERE __dead_text__ ORDER BY d.id DESC LIMIT %(limit)s
), bounds AS (
  SELECT min(id) AS scope_lo, count(*) AS scope_n FROM scope
)
SELECT b.scope_lo, b.scope_n, r.*
FROM bounds b
LEFT JOIN LATERAL (
  SELECT __dead_columns__
  FROM __schema__.dead_letters d
  WHERE d.id = ANY(ARRAY(SELECT id FROM hits))
) r ON true
ORDER BY r.id DESC

-- name: browse_paused_kinds
SELECT p.kind, p.paused_by, p.paused_at FROM __schema__.paused_kinds p ORDER BY p.kind

-- name: browse_read_settings
-- Run first in each browse read's own transaction (jobtui.browse.fetch_dicts says why): no JIT;
-- random page reads costed as on an SSD or from cache (1.1; PostgreSQL's default of 4 is for
-- spinning disks), so that a page of a kind's ready jobs walks that kind's index instead of
-- every waiting row in id order (2.3 ms against 53 ms at 200,000 waiting rows,
-- benchmarks/scale.py); and, with `serial` (a read split by phase), no parallel workers: their
-- start-up costs more than reading a few index entries (16 ms against 0.2 ms for a page's
-- running rows), and a phase the filter rules out was still planned as a parallel scan.
SELECT set_config('jit', 'off', true), set_config('random_page_cost', '1.1', true),
       CASE WHEN %(serial)s::boolean
            THEN set_config('max_parallel_workers_per_gather', '0', true) END

-- name: browse_statement_timeout
-- The console's session limit on every statement (jobtui.tui.connection.Link), set once per
-- connection when the session is its own (never behind a transaction pooler).
SELECT set_config('statement_timeout', %(ms)s, false)
