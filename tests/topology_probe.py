"""Figures behind /work/notes/topology-findings.md (issue 15), printed by real runs.

Not a test module: a script over the same fixtures' machinery (tests/topology.py).

  python tests/topology_probe.py drain --via transaction [--no-prepare]
      2,000 jobs drained by the bundled worker through PgBouncer (or `--via direct`,
      `--via session`), then the pickup latency of five single jobs enqueued to an idle
      worker, and the database errors it logged.
  python tests/topology_probe.py detect
      what a client can see of a pooler (backend pid, server port, SHOW).
  python tests/topology_probe.py jit
      the console snapshot's p50/p95 with jit on and off on benchmarks/bigdata.py's data set at
      the issue's size, before and after rows arrive since the last VACUUM (autovacuum off).

The server is $JOBTUI_TEST_DSN (default the machine's PostgreSQL); each run makes its own
database and drops it, and stops every PgBouncer it started.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import conninfo

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "apps"), str(HERE.parent)]

from apps.helpers import fetchval, running_worker  # noqa: E402
from topology import quick_registry, running_pgbouncer  # noqa: E402

from jobtui.enqueue import enqueue  # noqa: E402
from jobtui.schema import migrate  # noqa: E402

SERVER = os.environ.get("JOBTUI_TEST_DSN", "postgresql://root@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def scratch_db(migrated: bool = True) -> Iterator[str]:
    name = f"jobtui_probe_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(SERVER, dbname=name)
    try:
        if migrated:
            with psycopg.connect(dsn, autocommit=True) as conn:
                migrate(conn, "public")
        yield dsn
    finally:
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def drain(direct: str, via: str, n: int, seconds: float) -> None:
    log = Lines()
    logging.getLogger("jobtui").addHandler(log)
    logging.getLogger("jobtui").setLevel(logging.INFO)
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'quick', '{}' FROM generate_series(1, %s)",
            (n,),
        )
    t0 = time.monotonic()
    latencies: list[float] = []
    async with (
        running_worker(via, quick_registry(), poll_interval=1.0),
        await psycopg.AsyncConnection.connect(direct, autocommit=True) as conn,
    ):
        left = n
        while left and time.monotonic() - t0 < seconds:
            await asyncio.sleep(0.1)
            left = await fetchval(conn, "SELECT count(*) FROM jobs WHERE finished_at IS NULL")
        took = time.monotonic() - t0
        for _ in range(5):
            await asyncio.sleep(0.3)
            t1 = time.monotonic()
            job_id = await enqueue(conn, "quick", {})
            while time.monotonic() - t1 < 5 and not await fetchval(
                conn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ):
                await asyncio.sleep(0.005)
            latencies.append((time.monotonic() - t1) * 1000)
    print(f"drained {n - left}/{n} in {took:.1f}s (limit {seconds:g}s)")
    print("pickup latency ms (5 single jobs, poll_interval 1.0s; 5000 = not picked up in 5s):")
    print("  ", [round(x) for x in latencies])
    errors = collections.Counter(line for line in log.lines if "error" in line)
    for line, count in errors.most_common(10):
        print(f"  {count:3d}x {line}")


def cmd_drain(args: argparse.Namespace) -> None:
    if args.no_prepare:
        # What the recommended fix does, without touching jobtui: never prepare.
        import jobtui.db as db

        original = db.connect_kwargs
        db.connect_kwargs = lambda: {**original(), "prepare_threshold": None}
    with scratch_db() as direct:
        if args.via == "direct":
            asyncio.run(drain(direct, direct, args.jobs, args.seconds))
            return
        with running_pgbouncer(SERVER, mode=args.via) as bouncer:
            print(f"PgBouncer {bouncer.version_text}, pool_mode={args.via}")
            asyncio.run(drain(direct, bouncer.to(direct), args.jobs, args.seconds))


def cmd_detect(args: argparse.Namespace) -> None:
    def probe(label: str, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
            pid, port = conn.execute("SELECT pg_backend_pid(), inet_server_port()").fetchone()  # type: ignore[misc]
            try:
                conn.execute("SHOW pool_mode")
                show = "SHOW pool_mode answered"
            except psycopg.Error as exc:
                show = f"SHOW pool_mode: {str(exc).strip()}"
            print(
                f"{label:12} info.backend_pid={conn.info.backend_pid} pg_backend_pid()={pid} "
                f"info.port={conn.info.port} inet_server_port()={port} | {show}"
            )

    probe("direct", SERVER)
    for mode in ("session", "transaction"):
        with running_pgbouncer(SERVER, mode=mode) as bouncer:
            probe(mode, bouncer.to(SERVER))


async def _snapshot_ms(dsn: str, jit: str, n: int = 15) -> str:
    from jobtui.metrics import snapshot

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"SET jit = {'on' if jit == 'on' else 'off'}")
        await snapshot(conn, "public")
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            await snapshot(conn, "public")
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    return f"jit={jit}: p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms"


def _jit_lines(dsn: str) -> None:
    from jobtui.sql import queries

    q = queries("public")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in ("metrics_state_counts", "metrics_dead_by_kind"):
            plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + getattr(q, name))]
            keep = [
                line.strip()
                for line in plan
                if any(k in line for k in ("JIT", "Functions", "Timing", "Heap Fetches", "Time:"))
            ]
            print(f"   {name}: " + " | ".join(keep[:12]))


def cmd_jit(args: argparse.Namespace) -> None:
    from benchmarks.bigdata import KINDS, build, insert_dead

    with psycopg.connect(SERVER, autocommit=True) as conn:
        settings = conn.execute(
            "SELECT version(), current_setting('jit'), current_setting('autovacuum')"
        ).fetchone()
        print("server:", settings)
    with scratch_db(migrated=False) as dsn:
        build(dsn, args.finished, args.ready, args.dead)
        print("A. just built (bigdata.build ends with VACUUM ANALYZE):")
        for jit in ("on", "off"):
            print("  ", asyncio.run(_snapshot_ms(dsn, jit)))
        with psycopg.connect(dsn, autocommit=True) as conn:
            insert_dead(conn, 50_000, list(KINDS))
            conn.execute(
                "INSERT INTO jobs (kind, payload, run_at) SELECT 'k' || (g %% 20), '{}', "
                "now() + interval '1 day' FROM generate_series(1, %s) g",
                (50_000,),
            )
        print("B. +50k dead letters and +50k scheduled jobs since that VACUUM:")
        for jit in ("on", "off"):
            print("  ", asyncio.run(_snapshot_ms(dsn, jit)))
        _jit_lines(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
        print("C. after another VACUUM (ANALYZE):")
        for jit in ("on", "off"):
            print("  ", asyncio.run(_snapshot_ms(dsn, jit)))
        _jit_lines(dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("drain")
    d.add_argument("--via", choices=("direct", "session", "transaction"), default="transaction")
    d.add_argument("--no-prepare", action="store_true", help="prepare_threshold=None")
    d.add_argument("--jobs", type=int, default=2000)
    d.add_argument("--seconds", type=float, default=20.0)
    d.set_defaults(run=cmd_drain)
    sub.add_parser("detect").set_defaults(run=cmd_detect)
    j = sub.add_parser("jit")
    j.add_argument("--finished", type=int, default=2_000_000)
    j.add_argument("--ready", type=int, default=200_000)
    j.add_argument("--dead", type=int, default=100_000)
    j.set_defaults(run=cmd_jit)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
