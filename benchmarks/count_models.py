"""Issue 24: what each way of keeping the console's counts charges a job's writes.

Each counting model gets a scratch database of its own, migrated with jobtui's migrator, and a
procedure (benchmarks/write_cost.py's --in-server harness: one statement and one COMMIT per
job, synchronous_commit off, clocked by clock_timestamp()) that runs `--jobs` jobs through an
INSERT with its NOTIFY, a claim of one, a completion of one, then `--jobs` more through claims
and completions of 100 rows a statement. Rounds rotate over the models, so the machine's drift
hits all of them. The statements are the article's (benchmarks/floor.py); "writer counts" runs
them as data-modifying CTEs that append the delta rows the triggers would have written.

  A shipped                    the statement triggers with transition tables (0024-0027)
  B no counting                ALTER TABLE jobs DISABLE TRIGGER USER: the floor
  C when, writer counts        the INSERT/UPDATE triggers get `WHEN (current_setting(
                               'jobtui.counted', true) IS DISTINCT FROM 'on')`; the session sets
                               it and its statements count themselves
  C when, foreign writer       the same schema, plain statements, the setting unset
  C return, writer counts      the trigger functions return at once when the setting is on
  C return, foreign writer
  D row triggers               FOR EACH ROW triggers (no transition tables) write the same rows

Every session sets jobtui.fold_in_trigger = off (as the bundled worker does), so no fold is
timed, and plan_cache_mode = force_generic_plan: with custom plans the writer's completion
CTE (its ids a parameter) cost ~60 µs more than the trigger, gone with generic plans.
At the end each model's counts are checked against the rows (the folded job_counts per state
and job_flow's net arrivals against a count of `jobs`). `--read-rows` times model E, nothing
written, the Overview's per-kind counts of waiting rows read at query time (exact, and bounded
at 1,000 a kind by the jobs_pending_kind index), beside the shipped read of job_counts, on
that many waiting rows.

    .venv/bin/python -m benchmarks.count_models [--rounds 3 --jobs 2000]
        [--read-rows 200000,2000000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from benchmarks.common import Bench
from benchmarks.enqueue import ARTICLE_ENQUEUE
from benchmarks.floor import CLAIM, JOBTUI_ORDER
from benchmarks.write_cost import ADMIN_DSN

SHIPPED, FLOOR = "A shipped", "B no counting"
WHEN_W, WHEN_F = "C when, writer counts", "C when, foreign writer"
RET_W, RET_F = "C return, writer counts", "C return, foreign writer"
ROWS = "D row triggers"
MODELS = (SHIPPED, FLOOR, WHEN_W, WHEN_F, RET_W, RET_F, ROWS)
WRITER = (WHEN_W, RET_W)
WRITES = ("insert + notify", "claim one", "complete one", "claim 100", "complete 100")
BATCH = 100
GUARD = "current_setting('jobtui.counted', true) IS DISTINCT FROM 'on'"
MINUTE = "date_trunc('minute', {}, 'UTC')"

# The statements as plpgsql: `bids_` gets the claimed ids, `jids_` holds the ids to complete.
ENQ = ARTICLE_ENQUEUE.replace("%s, %s", "'bench', '{}'").replace(
    "RETURNING id", "RETURNING id, kind, run_at"
)
CLAIMED = CLAIM.format(order=JOBTUI_ORDER).replace(
    "RETURNING id", "RETURNING id, kind, run_at, attempts"
)
ENQ_CTE = ENQ.split("\nSELECT id")[0]  # the WITH ins AS (INSERT …) part
DONE = "UPDATE jobs SET finished_at = now() WHERE id = ANY(jids_) RETURNING kind, cancelled_at"
PLAIN = {
    "enqueue": ENQ.replace("FROM ins", "INTO rec_ FROM ins"),
    "claim": f"WITH u AS ({CLAIMED}) SELECT array_agg(id) INTO bids_ FROM u",
    "complete": DONE.split(" RETURNING")[0],
}
# What a writer that knows its rows appends: an INSERT adds a waiting row due at its run_at
# minute and an arrival; a claim (of waiting rows: the worker's takes no other) moves them to
# running; a completion (of the rows it holds) to succeeded, or cancelled with its cancel_open
# row gone, and a departure. The same keys and n as the triggers' rows for those rows.
COUNTED = {
    "enqueue": f"""{ENQ_CTE},
  c AS (INSERT INTO job_counts (kind, state, due, n)
        SELECT kind, 'waiting', {MINUTE.format("run_at")}, count(*) FROM ins GROUP BY 1, 3),
  f AS (INSERT INTO job_flow (minute, kind, arrived, departed)
        SELECT {MINUTE.format("now()")}, kind, count(*), 0 FROM ins GROUP BY 2)
