"""Chaos throughput: the drain while one worker is SIGKILLed every 2 s and restarted.

Two `jobtui worker` processes (heartbeat 0.5 s, heartbeat timeout 2 s, so rescues are quick)
drain N no-op jobs; every 2 s the older of them is SIGKILLed and a new one started. Reported:
jobs/s from release to the last completion, and per kill the recovery time (kill → no unfinished
job still locked by the killed worker). At the end every job must be finished or dead-lettered.
"""

from __future__ import annotations

import os
import signal
import statistics
import time

import psycopg

from benchmarks.common import Bench, Figure, ScenarioSkipped, analyze, spawn, stop
from benchmarks.systems import Jobtui, Proc, raise_unavailable, worker_command

KILL_EVERY_S = 2.0
HEARTBEAT = ["--heartbeat", "0.5s", "--heartbeat-timeout", "2s"]


def _held(conn: psycopg.Connection, worker_id: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM jobs WHERE locked_by = %s AND finished_at IS NULL", (worker_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def once(bench: Bench, n: int) -> tuple[float, list[float], int, int]:
    """(jobs/s, recovery times, kills, lost) for one chaos drain."""
    system = Jobtui()
    with bench.fresh_db("chaos") as dsn:
        system.load(dsn, n)
        analyze(dsn)
        cmd = worker_command(dsn, system.concurrency, HEARTBEAT)

        def start() -> Proc:
            log = bench.tmp / f"chaos-worker-{time.time_ns()}.log"
            return spawn(cmd, log), log

        procs = [start(), start()]
        try:
            system.wait_ready(dsn, procs)
            with psycopg.connect(dsn, autocommit=True) as conn:
                system.release(conn, lambda: None)
                t0 = time.perf_counter()
                next_kill = t0 + KILL_EVERY_S
                # killed worker id -> [kill time, most jobs seen still locked by it]
                pending: dict[str, list[float]] = {}
                recoveries: list[float] = []
                held_seen: list[int] = []
                kills = 0
                deadline = t0 + max(300.0, n / 100)
                while True:
                    now = time.perf_counter()
                    row = conn.execute(system.any_unfinished_sql()).fetchone()
                    unfinished = bool(row[0]) if row else True
                    for wid, (killed_at, most) in list(pending.items()):
                        held = _held(conn, wid)
                        pending[wid][1] = most = max(most, held)
                        # A claim already sent when the worker died still commits, so a
                        # worker seen holding nothing is watched for a moment longer.
                        if held == 0 and (most > 0 or now - killed_at > 1.0):
                            if most > 0:
                                recoveries.append(now - killed_at)
                            held_seen.append(int(most))
                            del pending[wid]
                    if not unfinished and not pending:
                        elapsed = now - t0
                        break
                    if unfinished and now >= next_kill:
                        victim, _ = procs.pop(0)
                        found = conn.execute(
                            "SELECT id FROM workers WHERE pid = %s", (victim.pid,)
                        ).fetchone()
                        os.killpg(victim.pid, signal.SIGKILL)
                        victim.wait(5)
                        kills += 1
                        if found:
                            pending[found[0]] = [time.perf_counter(), 0.0]
                        procs.append(start())
                        next_kill += KILL_EVERY_S
                    if now > deadline:
                        raise ScenarioSkipped(
                            f"jobs still unfinished after {deadline - t0:.0f}s of chaos"
                        )
                    time.sleep(0.02)
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL)"
                    " + (SELECT count(*) FROM dead_letters)"
                ).fetchone()
                lost = n - int(row[0]) if row else n
        finally:
            for proc, _ in procs:
                stop(proc)
    rate = n / elapsed
    shown = ", ".join(f"{r:.1f}" for r in recoveries)
    print(
        f"    {n} jobs in {elapsed:.2f}s = {rate:,.0f} jobs/s; {kills} kills; jobs held by "
        f"each killed worker: {held_seen}; recoveries (s): {shown or '-'}; lost {lost}",
        flush=True,
    )
    return rate, recoveries, kills, lost


def run(bench: Bench) -> list[Figure]:
    raise_unavailable(Jobtui())
    n = bench.scale(200_000, 20_000)
    results = [once(bench, n) for _ in range(bench.n_runs(1))]
    rates = [r[0] for r in results]
    recoveries = [x for r in results for x in r[1]]
    kills = sum(r[2] for r in results)
    lost = float(sum(r[3] for r in results))
    figures = [
        Figure(
            "chaos",
            f"chaos drain {n} jobs, SIGKILL every 2 s",
            "jobs/s",
            rates,
            target="report",
            note=f"{kills} kills in all",
        ),
        Figure(
            "chaos",
            "recovery time after a kill (heartbeat timeout 2 s)",
            "s",
            recoveries,
            target="report",
            digits=2,
            note=f"mean {statistics.mean(recoveries):.2f}s" if recoveries else "no kill landed",
        ),
        Figure(
            "chaos",
            f"jobs lost, all {len(results)} runs",
            "jobs",
            [lost],
            target="= 0",
            check=lambda v: v == 0,
            digits=0,
        ),
    ]
    return figures
