"""Issue 24 attack: the reads that lost an index with migration 0025, timed at scale.

    .venv/bin/python -m benchmarks.diet_regressions [--waiting 200000] [--finished 300000]
                                                    [--kinds 20] [--dsn ADMIN_DSN]

Builds the data set of benchmarks/browse_waiting.py (waiting rows over `--kinds` kinds and four
priorities, run_at spread over the hour before and after now, 50 running), plus 1 row in 997
exhausted, 1 in 101 retrying and 1 finished row in 1,009 cancelled. Then, twice: as migration
0025 leaves the schema, and with its two dropped indexes built again (jobs_waiting_id,
jobs_waiting_kind_id, as in 0024). Each time, the best of 3 calls of: a Jobs page under each
filter that reads many waiting rows (first page and the 20th), a text search with a state
filter (browse_jobs_search_page reads the waiting rows newest first), and a bulk cancel by
filter (ops.cancel_jobs_matching, rolled back: its batches read unfinished rows in id order).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from benchmarks.browse_waiting import fill, setup
from jobtui import browse, ops
from jobtui.models import JobFilter

S = "public"
PAGES = (
    JobFilter(),
    JobFilter(states=("exhausted",)),
    JobFilter(states=("retrying",)),
    JobFilter(states=("scheduled",)),
)
SEARCHES = (JobFilter(states=("ready",), text="zzz"), JobFilter(kind="k3", text="zzz"))
CANCELS = (JobFilter(states=("exhausted",)), JobFilter(kind="k3", states=("ready",)))
OLD_INDEXES = (
    "CREATE INDEX jobs_waiting_id ON jobs (id) WHERE finished_at IS NULL AND locked_at IS NULL",
    "CREATE INDEX jobs_waiting_kind_id ON jobs (kind, id)"
    " WHERE finished_at IS NULL AND locked_at IS NULL",
)


async def best_ms(call: Callable[[], Awaitable[Any]], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        await call()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


async def nth_page(conn: psycopg.AsyncConnection, flt: JobFilter, n: int) -> None:
    before = None
    for _ in range(n):
        page = await browse.list_jobs(conn, S, flt, before=before, limit=100)
        if page.next_before is None:
            return
        before = page.next_before


async def cancel_rolled_back(dsn: str, flt: JobFilter) -> int:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await conn.execute("SELECT 1")  # open the transaction the batches nest in (savepoints)
        n = await ops.cancel_jobs_matching(conn, S, flt, actor=ops.Actor.current())
        await conn.rollback()
        return n


def label(flt: JobFilter) -> str:
    return f"kind={flt.kind} states={','.join(flt.states) or '-'} text={flt.text}"


async def measure(dsn: str, schema_label: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for flt in PAGES:
            first = await best_ms(lambda f=flt: browse.list_jobs(conn, S, f, limit=100))
            deep = await best_ms(lambda f=flt: nth_page(conn, f, 20), runs=1) / 20
            print(f"{schema_label:5} page    {label(flt):48} first {first:7.1f} ms"
                  f"  mean of 20 {deep:7.1f} ms")  # fmt: skip
        for flt in SEARCHES:
            ms = await best_ms(lambda f=flt: browse.list_jobs(conn, S, f, limit=100))
            print(f"{schema_label:5} search  {label(flt):48} first {ms:7.1f} ms")
    for flt in CANCELS:
        t0 = time.perf_counter()
        n = await cancel_rolled_back(dsn, flt)
        ms = (time.perf_counter() - t0) * 1000
        print(f"{schema_label:5} cancel  {label(flt):48} {n:7} rows {ms:7.0f} ms")


def main() -> None:
    args, bench = setup(__doc__)
    try:
        with bench.fresh_db("diet_regressions") as dsn:
            with psycopg.connect(dsn, autocommit=True) as conn:
                fill(conn, args.waiting, args.finished, args.kinds)
                conn.execute(
                    "UPDATE jobs SET attempts = max_attempts WHERE id % 997 = 0"
                    " AND finished_at IS NULL AND locked_at IS NULL"
                )
                conn.execute(
                    "UPDATE jobs SET attempts = 1 WHERE id % 101 = 0"
                    " AND finished_at IS NULL AND locked_at IS NULL AND attempts = 0"
                )
                conn.execute(
                    "UPDATE jobs SET cancelled_at = finished_at WHERE id % 1009 = 0"
                    " AND finished_at IS NOT NULL"
                )
                conn.execute("VACUUM ANALYZE jobs")
            print(f"{args.waiting:,} waiting, {args.finished:,} finished, 50 running")
            asyncio.run(measure(dsn, "0025"))
            with psycopg.connect(dsn, autocommit=True) as conn:
                for sql in OLD_INDEXES:
                    conn.execute(sql)
                conn.execute("ANALYZE jobs")
            asyncio.run(measure(dsn, "+idx"))
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
