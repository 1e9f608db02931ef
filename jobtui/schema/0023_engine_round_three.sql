-- Issue 25 (engine, round three): one rule for the attempt limit, and a claim of limited kinds
-- that holds no lock across a round trip to the worker.
--
-- The attempt limit, one rule everywhere (claim, retry, rescue, sweep, `why`, the console):
-- a job's effective max_attempts is its kind's handler declaration in `kind_handlers` (written
-- by the last worker that started with a handler for the kind) when that declares one, else
-- the row's own max_attempts. jobtui_attempt_limits() reads the declarations once per
-- statement (call it as an uncorrelated sub-select); jobtui_max_attempts() applies them to a
-- row. A lowered declaration applies at once: the claim stops taking the jobs it leaves no
-- attempt, and the sweep moves them to dead letters (reason 'exhausted').
CREATE OR REPLACE FUNCTION __schema__.jobtui_attempt_limits() RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
  SELECT coalesce(jsonb_object_agg(h.kind, h.max_attempts), '{}'::jsonb)
  FROM __schema__.kind_handlers h
  WHERE h.max_attempts IS NOT NULL
$fn$;

CREATE OR REPLACE FUNCTION __schema__.jobtui_max_attempts(
  p_limits jsonb, p_kind text, p_row_max int
) RETURNS int
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce((p_limits ->> p_kind)::int, p_row_max)
$fn$;

-- The claim of kinds with a concurrency or rate limit (jobtui.limits), as ONE statement: it
-- locks the kinds' `kind_limits` rows (SKIP LOCKED: a kind another claim holds is skipped),
-- then, in a second statement inside this function and so with a new snapshot that sees every
-- claim committed before those locks were granted, counts what runs and claims within the
-- limits. Before, the two statements were two round trips of one client transaction: a worker
-- frozen between them (SIGSTOP, a VM pause, a network split) held the kind's row, and every
-- other worker skipped the kind until that connection died. Now the locks end with the
-- statement: the server commits it without waiting for the client.
-- Rows: claimed jobs (id, kind, attempts, max_attempts), without their payloads: the reply
-- of a statement that holds locks stays a few bytes a job, so a frozen client can never make
-- the server block sending it before its commit (the caller reads the payloads afterwards,
-- holding nothing: worker_claimed_payloads). Rows with id NULL carry,
-- per rate-limited kind out of tokens, the seconds until its next whole token; per kind at its
-- concurrency limit with jobs ready, p_full_poll_s; per kind not looked at (another claim held
-- it, paused, or no longer limited), wait_s NULL.
-- Running jobs are counted in one pass over the small partial index of running jobs; ready
-- rows are taken per kind in run_at order through jobs_pending_kind (the kind matched as a
-- one-value range so the planner keeps to that index).
CREATE OR REPLACE FUNCTION __schema__.jobtui_claim_limited(
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

-- A job's move to dead letters is never refused (issue 25 item 8). A job keeps its id when it
-- moves, except when a dead letter already has that id (the jobs sequence was reset, e.g. by
-- TRUNCATE … RESTART IDENTITY, or a producer chose its ids): then it moves under the next id
-- of the jobs sequence that neither table holds, with an entry in its history naming its old
-- id. Drawing those ids moves the sequence past the dead letters' ids it met, so later jobs
-- stop colliding (nextval only: the worker's role may use the sequence, not set it). Before,
-- the move failed, and the job stayed locked ('stuck', or skipped by the sweep) with nothing
-- to resolve it. Everything else as in migration 0004: one statement moves each job, so it is
-- never in both tables and never in neither. Returns the dead letters' ids (the new one for a
-- renumbered job).
CREATE OR REPLACE FUNCTION __schema__.jobtui_move_to_dead(
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
