"""Issue 14: the console's reads as the history grows (1,000,000 and 10,000,000 finished jobs).

A queue that is never pruned keeps every finished job. This builds, per size, a database with
`--finished` finished jobs spread over 30 days across 20 kinds, beside a working queue that does
not grow with it (20,000 ready, a tenth retrying; 10,000 dead letters), then VACUUM (ANALYZE),
cached as `jobtui_history_<schema tag>_<size>` (`--rebuild` makes it again). It prints, per
size, p50/p95 over `--runs` (after two warm-ups, one connection, as the console reads) of the
Overview snapshot and the pages an operator opens: the Jobs tab on unfinished jobs (its default)
and on every job (`a`), a page 50 pages deep, one kind's succeeded jobs, a payload search, the
capped count, and the Dead letters tab. The figures go to a JSON file (`--results`) that
`benchmarks/plot.py --history` draws beside the drain and pickup growth.

    .venv/bin/python benchmarks/history.py --dsn postgresql://root@127.0.0.1:5432/postgres \\
        --sizes 1000000,10000000 --runs 15 --results benchmarks/history.json

Building 10,000,000 rows takes several minutes and about 4 GB of disk; it is done in batches
of 1,000,000 so no transaction holds them all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH

from benchmarks.bigdata import insert_dead
from benchmarks.common import percentile
from benchmarks.scale import _tag, cached_database

KINDS = [f"kind{i:02d}.work" for i in range(20)]
READY, DEAD, BATCH = 20_000, 10_000, 1_000_000


def build(dsn: str, finished: int) -> None:
    """The data set at one size; finished jobs in batches, oldest first (ids grow with time)."""
    from jobtui.schema import migrate

    t0 = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, "public")
        for start in range(0, finished, BATCH):
            conn.execute(
                """
                INSERT INTO jobs (kind, payload, run_at, attempts, created_at, locked_at,
                                  locked_by, finished_at)
                SELECT (%(kinds)s::text[])[1 + g %% 20],
                       jsonb_build_object('order_id', g, 'customer', 'cust-' || (g %% 5000)),
                       ts, 1, ts, ts, 'bench:1:seed', ts + interval '40 ms'
                FROM (SELECT g, now() - interval '30 days' * (%(n)s - g) / %(n)s AS ts
                      FROM generate_series(%(lo)s, %(hi)s) g) s
                """,
                {
                    "kinds": KINDS,
                    "n": finished,
                    "lo": start + 1,
                    "hi": min(finished, start + BATCH),
                },
            )
            print(f"  {min(finished, start + BATCH):,} finished rows", flush=True)
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at, attempts, created_at, last_error)
            SELECT (%(kinds)s::text[])[1 + g %% 20],
                   jsonb_build_object('order_id', -g, 'customer', 'cust-' || (g %% 5000)),
                   ts, CASE WHEN g %% 10 = 0 THEN 1 ELSE 0 END, ts,
                   CASE WHEN g %% 10 = 0 THEN 'TimeoutError: upstream took 31s' END
            FROM (SELECT g, now() - interval '1 hour' * g / %(n)s AS ts
                  FROM generate_series(1, %(n)s) g) s
            """,
            {"kinds": KINDS, "n": READY},
        )
        insert_dead(conn, DEAD, KINDS)
        conn.execute("SELECT jobtui_fold_job_counts()")
        conn.execute("VACUUM (ANALYZE)")
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"built in {time.monotonic() - t0:.0f}s, {size.fetchone()[0]}", flush=True)  # type: ignore[index]


def ensure(admin: str, finished: int, rebuild: bool) -> str:
    def make(dsn: str) -> None:
        print(f"building the data set with {finished:,} finished jobs", flush=True)
        build(dsn, finished)

    return cached_database(admin, f"jobtui_history_{_tag()}_{finished}", rebuild, make)


Probe = Callable[[psycopg.AsyncConnection], Awaitable[Any]]