SELECT id, pg_notify('jobs', 'bench') INTO rec_ FROM ins""",
    "claim": f"""WITH u AS ({CLAIMED}),
  c AS (INSERT INTO job_counts (kind, state, due, n)
        SELECT u.kind, s.state, s.due, sum(s.n) FROM u CROSS JOIN LATERAL (VALUES
          ('waiting', {MINUTE.format("run_at")}, -1), ('running', NULL, 1),
          ('retrying', NULL, -(attempts > 1)::int)) s(state, due, n)
        WHERE s.n <> 0 GROUP BY 1, 2, 3)
SELECT array_agg(id) INTO bids_ FROM u""",
    "complete": f"""WITH u AS ({DONE}),
  c AS (INSERT INTO job_counts (kind, state, due, n)
        SELECT u.kind, s.state, NULL, sum(s.n) FROM u CROSS JOIN LATERAL (VALUES
          ('running', -1),
          (CASE WHEN cancelled_at IS NULL THEN 'succeeded' ELSE 'cancelled' END, 1),
          ('cancel_open', -(cancelled_at IS NOT NULL)::int)) s(state, n)
        WHERE s.n <> 0 GROUP BY 1, 2),
  f AS (INSERT INTO job_flow (minute, kind, arrived, departed)
        SELECT {MINUTE.format("now()")}, kind, 0, count(*) FROM u GROUP BY 2)
SELECT count(*) INTO cnt_ FROM u""",
}

# Model D: one firing per row, OLD and NEW instead of transition tables, the same rows written
# (netted per key as the statement triggers net them).
ROW_TRIGGERS = """
CREATE FUNCTION bench_count_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  os text := CASE WHEN TG_OP <> 'INSERT' THEN public.jobtui_job_state(OLD.attempts,
                OLD.max_attempts, OLD.locked_at, OLD.finished_at, OLD.cancelled_at) END;
  ns text := CASE WHEN TG_OP <> 'DELETE' THEN public.jobtui_job_state(NEW.attempts,
                NEW.max_attempts, NEW.locked_at, NEW.finished_at, NEW.cancelled_at) END;
  od timestamptz := CASE WHEN os = 'waiting' THEN date_trunc('minute', OLD.run_at, 'UTC') END;
  nd timestamptz := CASE WHEN ns = 'waiting' THEN date_trunc('minute', NEW.run_at, 'UTC') END;
  added bigint;
BEGIN
  WITH c AS (
    INSERT INTO public.job_counts (kind, state, due, n)
    SELECT v.kind, v.state, v.due, sum(v.n) FROM (VALUES
      (OLD.kind, os, od, -1), (NEW.kind, ns, nd, 1),
      (OLD.kind, 'retrying', NULL, -(os = 'waiting' AND OLD.attempts > 0)::int),
      (NEW.kind, 'retrying', NULL, (ns = 'waiting' AND NEW.attempts > 0)::int),
      (OLD.kind, 'cancel_open', NULL,
       -(OLD.finished_at IS NULL AND OLD.cancelled_at IS NOT NULL)::int),
      (NEW.kind, 'cancel_open', NULL,
       (NEW.finished_at IS NULL AND NEW.cancelled_at IS NOT NULL)::int)
    ) v(kind, state, due, n)
    WHERE v.state IS NOT NULL AND v.n <> 0
    GROUP BY 1, 2, 3 HAVING sum(v.n) <> 0
    RETURNING 1)
  SELECT count(*) INTO added FROM c;
  INSERT INTO public.job_flow (minute, kind, arrived, departed)
  SELECT date_trunc('minute', now(), 'UTC'), v.kind, greatest(sum(v.n), 0), greatest(-sum(v.n), 0)
  FROM (VALUES (OLD.kind, os, -1), (NEW.kind, ns, 1)) v(kind, state, n)
  WHERE v.state IN ('waiting', 'running', 'exhausted')
  GROUP BY v.kind HAVING sum(v.n) <> 0;
  IF public.jobtui_trigger_folds_now(added) THEN
    PERFORM public.jobtui_fold_job_counts();
  END IF;
  RETURN NULL;
