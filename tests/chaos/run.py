"""Chaos run: jobs under random failures, SIGKILLed workers and a PostgreSQL restart.

Usage: python tests/chaos/run.py [--jobs 10000] [--workers 3] [--kill-every 2] [--no-db-restart]

It starts its own embedded PostgreSQL, enqueues jobs across three kinds, runs worker processes
whose handlers sleep, fail at random and record every execution in a ledger table, kills one
worker with SIGKILL every few seconds (and starts a new one), restarts PostgreSQL once, waits for
the queue to drain and then checks: lost jobs (must be 0), jobs run concurrently with themselves
(must be 0), jobs that succeeded more than once (reported), dead letters whose attempts differ
from max_attempts (must be 0), and the time from a kill to its jobs running again.
Exit status 0 when every "must" holds.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg import conninfo

from jobtui.embedded import start_embedded
from jobtui.enqueue import enqueue_many
from jobtui.schema import migrate

HERE = Path(__file__).resolve().parent
KINDS = {"chaos_a": 3, "chaos_b": 4, "chaos_c": 5}
LEDGER_DDL = """
CREATE TABLE chaos_ledger (
  entry      bigserial primary key,
  n          int not null,
  pid        int not null,
  started_at timestamptz not null,
  ended_at   timestamptz,
  ok         boolean
)"""


@dataclass
class Kill:
    pid: int
    at: datetime


def _connect(dsn: str) -> psycopg.Connection:
    deadline = time.monotonic() + 30
    while True:
        try:
            return psycopg.connect(dsn, autocommit=True, connect_timeout=3)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Run:
    def __init__(self, dsn: str, workers: int, concurrency: int, env: dict[str, str]) -> None:
        self.dsn = dsn
        self.env = env
        self.concurrency = concurrency
        self.procs: list[subprocess.Popen[bytes]] = []
        self.kills: list[Kill] = []
        self.log = open(Path(env["CHAOS_LOG_DIR"]) / "workers.log", "ab")  # noqa: SIM115
        for _ in range(workers):
            self.start_worker()
        self.conn = _connect(dsn)

    def start_worker(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "run_worker.py"), self.dsn],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)

    def now(self) -> datetime:
        while True:
            try:
                return self.conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
            except psycopg.OperationalError:
                self.conn = _connect(self.dsn)

    def kill_one(self) -> None:
        victim = random.choice([p for p in self.procs if p.poll() is None])
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.kills.append(Kill(victim.pid, self.now()))
        self.procs.remove(victim)
        self.start_worker()

    def pending(self) -> int:
        while True:
            try:
                row = self.conn.execute(
                    "SELECT count(*) FROM jobs WHERE finished_at IS NULL"
                ).fetchone()
                return int(row[0])  # type: ignore[index]
            except psycopg.OperationalError:
                self.conn = _connect(self.dsn)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.log.close()


def analyse(conn: psycopg.Connection, n_jobs: int, kills: list[Kill]) -> dict[str, float]:
    """The figures the run is judged by, computed from the tables and the ledger."""
    one = lambda sql, *p: conn.execute(sql, p).fetchone()[0]  # noqa: E731
    total_rows = one("SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM dead_letters)")
    lost = one(
        """SELECT count(*) FROM generate_series(0, %s - 1) g(n)
           WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE (j.payload->>'n')::int = g.n
                               AND j.finished_at IS NOT NULL AND j.cancelled_at IS NULL)
             AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE (d.payload->>'n')::int = g.n)""",
        n_jobs,
    )
    bad_dead = one("SELECT count(*) FROM dead_letters WHERE attempts <> max_attempts")
    dead = one("SELECT count(*) FROM dead_letters")
    succeeded_twice = one(
        "SELECT count(*) FROM (SELECT n FROM chaos_ledger WHERE ok GROUP BY n"
        " HAVING count(*) > 1) x"
    )
    killed_at = {k.pid: k.at for k in kills}
    rows = conn.execute(
        "SELECT n, pid, started_at, ended_at FROM chaos_ledger ORDER BY n, started_at"
    ).fetchall()
    concurrent = unknown_end = 0
    by_job: dict[int, list[tuple[int, datetime, datetime | None]]] = {}
    for n, pid, started, ended in rows:
        by_job.setdefault(n, []).append((pid, started, ended))
    recoveries: list[float] = []
    for runs in by_job.values():
        for (pid, _started, ended), (_npid, nstarted, _nended) in itertools.pairwise(runs):
            end = ended or killed_at.get(pid)
            if end is None:
                unknown_end += 1
            elif nstarted < end:
                concurrent += 1
            if ended is None and pid in killed_at:
                recoveries.append((nstarted - killed_at[pid]).total_seconds())
    return {
        "enqueued": n_jobs,
        "rows in jobs + dead_letters": total_rows,
        "lost jobs": lost,
        "jobs run concurrently with themselves": concurrent,
        "jobs succeeded more than once": succeeded_twice,
        "dead letters": dead,
        "dead letters with attempts <> max_attempts": bad_dead,
        "executions with unknown end": unknown_end,
        "executions interrupted by a kill": len(recoveries),
        "kill → rerun median s": statistics.median(recoveries) if recoveries else float("nan"),
        "kill → rerun max s": max(recoveries) if recoveries else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--kill-every", type=float, default=2.0)
    ap.add_argument("--max-sleep", type=float, default=0.03, help="handler sleep upper bound, s")
    ap.add_argument("--fail-rate", type=float, default=0.2)
    ap.add_argument("--no-db-restart", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="jobtui-chaos-"))
    server = start_embedded(root / "pg")
    try:
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute("CREATE DATABASE chaos")
        dsn = conninfo.make_conninfo(server.dsn, dbname="chaos")
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrate(conn, "public")
            conn.execute(LEDGER_DDL)
            kinds = list(KINDS)
            enqueue_many(
                conn,
                [
                    {"kind": kinds[i % 3], "payload": {"n": i}, "max_attempts": KINDS[kinds[i % 3]]}
                    for i in range(args.jobs)
                ],
            )
            conn.execute("ANALYZE")
        env = dict(os.environ)
        env.update(
            CHAOS_DSN=dsn,
            CHAOS_LOG_DIR=str(root),
            CHAOS_FAIL_RATE=str(args.fail_rate),
            CHAOS_MAX_SLEEP=str(args.max_sleep),
            CHAOS_CONCURRENCY=str(args.concurrency),
            PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        )
        print(
            f"chaos: {args.jobs} jobs, {args.workers} workers, kill every {args.kill_every}s, "
            f"db restart: {not args.no_db_restart}, cores: {os.cpu_count()}",
            flush=True,
        )
        started = time.monotonic()
        run = Run(dsn, args.workers, args.concurrency, env)
        restarted = args.no_db_restart
        next_kill = started + args.kill_every
        try:
            while run.pending() > 0:
                now = time.monotonic()
                if now - started > args.timeout:
                    print(f"chaos: timed out with {run.pending()} jobs pending", flush=True)
                    break
                if now >= next_kill:
                    run.kill_one()
                    next_kill = now + args.kill_every
                    if not restarted and len(run.kills) == 2:
                        print("chaos: restarting PostgreSQL", flush=True)
                        server.restart(down_for=1.0)
                        restarted = True
                time.sleep(0.05)
            elapsed = time.monotonic() - started
        finally:
            run.stop()
        with psycopg.connect(dsn, autocommit=True) as conn:
            figures = analyse(conn, args.jobs, run.kills)
        figures["workers killed"] = len(run.kills)
        figures["elapsed s"] = round(elapsed, 1)
        figures["jobs/s"] = round(args.jobs / elapsed, 1)
        for name, value in figures.items():
            print(f"  {name}: {value:.2f}" if isinstance(value, float) else f"  {name}: {value}")
        ok = (
            figures["lost jobs"] == 0
            and figures["jobs run concurrently with themselves"] == 0
            and figures["dead letters with attempts <> max_attempts"] == 0
            and figures["rows in jobs + dead_letters"] == args.jobs
        )
        print("chaos: OK" if ok else "chaos: FAILED", flush=True)
        if not ok:
            print(f"chaos: worker logs in {root / 'workers.log'}", flush=True)
        return 0 if ok else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