async def _deep_page(conn: psycopg.AsyncConnection, depth: int) -> Any:
    """The page an operator reaches after paging down `depth` times on every job."""
    from jobtui import browse
    from jobtui.models import JobFilter

    top = await conn.execute("SELECT max(id) FROM jobs")
    row = await top.fetchone()
    before = int(row[0]) + 1 - depth * 100 if row and row[0] else None
    return await browse.list_jobs(conn, "public", JobFilter(), before=before, limit=100)


def probes() -> dict[str, Probe]:
    from jobtui import browse, kindinfo, metrics
    from jobtui.models import PENDING_STATES, DeadFilter, JobFilter

    s = "public"
    unfinished = JobFilter(states=PENDING_STATES)
    return {
        "snapshot (Overview, Kinds, Workers)": lambda c: metrics.snapshot(c, s),
        "Jobs tab (unfinished): first page": lambda c: browse.list_jobs(c, s, unfinished),
        "Jobs tab (unfinished): count": lambda c: browse.count_jobs_capped(c, s, unfinished),
        "Jobs tab (all jobs): first page": lambda c: browse.list_jobs(c, s, JobFilter()),
        "Jobs tab (all jobs): count": lambda c: browse.count_jobs_capped(c, s, JobFilter()),
        "Jobs tab (all jobs): page 50 deep": lambda c: _deep_page(c, 50),
        "filter: one kind, succeeded": lambda c: browse.list_jobs(
            c, s, JobFilter(states=("succeeded",), kind=KINDS[3])
        ),
        "filter: succeeded (every kind)": lambda c: browse.list_jobs(
            c, s, JobFilter(states=("succeeded",))
        ),
        "kind screen (one kind, last day)": lambda c: kindinfo.load(c, s, KINDS[3], "day"),
        "filter: payload search (all jobs)": lambda c: browse.list_jobs(
            c, s, JobFilter(text="cust-4242")
        ),
        "Dead tab: groups": lambda c: browse.dead_groups(c, s, DeadFilter()),
        "Dead tab: first page": lambda c: browse.list_dead(c, s, DeadFilter(), limit=100),
    }


async def measure(dsn: str, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for label, probe in probes().items():
            times = []
            for i in range(runs + 2):
                t0 = time.perf_counter()
                await probe(conn)
                if i >= 2:  # two warm-up runs
                    times.append((time.perf_counter() - t0) * 1000)
            out[label] = times
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dsn",
        default=os.environ.get("JOBTUI_BENCH_DSN", "postgresql://root@127.0.0.1:5432/postgres"),
    )
    ap.add_argument("--sizes", default="1000000,10000000", help="finished jobs, comma-separated")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--results", type=Path, help="write the raw timings here (JSON)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x.replace("_", "")) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        print(
            f"history.py: --sizes: whole numbers, comma-separated, not {args.sizes!r}",
            file=sys.stderr,
        )
        return 2
    import jobtui

    print(f"jobtui from {Path(jobtui.__file__).parent}", flush=True)
    results: dict[int, dict[str, list[float]]] = {}
    for n in sizes:
        db = ensure(args.dsn, n, args.rebuild)
        results[n] = asyncio.run(measure(conninfo.make_conninfo(args.dsn, dbname=db), args.runs))
    head = "".join(f"  {f'{n:,} finished p50/p95 ms':>32}" for n in sizes)
    print(f"\n{READY:,} ready, {DEAD:,} dead letters, {len(KINDS)} kinds; {args.runs} runs\n")
    print(f"{'read':40}{head}")
    for label in probes():
        cells = "".join(
            f"  {statistics.median(t):21.1f} /{percentile(t, 95):9.1f}"
            for t in (results[n][label] for n in sizes)
        )
        print(f"{label:40}{cells}")
    if args.results:
        args.results.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "command": " ".join(
                        ["python", "benchmarks/history.py", *(argv or sys.argv[1:])]
                    ),
                    "ready": READY,
                    "dead": DEAD,
                    "kinds": len(KINDS),
                    "runs": args.runs,
                    "timings_ms": {str(n): results[n] for n in sizes},
                },
                indent=1,
            )
        )
        print(f"\n{args.results}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