END
$fn$;
DROP TRIGGER jobtui_job_count_ins ON jobs;
DROP TRIGGER jobtui_job_count_upd ON jobs;
DROP TRIGGER jobtui_job_count_del ON jobs;
CREATE TRIGGER bench_count_row AFTER INSERT OR UPDATE OR DELETE ON jobs
  FOR EACH ROW EXECUTE FUNCTION bench_count_row();
"""
WHEN_TRIGGERS = f"""
DROP TRIGGER jobtui_job_count_ins ON jobs;
DROP TRIGGER jobtui_job_count_upd ON jobs;
CREATE TRIGGER jobtui_job_count_ins AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN ({GUARD}) EXECUTE FUNCTION jobtui_job_count_added();
CREATE TRIGGER jobtui_job_count_upd AFTER UPDATE ON jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT WHEN ({GUARD}) EXECUTE FUNCTION jobtui_job_count_changed();
"""
# The check of each model's counts against its rows: (folded count, counted rows) per state,
# then job_flow's net arrivals against the unfinished rows.
CHECK = """
SELECT coalesce((SELECT jsonb_object_agg(state, n ORDER BY state) FROM (
         SELECT state, sum(n) AS n FROM jobtui_job_counts() c(kind, state, due, until, n)
         GROUP BY 1 HAVING sum(n) <> 0) x), '{}'),
       coalesce((SELECT jsonb_object_agg(state, n ORDER BY state) FROM (
         SELECT jobtui_job_state(attempts, max_attempts, locked_at, finished_at, cancelled_at)
                AS state, count(*) AS n FROM jobs GROUP BY 1) y), '{}'),
       (SELECT coalesce(sum(arrived - departed), 0) FROM job_flow),
       (SELECT count(*) FROM jobs WHERE finished_at IS NULL)
"""


def procedure(model: str) -> str:
    """The timed procedure: out_[i] is the seconds spent on WRITES[i]."""
    s = COUNTED if model in WRITER else PLAIN
    claim = s["claim"].replace("%(batch)s", "b_")
    return f"""
CREATE PROCEDURE bench_counts(n_ int, INOUT out_ float8[]) LANGUAGE plpgsql AS $proc$
#variable_conflict use_column
DECLARE
  rec_ record; cnt_ bigint; t_ timestamptz; b_ int; bids_ bigint[]; jids_ bigint[];
  ids_ bigint[];
BEGIN
  FOR phase_ IN 0..1 LOOP
    b_ := CASE phase_ WHEN 0 THEN 1 ELSE {BATCH} END;
    t_ := clock_timestamp();
    FOR k_ IN 1..n_ LOOP {s["enqueue"]}; COMMIT; END LOOP;
    IF phase_ = 0 THEN out_[1] := extract(epoch FROM clock_timestamp() - t_); END IF;
    ids_ := '{{}}';
    t_ := clock_timestamp();
    FOR k_ IN 1..n_ / b_ LOOP {claim}; ids_ := ids_ || bids_; COMMIT; END LOOP;
    out_[2 + 2 * phase_] := extract(epoch FROM clock_timestamp() - t_);
    t_ := clock_timestamp();
    FOR k_ IN 1..n_ / b_ LOOP
      jids_ := ids_[(k_ - 1) * b_ + 1 : k_ * b_]; {s["complete"]}; COMMIT;
    END LOOP;
    out_[3 + 2 * phase_] := extract(epoch FROM clock_timestamp() - t_);
  END LOOP;
