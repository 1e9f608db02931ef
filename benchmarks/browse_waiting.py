"""Issue 24: the Jobs listing's pages of waiting rows in claim order, at scale.

    .venv/bin/python -m benchmarks.browse_waiting [--waiting 200000] [--finished 300000]
                                                  [--kinds 20] [--dsn ADMIN_DSN]

Builds a database of its own: `--finished` finished jobs, then `--waiting` waiting ones over
`--kinds` kinds and four priorities with spread run_at, 50 of them claimed; ids from 10,000,001.
Then EXPLAIN (ANALYZE, BUFFERS) of browse_jobs_page as jobtui.browse runs it, for a first page
and for a page continued from the 5,000th waiting row (the cursor in claim order), under the
filters an operator uses: execution time, whether any Seq Scan on jobs ran, the most rows one
scan of jobs returned plus every row its filters removed (what a page touched), and the
indexes read. Since migration 0025 no index holds waiting rows in id order: waiting
rows come through jobs_claim (all kinds) or jobs_claim_kind (one kind).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from benchmarks.common import Bench
from jobtui import browse
from jobtui.models import JobFilter
from jobtui.sql import queries

ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"
FILTERS = (
    JobFilter(),
    JobFilter(kind="k3"),
    JobFilter(states=("ready",)),
    JobFilter(states=("scheduled",)),
    JobFilter(kind="k7", states=("ready", "scheduled")),
    JobFilter(states=("running",)),
    JobFilter(states=("succeeded",)),
    JobFilter(states=("exhausted",)),
)


def fill(conn: psycopg.Connection, waiting: int, finished: int, kinds: int) -> None:
    conn.execute("ALTER SEQUENCE jobs_id_seq RESTART 10000001")
    conn.execute(
        """INSERT INTO jobs (kind, payload, run_at, attempts, locked_at, finished_at)
           SELECT 'k' || (g %% %(kinds)s), '{}', now() - interval '2 days', 1,
                  now() - interval '1 day', now() - interval '1 day'
           FROM generate_series(1, %(n)s) g""",
        {"n": finished, "kinds": kinds},
    )
    conn.execute(
        """INSERT INTO jobs (kind, payload, priority, run_at)
           SELECT 'k' || (g %% %(kinds)s), jsonb_build_object('n', g), (g %% 4) * 5,
                  now() - interval '1 hour' + ((g::bigint * 7919) %% 7200) * interval '1 second'
           FROM generate_series(1, %(n)s) g""",
        {"n": waiting, "kinds": kinds},
    )
    conn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'w1', attempts = 1 WHERE id IN"
        " (SELECT id FROM jobs WHERE finished_at IS NULL ORDER BY id LIMIT 50)"
    )
    conn.execute("VACUUM ANALYZE jobs")


def cursor_at(conn: psycopg.Connection, flt: JobFilter, offset: int) -> browse.JobCursor | None:
    """The cursor after the `offset`-th waiting row of `flt`'s kind in claim order."""
    row = conn.execute(
        "SELECT id, priority, run_at::text FROM jobs"
        " WHERE finished_at IS NULL AND locked_at IS NULL AND (%(k)s::text IS NULL OR kind = %(k)s)"
        " ORDER BY priority DESC, run_at, id OFFSET %(o)s LIMIT 1",
        {"k": flt.kind, "o": offset},
    ).fetchone()
    return None if row is None else browse.JobCursor(row[0], browse.RANK_WAITING, row[1], row[2])


def explain(conn: psycopg.Connection, flt: JobFilter, cursor: browse.JobCursor | None) -> str:
    params = {**browse.job_filter_params(flt), "before": None, "limit": 100}
    params.update(cursor.params() if cursor is not None else browse.NO_CURSOR)
    sql = "EXPLAIN (ANALYZE, BUFFERS) " + browse.statement("public", "browse_jobs_page")
    with conn.transaction():
        conn.execute(queries().browse_read_settings, {"serial": True})
        rows = conn.execute(sql.encode(), params, prepare=False).fetchall()
    return "\n".join(r[0] for r in rows)


def setup(doc: str | None) -> tuple[argparse.Namespace, Bench]:
    """The command line of a benchmark over `fill`'s data set (its sizes, the admin DSN)."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--waiting", type=int, default=200_000)
    ap.add_argument("--finished", type=int, default=300_000)
    ap.add_argument("--kinds", type=int, default=20)
    ap.add_argument("--dsn", default=ADMIN_DSN)
    args = ap.parse_args()
    return args, Bench(args.dsn, quick=False, runs=1, origin="JOBTUI_BENCH_DSN")


def main() -> None:
    args, bench = setup(__doc__)
    try:
        with (
            bench.fresh_db("browse_waiting") as dsn,
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            fill(conn, args.waiting, args.finished, args.kinds)
            print(f"{args.waiting:,} waiting, {args.finished:,} finished, 50 running")
            print(f"{'filter':44} {'page':6} {'ms':>8} {'seq scan':>9} {'rows read':>10}  indexes")
            for flt in FILTERS:
                label = f"kind={flt.kind} states={','.join(flt.states) or '-'}"
                for name, cursor in (("first", None), ("5001st", cursor_at(conn, flt, 5000))):
                    explain(conn, flt, cursor)  # warm
                    plan = explain(conn, flt, cursor)
                    ms = float(re.findall(r"Execution Time: ([\d.]+) ms", plan)[0])
                    scanned = re.findall(r"Scan[^\n]* on jobs[^\n]*rows=(\d+) loops", plan)
                    removed = re.findall(r"Rows Removed by Filter: (\d+)", plan)
                    read = max(map(int, scanned), default=0) + sum(map(int, removed))
                    used = sorted(set(re.findall(r" using (\w+)", plan)))
                    seq = "Seq Scan on jobs" in plan
                    print(f"{label:44} {name:6} {ms:8.2f} {seq!s:>9} {read:>10}  {', '.join(used)}")
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
