"""Claim throughput of an unlimited kind, with and without another kind being limited.

Issue 13 asks that a kind at its limit never slow the others. Each run makes a fresh database
with a backlog of two kinds, `fast` and `slow`, and runs `--claimers` claim loops (one
connection each, like a worker's claim links) for `--seconds`; each loop claims up to
`--batch` jobs and completes them at once (handlers that do nothing), so the figure is what
the database can hand out:
- `fast alone`: no limits; loops run the fast claim (worker_claim) over `fast` only (the
  baseline for `fast`: today's claim, with `slow` as if paused).
- `both unlimited`: no limits; the fast claim over both kinds.
- `slow limited`: `slow` limited to `--limit` concurrent jobs; each loop first calls
  `claim_limited` for `slow` (skipped for 50 ms, or until the next token, after one that found
  no room), then the fast claim over `fast` for the rest of the batch: the order the worker
  is to use, so a limited kind is never starved by a busy unlimited one.
Printed: jobs/s of `fast`, of `slow` and of both per scenario, median [min–max] over `--runs`.

    python benchmarks/limits_claim.py [--dsn postgresql://root@127.0.0.1:5432/postgres]
        [--runs 3] [--seconds 5] [--claimers 4] [--batch 50] [--limit 5] [--backlog 200000]

The DSN (default: JOBTUI_BENCH_DSN, else the system PostgreSQL) needs CREATE DATABASE.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobtui import enqueue_many
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.schema import migrate
from jobtui.sql import queries
from jobtui.worker.statements import int_array

SCHEMA = "public"
Q = queries(SCHEMA)


def _fresh(admin_dsn: str, backlog: int) -> tuple[str, str]:
    name = f"jobtui_limbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(admin_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, SCHEMA)
        enqueue_many(conn, ({"kind": ("fast", "slow")[i % 2]} for i in range(backlog)))
        conn.execute("ANALYZE")
    return name, dsn


def _drop(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _complete(conn: psycopg.AsyncConnection, worker: str, rows: list) -> None:
    if rows:
        pairs = ",".join(f'"{r[0]}":{r[3]}' for r in rows)
        await conn.execute(
            Q.worker_complete,
            {"worker": worker, "ids": int_array([r[0] for r in rows]), "by_id": "{" + pairs + "}"},
        )


# Scenarios: (label, kinds of the fast claim, limit `slow`?)
SCENARIOS = {
    "fast alone": (["fast"], False),
    "both unlimited": (["fast", "slow"], False),
    "slow limited": (["fast"], True),
}
LIMITED_RETRY_S = 0.05  # after a limited claim that found no room, as the worker is to do


async def _loop(
    dsn: str, i: int, scenario: str, batch: int, until: float, counts: dict[str, int]
) -> None:
    worker = f"bench-{i}"
    kinds, limited = SCENARIOS[scenario]
    next_limited = 0.0
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        while (now := time.monotonic()) < until:
            rows: list = []
            if limited and now >= next_limited:
                got = await claim_limited(conn, SCHEMA, worker, ["slow"], batch)
                if not got:
                    next_limited = now + min(got.wait_s.values(), default=LIMITED_RETRY_S)
                rows += got
            cur = await conn.execute(
                Q.worker_claim, {"kinds": kinds, "worker": worker, "limit": batch - len(rows)}
            )
            rows += await cur.fetchall()
            await _complete(conn, worker, rows)
            for r in rows:
                counts[r[1]] = counts.get(r[1], 0) + 1
    finally:
        await conn.close()


async def _run(dsn: str, args: argparse.Namespace, scenario: str) -> dict[str, float]:
    if SCENARIOS[scenario][1]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await sync_kind_limits(conn, SCHEMA, [KindLimit("slow", concurrency=args.limit)])
    counts: dict[str, int] = {}
    started = time.monotonic()
    until = started + args.seconds
    await asyncio.gather(
        *(_loop(dsn, i, scenario, args.batch, until, counts) for i in range(args.claimers))
    )
    elapsed = time.monotonic() - started
    return {kind: counts.get(kind, 0) / elapsed for kind in ("fast", "slow")}


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):8.0f} [{min(values):.0f}–{max(values):.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("JOBTUI_BENCH_DSN", "postgresql://root@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--backlog", type=int, default=200_000)
    args = parser.parse_args()
    with psycopg.connect(args.dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(
        f"machine: {os.cpu_count()} cores, PostgreSQL {version[0] if version else '?'}, "
        f"Python {sys.version.split()[0]}; claimers={args.claimers} batch={args.batch} "
        f"seconds={args.seconds} backlog={args.backlog} limit={args.limit}",
        flush=True,
    )
    results: dict[str, list[dict[str, float]]] = {name: [] for name in SCENARIOS}
    for run in range(args.runs):
        for scenario in SCENARIOS:  # interleaved, so drift on a shared machine hits all
            name, dsn = _fresh(args.dsn, args.backlog)
            try:
                figures = asyncio.run(_run(dsn, args, scenario))
            finally:
                _drop(args.dsn, name)
            results[scenario].append(figures)
            print(
                f"  run {run + 1} {scenario:>14}: fast {figures['fast']:7.0f} jobs/s, "
                f"slow {figures['slow']:7.0f} jobs/s",
                flush=True,
            )
    print("scenario            fast jobs/s [min–max]    slow jobs/s [min–max]    all jobs/s")
    for scenario, runs in results.items():
        label = f"slow limited to {args.limit}" if SCENARIOS[scenario][1] else scenario
        total = [r["fast"] + r["slow"] for r in runs]
        print(
            f"{label:<20}{_fmt([r['fast'] for r in runs])}    "
            f"{_fmt([r['slow'] for r in runs])}    {statistics.median(total):8.0f}"
        )


if __name__ == "__main__":
    main()