END
$proc$"""


def prepare(conn: psycopg.Connection, model: str) -> str:
    """Turn the migrated schema at `conn` into `model`'s; what PostgreSQL said if it refused."""
    try:
        if model == FLOOR:
            conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
        elif model in (WHEN_W, WHEN_F):
            conn.execute(WHEN_TRIGGERS)
        elif model in (RET_W, RET_F):
            for fn in ("jobtui_job_count_added", "jobtui_job_count_changed"):
                row = conn.execute("SELECT pg_get_functiondef(%s::regproc)", (fn,)).fetchone()
                assert row is not None and "\nBEGIN\n" in row[0]
                guard = f"\nBEGIN\n  IF NOT ({GUARD}) THEN RETURN NULL; END IF;\n"
                conn.execute(row[0].replace("\nBEGIN\n", guard, 1))
        elif model == ROWS:
            conn.execute(ROW_TRIGGERS)
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    conn.execute(procedure(model))
    conn.execute("ANALYZE jobs")
    return ""


def check(conn: psycopg.Connection, model: str) -> str:
    """Leave rows in each state with the model's own statements (3 inserted, 2 claimed, 1
    completed), then compare its counts with its rows."""
    s = COUNTED if model in WRITER else PLAIN
    conn.execute(f"""DO $do$ DECLARE rec_ record; cnt_ bigint; b_ int := 1; bids_ bigint[];
      jids_ bigint[]; BEGIN
      FOR k_ IN 1..3 LOOP {s["enqueue"]}; END LOOP;
      FOR k_ IN 1..2 LOOP {s["claim"].replace("%(batch)s", "b_")}; END LOOP;
      jids_ := bids_; {s["complete"]};
    END $do$""")
    row = conn.execute(CHECK).fetchone()
    assert row is not None
    counted, rows, net, unfinished = row
    if counted == rows and net == unfinished:
        return f"exact ({rows}; net arrivals {net})"
    return f"OFF: counts {counted} vs rows {rows}; net arrivals {net} vs unfinished {unfinished}"


# Model E: no write-side counting; the Overview's per-kind counts of waiting rows read at query
# time: exact (every waiting row read: with all rows waiting the planner takes a parallel
# sequential scan), and bounded at 1,000 a kind (an index-only scan of jobs_pending_kind per
# kind; the kinds taken from job_counts here, which model E would have to keep elsewhere).
READ_EXACT = """
SELECT kind, count(*) FILTER (WHERE attempts < max_attempts AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE attempts < max_attempts AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE attempts >= max_attempts) AS exhausted
FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL GROUP BY kind"""
READ_BOUNDED = """
SELECT k.kind, b.n FROM (SELECT DISTINCT kind FROM job_counts) k CROSS JOIN LATERAL (
  SELECT count(*) AS n FROM (SELECT 1 FROM jobs j WHERE j.kind = k.kind
    AND j.finished_at IS NULL AND j.locked_at IS NULL LIMIT 1000) x) b"""
READ_SHIPPED = "SELECT kind, state, due::text, until::text, n FROM jobtui_job_counts()"
FILL = """
INSERT INTO jobs (kind, payload, run_at)
SELECT 'kind' || (g %% 10), '{}', now() - interval '1 hour' + (g %% 7200) * interval '1 second'
FROM generate_series(1, %s) g"""


