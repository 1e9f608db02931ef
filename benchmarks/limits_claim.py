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
- `slow limited, merged`: as `slow limited`, the limited claim also told the loop's other kind
  (`fast`), as a worker's is since migration 0030: it peeks at `fast`'s first rows in claim
  order and claims only the `slow` jobs that one claim order over both puts within the batch.
Printed: jobs/s of `fast`, of `slow` and of both per scenario, median [min–max] over `--runs`,
and the limited claim's mean time a call (its statement and payload read, from this client).

`--calls N` instead times the limited claim alone, one session, no other load from here: N
rounds, each calling it once per variant (in turn, each call rolled back so that every call
sees the same rows): told no other kind (a worker without unlimited kinds, and 0029's work),
told `fast` (the merge: its first `--batch` rows peeked), and told `fast` and 19 kinds with
no job (a probe each). With `--fast-first`, `fast`'s jobs have a higher priority, so the merge
holds every `slow` pick back. Printed: the median and quartiles of each variant in µs.

    python benchmarks/limits_claim.py [--dsn postgresql://root@127.0.0.1:5432/postgres]
        [--runs 3] [--seconds 5] [--claimers 4] [--batch 50] [--limit 5] [--backlog 200000]
        [--calls N [--fast-first]]

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


# Scenarios: (label, kinds of the fast claim, limit `slow`?, the limited claim's other kinds)
SCENARIOS: dict[str, tuple[list[str], bool, list[str]]] = {
    "fast alone": (["fast"], False, []),
    "both unlimited": (["fast", "slow"], False, []),
    "slow limited": (["fast"], True, []),
    "slow limited, merged": (["fast"], True, ["fast"]),
}
LIMITED_RETRY_S = 0.05  # after a limited claim that found no room, as the worker is to do


async def _loop(
    dsn: str,
    i: int,
    scenario: str,
    args: argparse.Namespace,
    until: float,
    counts: dict[str, float],
) -> None:
    worker = f"bench-{i}"
    batch = args.batch
    kinds, limited, others = SCENARIOS[scenario]
    next_limited = 0.0
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        while (now := time.monotonic()) < until:
            rows: list = []
            if limited and now >= next_limited:
                t0 = time.perf_counter()
                got = await claim_limited(conn, SCHEMA, worker, ["slow"], batch, others)
                counts["limited_s"] = counts.get("limited_s", 0) + time.perf_counter() - t0
                counts["limited_n"] = counts.get("limited_n", 0) + 1
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
    """jobs/s of each kind, and the limited claim's mean µs a call (0 when not called)."""
    if SCENARIOS[scenario][1]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await sync_kind_limits(conn, SCHEMA, [KindLimit("slow", concurrency=args.limit)])
    counts: dict[str, float] = {}
    started = time.monotonic()
    until = started + args.seconds
    await asyncio.gather(
        *(_loop(dsn, i, scenario, args, until, counts) for i in range(args.claimers))
    )
    elapsed = time.monotonic() - started
    figures = {kind: counts.get(kind, 0) / elapsed for kind in ("fast", "slow")}
    calls = counts.get("limited_n", 0)
    figures["limited_us"] = 1e6 * counts.get("limited_s", 0) / calls if calls else 0.0
    return figures


CALL_VARIANTS: dict[str, list[str]] = {
    "no other kind": [],
    "merged with fast": ["fast"],
    "merged, 20 other kinds": ["fast", *(f"idle{i:02}" for i in range(19))],
}


class _Rollback(Exception):
    """Ends a timed call's transaction without keeping its claim."""


async def _time_calls(dsn: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """µs of each limited-claim variant, interleaved call by call, each rolled back."""
    times: dict[str, list[float]] = {name: [] for name in CALL_VARIANTS}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await sync_kind_limits(conn, SCHEMA, [KindLimit("slow", concurrency=args.limit)])
        if args.fast_first:
            await conn.execute("UPDATE jobs SET priority = 1 WHERE kind = 'fast'")
            await conn.execute("VACUUM ANALYZE jobs")
        for _ in range(args.calls):
            for name, others in CALL_VARIANTS.items():
                t0 = time.perf_counter()
                try:
                    async with conn.transaction():
                        await claim_limited(conn, SCHEMA, "bench", ["slow"], args.batch, others)
                        t1 = time.perf_counter()
                        raise _Rollback
                except _Rollback:
                    pass
                times[name].append(1e6 * (t1 - t0))
    return times


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
    parser.add_argument("--calls", type=int, default=0, help="time the limited claim alone")
    parser.add_argument("--fast-first", action="store_true", help="with --calls: fast ranks first")
    args = parser.parse_args()
    with psycopg.connect(args.dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(
        f"machine: {os.cpu_count()} cores, PostgreSQL {version[0] if version else '?'}, "
        f"Python {sys.version.split()[0]}; claimers={args.claimers} batch={args.batch} "
        f"seconds={args.seconds} backlog={args.backlog} limit={args.limit}",
        flush=True,
    )
    if args.calls:
        name, dsn = _fresh(args.dsn, args.backlog)
        try:
            times = asyncio.run(_time_calls(dsn, args))
        finally:
            _drop(args.dsn, name)
        print(f"limited claim of `slow` (want {args.batch}), {args.calls} calls each, µs:")
        for variant, values in times.items():
            q = statistics.quantiles(values, n=4)
            print(f"  {variant:<24} median {q[1]:7.0f}   quartiles {q[0]:.0f}–{q[2]:.0f}")
        return
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
                f"slow {figures['slow']:7.0f} jobs/s"
                + (
                    f", limited claim {figures['limited_us']:.0f} µs"
                    if figures["limited_us"]
                    else ""
                ),
                flush=True,
            )
    print(
        "scenario                  fast jobs/s [min–max]    slow jobs/s [min–max]    all jobs/s"
        "    limited claim µs/call [min–max]"
    )
    for scenario, runs in results.items():
        label = scenario.replace("slow limited", f"slow limited to {args.limit}")
        total = [r["fast"] + r["slow"] for r in runs]
        us = [r["limited_us"] for r in runs]
        print(
            f"{label:<26}{_fmt([r['fast'] for r in runs])}    "
            f"{_fmt([r['slow'] for r in runs])}    {statistics.median(total):8.0f}"
            + (f"    {_fmt(us)}" if any(us) else "")
        )


if __name__ == "__main__":
    main()
