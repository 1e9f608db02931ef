"""Drain and pickup latency, jobtui side by side with PgQueuer and procrastinate.

drain: N no-op jobs, two worker processes, jobs/s from the release to the last completion.
latency: one worker process on an idle queue, 50 jobs enqueued one at a time every 20 ms;
enqueue call start → handler start, p50/p99 (one warm-up job first, not counted).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path

import psycopg

from benchmarks.common import (
    Bench,
    Figure,
    ScenarioSkipped,
    analyze,
    at_least,
    at_most,
    cpu_seconds,
    percentile,
    server_pids,
    stop,
)
from benchmarks.systems import Jobtui, Proc, System, describe_failure, systems

POLL_S = 0.01


def drain_once(bench: Bench, system: System, n: int, workers: int = 2) -> tuple[float, int]:
    """(seconds, jobs done) from release to no unfinished job, on a fresh database.

    A system slower than its `drain_cap_s` is stopped there and reports what it finished.
    """
    with bench.fresh_db(system.name, migrate=isinstance(system, Jobtui)) as dsn:
        system.install(dsn)
        system.load(dsn, n)
        analyze(dsn)
        procs = system.start_workers(dsn, workers, bench.tmp, {})
        try:
            try:
                system.wait_ready(dsn, procs)
                # Who used the CPU during the drain: the server or the workers (embedded only;
                # backends that start during the drain are missed, the workers' are not).
                db = server_pids(bench)
                workers_pids = {p.pid for p, _ in procs}
                db0, w0 = cpu_seconds(db), cpu_seconds(workers_pids)
                seconds, done = measure_drain(dsn, system, procs, n, cap=system.drain_cap_s)
                if db:
                    print(
                        f"      CPU during the drain: PostgreSQL {cpu_seconds(db) - db0:.2f}s, "
                        f"workers {cpu_seconds(workers_pids) - w0:.2f}s "
                        f"(of {seconds * (os.cpu_count() or 1):.2f}s on {os.cpu_count()} cores)",
                        flush=True,
                    )
                return seconds, done
            except ScenarioSkipped as exc:
                raise ScenarioSkipped(describe_failure(system, procs, exc)) from None
        finally:
            for proc, _ in procs:
                stop(proc)


def measure_drain(
    dsn: str, system: System, procs: list[Proc], n: int, cap: float
) -> tuple[float, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        system.release(conn)
        t0 = time.perf_counter()
        sql = system.any_unfinished_sql()
        while True:
            row = conn.execute(sql).fetchone()
            elapsed = time.perf_counter() - t0
            if row is not None and not row[0]:
                return elapsed, n
            if elapsed > cap:
                counted = conn.execute(system.unfinished_sql()).fetchone()
                left = int(counted[0]) if counted else n
                if left == n:
                    raise ScenarioSkipped(f"no job finished within {cap:.0f}s")
                return elapsed, n - left
            if any(p.poll() is not None for p, _ in procs):
                raise ScenarioSkipped("a worker exited during the drain")
            time.sleep(POLL_S)


def run_drain(bench: Bench) -> list[Figure]:
    n = bench.scale(20_000, 2_000)
    runs = max(bench.n_runs(s.drain_runs) for s in systems(bench.peers))
    rates: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    capped: dict[str, str] = {}
    for system in systems(bench.peers):
        reason = system.unavailable()
        if reason:
            skipped[system.name] = reason
    for run in range(runs):
        for system in systems(bench.peers):
            if system.name in skipped or run >= bench.n_runs(system.drain_runs):
                continue
            try:
                seconds, done = drain_once(bench, system, n)
            except ScenarioSkipped as exc:
                skipped[system.name] = str(exc)
                print(f"  ! {system.name} drain failed: {exc}", flush=True)
                continue
            rates.setdefault(system.name, []).append(done / seconds)
            if done < n:
                capped[system.name] = f"stopped at {seconds:.0f}s with {done} of {n} done"
            print(
                f"    {system.name}: {done} jobs in {seconds:.3f}s = {done / seconds:,.0f} jobs/s"
                + (f" (stopped at its {system.drain_cap_s:.0f}s cap)" if done < n else ""),
                flush=True,
            )
    figures = []
    label = f"drain {n} no-op jobs, 2 workers"
    for system in systems(bench.peers):
        values = rates.get(system.name, [])
        is_jobtui = system.name == "jobtui"
        figures.append(
            Figure(
                "drain",
                f"{label}: {system.label}",
                "jobs/s",
                values,
                target="≥ 25 000 jobs/s" if is_jobtui else "",
                check=at_least(25_000) if is_jobtui else None,
                note=skipped.get(system.name, "") if not values else capped.get(system.name, ""),
            )
        )
    ours = rates.get("jobtui", [])
    for peer, target in (("pgqueuer", 3.0), ("procrastinate", None)):
        theirs = rates.get(peer, [])
        # Runs alternate systems, so pair them; a system with fewer runs is set against
        # the median of ours.
        if len(theirs) == len(ours):
            ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        else:
            ratios = [statistics.median(ours) / b for b in theirs] if ours else []
        if not ours and not theirs and peer in skipped and "jobtui" in skipped:
            continue
        figures.append(
            Figure(
                "drain",
                f"drain ratio jobtui / {peer}",
                "×",
                ratios,
                target=f"≥ {target:g}×" if target else "",
                check=at_least(target) if target else None,
                note="" if ratios else "needs both systems to run",
                digits=2,
            )
        )
    return figures


def latency_once(
    bench: Bench, system: System, count: int, interval: float
) -> tuple[list[float], list[float]]:
    """Pickup delays (ms) of `count` jobs enqueued one at a time into an idle queue, and the
    durations (ms) of the enqueue calls themselves."""
    with bench.fresh_db(f"lat_{system.name}", migrate=isinstance(system, Jobtui)) as dsn:
        system.install(dsn)
        analyze(dsn)
        out = bench.tmp / f"latency-{system.name}-{time.time_ns()}.txt"
        procs = system.start_workers(dsn, 1, bench.tmp, {"JOBTUI_BENCH_LATENCY_FILE": str(out)})
        try:
            try:
                system.wait_ready(dsn, procs)
                warm = [0.0]
                asyncio.run(system.enqueue_timed(dsn, warm, interval))
                wait_lines(out, 1, procs)
                time.sleep(0.5)  # back to idle
                out.unlink()
                calls = [0.0] * count
                asyncio.run(system.enqueue_timed(dsn, calls, interval))
                wait_lines(out, count, procs)
            except ScenarioSkipped as exc:
                raise ScenarioSkipped(describe_failure(system, procs, exc)) from None
        finally:
            for proc, _ in procs:
                stop(proc)
        return [float(x) * 1000 for x in out.read_text().split()], calls


def wait_lines(path: Path, count: int, procs: list[Proc], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= count:
            return
        if any(p.poll() is not None for p, _ in procs):
            raise ScenarioSkipped("the worker exited")
        time.sleep(0.02)
    seen = len(path.read_text().split()) if path.exists() else 0
    raise ScenarioSkipped(f"only {seen} of {count} jobs started within {timeout:.0f}s")


def run_latency(bench: Bench) -> list[Figure]:
    count, interval = 50, 0.020
    runs = bench.n_runs(3)
    p50: dict[str, list[float]] = {}
    p99: dict[str, list[float]] = {}
    call50: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    for _ in range(runs):
        for system in systems(bench.peers):
            if system.name in skipped:
                continue
            reason = system.unavailable()
            if reason:
                skipped[system.name] = reason
                continue
            try:
                delays, calls = latency_once(bench, system, count, interval)
            except ScenarioSkipped as exc:
                skipped[system.name] = str(exc)
                print(f"  ! {system.name} latency failed: {exc}", flush=True)
                continue
            p50.setdefault(system.name, []).append(percentile(delays, 50))
            p99.setdefault(system.name, []).append(percentile(delays, 99))
            call50.setdefault(system.name, []).append(percentile(calls, 50))
            print(
                f"    {system.name}: p50 {percentile(delays, 50):.2f} ms, "
                f"p99 {percentile(delays, 99):.2f} ms, max {max(delays):.2f} ms, "
                f"mean {statistics.mean(delays):.2f} ms; the enqueue call itself p50 "
                f"{percentile(calls, 50):.2f} ms",
                flush=True,
            )
    figures = []
    for system in systems(bench.peers):
        ours = system.name == "jobtui"
        note = skipped.get(system.name, "")
        figures.append(
            Figure(
                "latency",
                f"pickup latency p50: {system.label}",
                "ms",
                p50.get(system.name, []),
                target="≤ 2 ms" if ours else "",
                check=at_most(2) if ours else None,
                note=note if system.name not in p50 else "",
                digits=2,
            )
        )
        figures.append(
            Figure(
                "latency",
                f"pickup latency p99: {system.label}",
                "ms",
                p99.get(system.name, []),
                target="≤ 5 ms" if ours else "",
                check=at_most(5) if ours else None,
                note=note if system.name not in p99 else "",
                digits=2,
            )
        )
        if system.name in call50:
            figures.append(
                Figure(
                    "latency",
                    f"  of which the enqueue call, p50: {system.label}",
                    "ms",
                    call50[system.name],
                    digits=2,
                )
            )
    return figures