def read_side(bench: Bench, sizes: list[int]) -> None:
    """Model E's read at each size (rows added to one database, counted by the shipped
    triggers and folded, then VACUUM ANALYZE so the index-only scans see all-visible pages)."""
    reads = {
        "shipped: jobtui_job_counts()": READ_SHIPPED,
        "E exact, at query time": READ_EXACT,
        "E bounded at 1,000 a kind": READ_BOUNDED,
    }
    with bench.fresh_db("countread") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        have = 0
        for size in sizes:
            t0 = time.perf_counter()
            conn.execute(FILL, (size - have,))
            have = size
            conn.execute("SELECT jobtui_fold_job_counts()")
            conn.execute("VACUUM ANALYZE jobs")
            print(
                f"\n{size:,} waiting rows (built in {time.perf_counter() - t0:.0f} s): "
                "ms per read, median [range] of 7"
            )
            for name, sql in reads.items():
                ms = []
                for _ in range(7):
                    t = time.perf_counter()
                    conn.execute(sql).fetchall()
                    ms.append((time.perf_counter() - t) * 1e3)
                print(f"  {name:32}{statistics.median(ms):9.2f} [{min(ms):.2f}-{max(ms):.2f}]")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument(
        "--jobs",
        type=int,
        default=2000,
        help="jobs per model per round, a multiple of 100 (default 2000)",
    )
    ap.add_argument(
        "--read-rows",
        default="",
        metavar="N,N",
        help="also time model E's read at these waiting rows, e.g. 200000,2000000",
    )
    ap.add_argument("--dsn", default=os.environ.get("JOBTUI_BENCH_DSN", ADMIN_DSN))
    args = ap.parse_args(argv)
    if args.jobs < BATCH or args.jobs % BATCH:
        ap.error(f"--jobs must be a multiple of {BATCH}")
    bench = Bench(args.dsn, quick=False, runs=args.rounds, origin="JOBTUI_BENCH_DSN")
    load = [os.getloadavg()]
    us: dict[str, dict[str, list[float]]] = {m: {w: [] for w in WRITES} for m in MODELS}
    refused: dict[str, str] = {}
    try:
        with ExitStack() as stack:
            conns = {}
            for i, m in enumerate(MODELS):
                dsn = stack.enter_context(bench.fresh_db(f"count{i}"))
                conn = stack.enter_context(psycopg.connect(dsn, autocommit=True))
                refused[m] = prepare(conn, m)
                if refused[m]:
                    continue
                conn.execute("SET synchronous_commit = off")
                conn.execute("SET jobtui.fold_in_trigger = off")
                conn.execute("SET plan_cache_mode = force_generic_plan")  # see the docstring
                if m in WRITER:
                    conn.execute("SET jobtui.counted = on")
                conn.execute("CALL bench_counts(%s, NULL)", (BATCH,))  # warm up
                conns[m] = conn
            for r in range(args.rounds):
                order = list(conns)[r % len(conns) :] + list(conns)[: r % len(conns)]
                for m in order:
                    # Each round from the same start: the dead index entries of the last round's
                    # claims gone (autovacuum reaches some databases and not others).
                    conns[m].execute("VACUUM jobs, job_counts, job_flow")
                    row = conns[m].execute("CALL bench_counts(%s, NULL)", (args.jobs,)).fetchone()
                    assert row is not None
                    for w, seconds in zip(WRITES, row[0], strict=True):
                        us[m][w].append(seconds / args.jobs * 1e6)
                print(f"  round {r + 1} done, load {os.getloadavg()[0]:.2f}", flush=True)
            checked = {m: check(c, m) for m, c in conns.items()}
        load.append(os.getloadavg())
        print(
            f"\nµs per job, median [range] of {args.rounds} interleaved rounds of {args.jobs} "
            "jobs per model, timed inside the server; load average "
            + " -> ".join("/".join(f"{x:.2f}" for x in la) for la in load)
        )
        print(f"{'model':26}" + "".join(f"{w:>18}" for w in WRITES))
        for m in MODELS:
            if refused[m]:
                print(f"{m:26}  refused: {refused[m]}")
                continue
            cells = "".join(
                f"{statistics.median(v):6.0f} [{min(v):3.0f}-{max(v):3.0f}]".rjust(18)
                for v in us[m].values()
            )
            print(f"{m:26}{cells}")
        print("\ncounts against rows after the run:")
        for m, text in checked.items():
            print(f"  {m:26}{text}")
        if args.read_rows:
            read_side(bench, [int(x) for x in args.read_rows.split(",")])
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
