"""What the Database tab and `jobs why` cost the database at size (issue 12: the monitoring
must not become the heaviest query).

Creates a scratch database with `--jobs` ready jobs of `--kinds` kinds (and as many dead
tuples, left by an UPDATE with autovacuum off on the table), then times, on one connection:
`dbhealth.collect` (one Database-tab refresh) and `why.explain` for the last job in line of
the largest kind (the position count is the costliest part). Prints `median [min–max] (n)` in
ms per figure; drops the database at the end.

    python benchmarks/dbhealth_cost.py --dsn postgresql://root@127.0.0.1:5432/postgres
    python benchmarks/dbhealth_cost.py --jobs 200000 --runs 30
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import conninfo

from jobtui import dbhealth, why
from jobtui.schema import migrate


def figure(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"{name:<28} {statistics.median(ms):8.2f} ms [{min(ms):.2f}–{max(ms):.2f}] (n={len(ms)})"


async def timed(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    await fn()  # warm the plan cache and the buffers
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


async def measure(dsn: str, jobs: int, kinds: int, runs: int) -> None:
    name = f"jobtui_bench_dbh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    db = conninfo.make_conninfo(dsn, dbname=name)
    try:
        with psycopg.connect(db, autocommit=True) as conn:
            migrate(conn, "public")
            conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
            conn.execute(
                "INSERT INTO jobs (kind, payload) "
                "SELECT 'kind_' || (g %% %s), '{}'::jsonb FROM generate_series(1, %s) g",
                (kinds, jobs),
            )
            conn.execute("UPDATE jobs SET priority = 0")  # as many dead tuples
            conn.execute("ANALYZE jobs")
            last = conn.execute("SELECT max(id) FROM jobs WHERE kind = 'kind_0'").fetchone()
            assert last is not None
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as aconn:
            health = await dbhealth.collect(aconn, "public")
            answer = await why.explain(aconn, "public", int(last[0]))
            assert answer is not None
            print(f"jobs={jobs} kinds={kinds} dead tuples seen={health.jobs and health.jobs.dead}")
            print(f"why position of the last kind_0 job: {answer.position}")
            print(
                figure(
                    "dbhealth.collect", await timed(lambda: dbhealth.collect(aconn, "public"), runs)
                )
            )
            print(
                figure(
                    "why.explain (last in line)",
                    await timed(lambda: why.explain(aconn, "public", int(last[0])), runs),
                )
            )
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--kinds", type=int, default=20)
    p.add_argument("--runs", type=int, default=20)
    args = p.parse_args()
    asyncio.run(measure(args.dsn, args.jobs, args.kinds, args.runs))


if __name__ == "__main__":
    main()
