"""What one job costs the server, phase by phase, measured where noise does not reach.

The drain's jobs/s moves with whatever else runs on a shared machine; these do not: the WAL
written by this run's own transactions (pg_waldump over the run's LSN range, keeping the
records of transactions that touched this run's database; with and without full-page images),
the growth of `jobs`' indexes, and the CPU time of this run's own server backend (from /proc:
the server must be on this machine; 10 ms ticks, so give it thousands of jobs). One connection
plays the life of `--jobs` no-op jobs with the worker's own statements
(jobtui.worker.statements): one enqueue_many, claims of `--batch`, completions of `--batch`;
and SINGLE_INSERTS one-row INSERTs as the article's producer writes them. Each round runs on
a fresh database migrated by the jobtui it imports, dropped afterwards.

    .venv/bin/python benchmarks/server_cost.py --dsn postgresql://root@127.0.0.1:5432/postgres
    PYTHONPATH=/work/main .venv/bin/python benchmarks/server_cost.py   # another tree's jobtui
    .venv/bin/python benchmarks/server_cost.py --setup "DROP INDEX jobs_running"  # an experiment
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import statistics
import subprocess
import time
from dataclasses import dataclass

import psycopg
from psycopg import conninfo, sql

from jobtui.enqueue import enqueue_many
from jobtui.schema import migrate
from jobtui.worker.link import Link
from jobtui.worker.statements import WorkerDB

KIND = "bench.noop"
CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SINGLE_INSERTS = 1000


@dataclass
class Cost:
    """Server-side cost of one phase, per job: CPU of the backend, WAL, index growth."""

    cpu_us: float
    wal_bytes: float
    wal_fpi_bytes: float
    index_bytes: float


WALDUMP = "/usr/lib/postgresql/15/bin/pg_waldump"
_RECORD = re.compile(r"len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+)")


def wal_of_database(wal_dir: str, db_oid: int, start: str, end: str) -> tuple[float, float]:
    """WAL written between two LSNs by transactions that touched this database: (record bytes,
    with full-page images). WAL is the cluster's, shared with whoever else runs; pg_waldump
    tells this run's records apart by the transactions that wrote to its database."""
    done = subprocess.run(
        [WALDUMP, "-p", wal_dir, "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # a segment already recycled by a checkpoint: no figure
        return math.nan, math.nan
    out = done.stdout
    mine: set[str] = set()
    records: list[tuple[str, int, int]] = []
    for line in out.splitlines():
        m = _RECORD.search(line)
        if not m:
            continue
        records.append((m.group(3), int(m.group(1)), int(m.group(2))))
        if f"/{db_oid}/" in line and m.group(3) != "0":
            mine.add(m.group(3))
    ours = [r for r in records if r[0] in mine]
    return sum(r[1] for r in ours), sum(r[2] for r in ours)


def backend_cpu_s(pid: int) -> float:
    """utime + stime of one server process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S


@dataclass
class Reading:
    cpu_s: float
    lsn: str
    index_bytes: int


class Probe:
    """Readings of one backend (`pid`) of the database behind `side`, taken on `side`."""

    def __init__(self, side: psycopg.Connection, pid: int) -> None:
        self.side = side
        self.pid = pid
        row = side.execute(
            "SELECT current_setting('data_directory'),"
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        assert row is not None
        self.wal_dir, self.db_oid = f"{row[0]}/pg_wal", int(row[1])

    def read(self) -> Reading:
        row = self.side.execute(
            "SELECT pg_current_wal_insert_lsn()::text,"
            " (SELECT sum(pg_relation_size(indexrelid))::bigint FROM pg_index"
            "  WHERE indrelid = 'jobs'::regclass)"
        ).fetchone()
        assert row is not None
        return Reading(backend_cpu_s(self.pid), row[0], int(row[1]))

    def cost(self, a: Reading, b: Reading, jobs: int) -> Cost:
        rec, tot = wal_of_database(self.wal_dir, self.db_oid, a.lsn, b.lsn)
        return Cost(
            cpu_us=(b.cpu_s - a.cpu_s) / jobs * 1e6,
            wal_bytes=rec / jobs,
            wal_fpi_bytes=tot / jobs,
            index_bytes=(b.index_bytes - a.index_bytes) / jobs,
        )


async def _claim_and_complete(dsn: str, jobs: int, batch: int) -> tuple[Cost, Cost]:
    link = Link(dsn, "server cost", statement_timeout=60.0)
    db = WorkerDB("public", "bench:server-cost")
    try:
        pid = (await link.connection()).info.backend_pid
        with psycopg.connect(dsn, autocommit=True) as side:
            probe = Probe(side, pid)
            claimed: list[tuple[int, int]] = []
            before = probe.read()
            while True:
                rows = await db.claim(link, [KIND], batch)
                if not rows:
                    break
                claimed.extend((r[0], r[3]) for r in rows)
            mid = probe.read()
            for i in range(0, len(claimed), batch):
                await db.write_group(link, "done", claimed[i : i + batch])
            after = probe.read()
            costs = probe.cost(before, mid, jobs), probe.cost(mid, after, jobs)
    finally:
        await link.close()
    assert len(claimed) == jobs, f"claimed {len(claimed)} of {jobs}"
    return costs


def one_round(admin: str, jobs: int, batch: int, setup: list[str]) -> dict[str, Cost]:
    name = f"jobtui_server_cost_{os.getpid()}"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(admin, dbname=name)
    try:
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            psycopg.connect(dsn, autocommit=True) as side,
        ):
            migrate(conn, "public")
            for statement in setup:
                conn.execute(statement)  # an experiment: a dropped index, a disabled trigger
            probe = Probe(side, conn.info.backend_pid)
            before = probe.read()
            t0 = time.perf_counter()
            enqueue_many(conn, [{"kind": KIND, "payload": {"n": i}} for i in range(jobs)])
            wall = time.perf_counter() - t0
            mid = probe.read()
            for _ in range(SINGLE_INSERTS):
                conn.execute("INSERT INTO jobs (kind, payload) VALUES (%s, '{}')", (KIND + ".one",))
            after = probe.read()
            enq, single = probe.cost(before, mid, jobs), probe.cost(mid, after, SINGLE_INSERTS)
        claim, complete = asyncio.run(_claim_and_complete(dsn, jobs, batch))
        print(f"  enqueue_many of {jobs}: {wall:.3f} s", flush=True)
        return {"enqueue_many": enq, "one INSERT": single, "claim": claim, "complete": complete}
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(drop)


def _spread(values: list[float]) -> str:
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return "n/a"
    return f"{statistics.median(values):9.1f} [{values[0]:.0f}–{values[-1]:.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--setup", action="append", default=[], help="SQL run after migrating (an experiment)"
    )
    args = parser.parse_args()
    import jobtui

    print(f"jobtui from {os.path.dirname(jobtui.__file__)}; {args.jobs} jobs, batch {args.batch}")
    rounds = [one_round(args.dsn, args.jobs, args.batch, args.setup) for _ in range(args.rounds)]
    print(
        f"\n{'per job':14} {'server CPU µs':>22} {'WAL bytes':>22} {'WAL with FPI':>22}"
        f" {'index growth B':>22}"
    )
    for phase in rounds[0]:
        print(
            f"{phase:14} {_spread([r[phase].cpu_us for r in rounds]):>22}"
            f" {_spread([r[phase].wal_bytes for r in rounds]):>22}"
            f" {_spread([r[phase].wal_fpi_bytes for r in rounds]):>22}"
            f" {_spread([r[phase].index_bytes for r in rounds]):>22}"
        )


if __name__ == "__main__":
    main()
