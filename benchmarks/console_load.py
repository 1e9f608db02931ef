"""Issue 12 item 5: the load that N consoles at a 2 s refresh put on the database.

Each simulated console is what a real one does on every refresh, without drawing: its own
connection and `Link` (jobtui.tui.connection, statement timeout and all), running the reads of
the tab it shows through `Link.run` every `--refresh` seconds. Half the consoles show the
Overview (jobtui.metrics.snapshot), half the Jobs tab (first page newest first, the server's
clock, and its "shown of N" count every 30 s, as jobtui/tui/panes/jobs.py does). They start
spread over one refresh period, as consoles opened by different people would be.

For N = 1, 5 and 20 (`--consoles`) it prints, over `--seconds`:
  - database time: the summed duration of the consoles' reads as the client saw them, in ms
    per second (1000 = one backend busy all the time);
  - backend CPU: user + system CPU of the consoles' PostgreSQL backends from /proc (this server
    runs on this machine), as a share of one core;
  - refreshes done per second, a refresh's p50/p95 (its reads summed), and refreshes dropped
    at the statement timeout.
The data set is benchmarks/scale.py's (2,000,000 finished jobs and more, a stale visibility
map) unless `--small` (an empty, migrated database).

    .venv/bin/python benchmarks/console_load.py --dsn postgresql://root@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH

from benchmarks.common import cpu_by_pid
from benchmarks.scale import copy_of, ensure_template, stale

COUNT_EVERY_S = 30.0  # the Jobs tab's count, as jobtui/tui/panes/jobs.py refreshes it


@dataclass
class Tally:
    """What one console did over the window."""

    reads_ms: list[float] = field(default_factory=list)  # one per refresh: its reads summed
    dropped: int = 0
    failed: int = 0


async def console(dsn: str, tab: str, refresh_s: float, start_in: float, stop_at: float) -> Tally:
    from jobtui import browse, metrics
    from jobtui.models import JobFilter
    from jobtui.tui.connection import Link
    from jobtui.tui.server import server_now

    dropped = getattr(sys.modules["jobtui.tui.connection"], "RefreshDropped", None)
    link = Link(dsn, "public")
    tally = Tally()
    counted_at = -COUNT_EVERY_S

    async def refresh() -> None:
        nonlocal counted_at
        if tab == "overview":
            await link.run(metrics.snapshot)
            return
        await link.run(browse.list_jobs, JobFilter(), limit=100)
        if time.monotonic() - counted_at >= COUNT_EVERY_S:
            await link.run(browse.count_jobs, JobFilter())
            counted_at = time.monotonic()
        await link.run(server_now)

    try:
        await link.run(browse.read_only_reason)  # what the console asks after connecting
        await asyncio.sleep(start_in)
        next_at = time.monotonic()
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            try:
                await refresh()
                tally.reads_ms.append((time.perf_counter() - t0) * 1000)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the loop goes on
                if dropped is not None and isinstance(exc, dropped):
                    tally.dropped += 1
                else:
                    tally.failed += 1
            next_at += refresh_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        await link.close()
    return tally


async def backends(dsn: str, app_name: str) -> set[int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND datname = current_database()",
            (app_name,),
        )
        return {int(r[0]) for r in await cur.fetchall()}


async def measure(dsn: str, n: int, refresh_s: float, seconds: float) -> dict[str, Any]:
    from jobtui.tui.connection import APPLICATION_NAME

    warm = refresh_s + 1.0  # every console connected and past its first refresh
    stop_at = time.monotonic() + warm + seconds
    tasks = [
        asyncio.create_task(
            console(
                dsn, "overview" if i % 2 == 0 else "jobs", refresh_s, i * refresh_s / n, stop_at
            )
        )
        for i in range(n)
    ]
    await asyncio.sleep(warm)
    pids = await backends(dsn, APPLICATION_NAME)
    cpu0 = cpu_by_pid(pids)
    t0 = time.monotonic()
    # Sampled while every console is still connected (a backend that has exited has no /proc).
    await asyncio.sleep(max(0.0, stop_at - 0.05 - time.monotonic()))
    cpu1 = cpu_by_pid(pids)
    elapsed = time.monotonic() - t0
    tallies: list[Tally] = await asyncio.gather(*tasks)
    cpu = sum(cpu1[p] - cpu0[p] for p in cpu1 if p in cpu0)
    reads = [ms for t in tallies for ms in t.reads_ms]
    # Reads that ran during the warm-up are in the tallies too: scale by the whole run.
    total_s = warm + seconds
    return {
        "consoles": n,
        "db_ms_per_s": sum(reads) / total_s,
        "cpu_share": cpu / elapsed if cpu0 else None,
        "backends": len(pids),
        "refreshes_per_s": len(reads) / total_s,
        "p50": statistics.median(reads) if reads else float("nan"),
        "p95": sorted(reads)[min(len(reads) - 1, round(0.95 * (len(reads) - 1)))] if reads else 0,
        "dropped": sum(t.dropped for t in tallies),
        "failed": sum(t.failed for t in tallies),
    }


def fresh_small(admin: str) -> str:
    from jobtui.schema import migrate

    name = f"jobtui_load_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(conninfo.make_conninfo(admin, dbname=name), autocommit=True) as conn:
        migrate(conn, "public")
    return name


def counts(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or any(v < 1 or v > 200 for v in values):
        raise argparse.ArgumentTypeError("each number of consoles must be from 1 to 200")
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    ap.add_argument("--consoles", type=counts, default=[1, 5, 20], help="e.g. 1,5,20")
    ap.add_argument("--refresh", type=float, default=2.0, help="seconds between refreshes")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured window per N")
    ap.add_argument("--small", action="store_true", help="an empty database, not the scale set")
    args = ap.parse_args()
    if not args.refresh > 0 or not args.seconds > 0:
        sys.exit("console_load: --refresh and --seconds must be positive")
    import jobtui

    print(f"jobtui from {Path(jobtui.__file__).parent}", flush=True)
    try:
        db = (
            fresh_small(args.dsn)
            if args.small
            else copy_of(args.dsn, ensure_template(args.dsn, False))
        )
    except psycopg.Error as exc:
        sys.exit(f"console_load: cannot prepare the database: {exc}")
    try:
        dsn = conninfo.make_conninfo(args.dsn, dbname=db)
        if not args.small:
            stale(dsn)
        print(
            f"database {db} ({'empty' if args.small else 'scale data set, stale visibility map'});"
            f" refresh every {args.refresh:g} s, {args.seconds:g} s measured per N",
            flush=True,
        )
        print(
            f"\n{'consoles':>8} {'backends':>8} {'DB ms/s':>8} {'backend CPU':>12}"
            f" {'refresh/s':>10} {'refresh p50 ms':>15} {'p95':>7} {'dropped':>8} {'failed':>7}"
        )
        for n in args.consoles:
            r = asyncio.run(measure(dsn, n, args.refresh, args.seconds))
            cpu = "n/a" if r["cpu_share"] is None else f"{r['cpu_share'] * 100:.1f} %"
            print(
                f"{n:8d} {r['backends']:8d} {r['db_ms_per_s']:8.1f} {cpu:>12}"
                f" {r['refreshes_per_s']:10.2f} {r['p50']:15.1f} {r['p95']:7.1f}"
                f" {r['dropped']:8d} {r['failed']:7d}",
                flush=True,
            )
        print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db))
            )


if __name__ == "__main__":
    main()
