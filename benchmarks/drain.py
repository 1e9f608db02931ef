"""Drain and pickup latency, jobtui side by side with PgQueuer and procrastinate.

drain: N no-op jobs, W worker processes (default 2), jobs/s from the release to the last
completion, and the CPU the server and the workers used over that window.
latency: W worker processes (default 2, as the drain) on an idle queue, 50 jobs enqueued one at
a time every 20 ms; enqueue call start → handler start, p50/p99 (one warm-up job first).

Runs are interleaved rounds whose order rotates (round 1: jobtui, PgQueuer, procrastinate;
round 2: PgQueuer, procrastinate, jobtui; …). `--workers 1,2,4` and `--backlog 20000,200000`
run the scaling matrix; every run's raw figures go to the results JSON.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.common import (
    Bench,
    CpuSplit,
    Figure,
    ScenarioSkipped,
    analyze,
    at_least,
    at_most,
    percentile,
    stop,
)
from benchmarks.systems import Jobtui, Proc, System, describe_failure, rotated, runnable

POLL_S = 0.01
DEFAULT_WORKERS = 2


def drain_once(
    bench: Bench, system: System, n: int, workers: int = DEFAULT_WORKERS
) -> dict[str, Any]:
    """One drain on a fresh database: seconds from release to no unfinished job, jobs done,
    and the CPU split over that window.

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
                cpu = CpuSplit(bench, {p.pid for p, _ in procs})
                seconds, done = measure_drain(dsn, system, procs, n, system.drain_cap_s, cpu)
                split = cpu.split() if cpu.available else {}
            except ScenarioSkipped as exc:
                raise ScenarioSkipped(describe_failure(system, procs, exc)) from None
        finally:
            for proc, _ in procs:
                stop(proc)
    record: dict[str, Any] = {"seconds": seconds, "done": done, "rate": done / seconds, **split}
    record["load_1m"] = round(os.getloadavg()[0], 2)  # at the drain's end: a shared machine
    if split:
        cores = os.cpu_count() or 1
        print(
            f"      CPU during the drain: PostgreSQL {split['server_cpu_s']:.2f}s, "
            f"workers {split['workers_cpu_s']:.2f}s (of {seconds * cores:.2f}s on {cores} "
            "cores; the 10 ms poll's backend counts as PostgreSQL)",
            flush=True,
        )
    return record


def measure_drain(
    dsn: str, system: System, procs: list[Proc], n: int, cap: float, cpu: CpuSplit | None = None
) -> tuple[float, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The CPU window opens just before the release commits: the UPDATE that makes the whole
        # backlog due is the benchmark's set-up, not the queue's work.
        system.release(conn, cpu.start if cpu is not None and cpu.available else lambda: None)
        t0 = time.perf_counter()
        sql = system.any_unfinished_sql()
        while True:
            row = conn.execute(sql).fetchone()
            elapsed = time.perf_counter() - t0
            if cpu is not None and cpu.available:
                cpu.sample()
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


def interleaved(found: list[System], runs: int) -> Iterator[tuple[dict[str, int], System]]:
    """({round, position}, system) for `runs` rounds whose order rotates, announcing each."""
    for round_no in range(runs):
        order = rotated(found, round_no)
        print(f"    round {round_no + 1}: {', '.join(s.name for s in order)}", flush=True)
        for position, system in enumerate(order, 1):
            yield {"round": round_no + 1, "position": position}, system


def print_settings(found: list[System]) -> None:
    for system in found:
        print(f"  settings {system.describe()}", flush=True)


def run_drain(bench: Bench) -> list[Figure]:
    found = runnable(bench)
    print_settings(found)
    backlogs = bench.backlogs or [bench.scale(20_000, 2_000)]
    worker_counts = bench.workers or [DEFAULT_WORKERS]
    figures: list[Figure] = []
    for n in backlogs:
        for workers in worker_counts:
            figures += drain_cell(bench, found, n, workers)
    return figures


def drain_cell(bench: Bench, found: list[System], n: int, workers: int) -> list[Figure]:
    """Every system's drain runs at one backlog and one number of worker processes."""
    runs = max((bench.n_runs(s.drain_runs) for s in found), default=0)
    rates: dict[str, list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    failed: dict[str, str] = {}
    capped: dict[str, str] = {}
    print(f"  -- {n} jobs, {workers} worker process(es), {runs} round(s) --", flush=True)
    for where, system in interleaved(found, runs):
        if system.name in failed or where["round"] > bench.n_runs(system.drain_runs):
            continue
        try:
            rec = drain_once(bench, system, n, workers)
        except ScenarioSkipped as exc:
            failed[system.name] = str(exc)
            bench.fail(f"drain {system.name}: {exc}")
            continue
        bench.records.append(
            {"scenario": "drain", "system": system.name, **where, "workers": workers,
             "backlog": n, **rec}
        )  # fmt: skip
        done, seconds = rec["done"], rec["seconds"]
        rates.setdefault(system.name, []).append(rec["rate"])
        for key in ("server_cpu_s", "workers_cpu_s"):
            if key in rec:
                cpu.setdefault((system.name, key), []).append(rec[key])
        if done < n:
            capped[system.name] = f"stopped at {seconds:.0f}s with {done} of {n} done"
        print(
            f"    {system.name}: {done} jobs in {seconds:.3f}s = {rec['rate']:,.0f} jobs/s"
            + (f" (stopped at its {system.drain_cap_s:.0f}s cap)" if done < n else ""),
            flush=True,
        )
    figures = []
    label = f"drain {n} no-op jobs, {workers} worker process{'es' if workers > 1 else ''}"
    metric = f"drain:{n}:{workers}"
    for system in found:
        values = rates.get(system.name, [])
        is_jobtui = system.name == "jobtui"
        figures.append(
            Figure(
                "drain",
                f"{label}: {system.label}",
                "jobs/s",
                values,
                target="≥ 45 000 jobs/s" if is_jobtui else "",
                check=at_least(45_000) if is_jobtui else None,
                note=failed.get(system.name, "") if not values else capped.get(system.name, ""),
                digits=0,
                system=system.name,
                metric=metric,
            )
        )
    for system in found:
        for key, part in (("server_cpu_s", "PostgreSQL"), ("workers_cpu_s", "the workers")):
            if (system.name, key) in cpu:
                figures.append(
                    Figure(
                        "drain",
                        f"{label}, CPU seconds in {part}: {system.label}",
                        "s",
                        cpu[(system.name, key)],
                        digits=2,
                        system=system.name,
                        metric=f"{metric}:{key}",
                    )
                )
    ours = rates.get("jobtui", [])
    for peer in ("pgqueuer", "procrastinate"):
        theirs = rates.get(peer, [])
        if not ours or not theirs:
            continue
        # Rounds pair the systems; a system with fewer runs is set against our median.
        if len(theirs) == len(ours):
            ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
        else:
            ratios = [statistics.median(ours) / b for b in theirs]
        figures.append(
            Figure(
                "drain",
                f"{label}: ratio jobtui / {peer}",
                "×",
                ratios,
                digits=2,
                system=peer,
                metric=f"{metric}:ratio",
            )
        )
    return figures


def latency_once(
    bench: Bench, system: System, count: int, interval: float, workers: int = DEFAULT_WORKERS
) -> tuple[list[float], list[float]]:
    """Pickup delays (ms) of `count` jobs enqueued one at a time into an idle queue, and the
    durations (ms) of the enqueue calls themselves."""
    with bench.fresh_db(f"lat_{system.name}", migrate=isinstance(system, Jobtui)) as dsn:
        system.install(dsn)
        analyze(dsn)
        out = bench.tmp / f"latency-{system.name}-{time.time_ns()}.txt"
        env = {"JOBTUI_BENCH_LATENCY_FILE": str(out)}
        procs = system.start_workers(dsn, workers, bench.tmp, env)
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
    found = runnable(bench)
    print_settings(found)
    figures: list[Figure] = []
    for workers in bench.workers or [DEFAULT_WORKERS]:
        figures += latency_cell(bench, found, workers)
    return figures


def latency_cell(bench: Bench, found: list[System], workers: int) -> list[Figure]:
    count, interval = bench.scale(200, 50), 0.020  # p99 of 200 is not just the maximum
    runs = bench.n_runs(3)
    p50: dict[str, list[float]] = {}
    p99: dict[str, list[float]] = {}
    call50: dict[str, list[float]] = {}
    failed: dict[str, str] = {}
    print(f"  -- {workers} worker process(es), {runs} round(s) --", flush=True)
    for where, system in interleaved(found, runs):
        if system.name in failed:
            continue
        try:
            delays, calls = latency_once(bench, system, count, interval, workers)
        except ScenarioSkipped as exc:
            failed[system.name] = str(exc)
            bench.fail(f"latency {system.name}: {exc}")
            continue
        bench.records.append(
            {"scenario": "latency", "system": system.name, **where, "workers": workers,
             "delays_ms": delays, "enqueue_call_ms": calls}
        )  # fmt: skip
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
    suffix = f", {workers} worker process{'es' if workers > 1 else ''}"
    for system in found:
        ours = system.name == "jobtui"
        note = failed.get(system.name, "")
        for p, values, limit in ((50, p50, 2.0), (99, p99, 5.0)):
            figures.append(
                Figure(
                    "latency",
                    f"pickup latency p{p}{suffix}: {system.label}",
                    "ms",
                    values.get(system.name, []),
                    target=f"≤ {limit:g} ms" if ours else "",
                    check=at_most(limit) if ours else None,
                    note=note if system.name not in values else "",
                    digits=2,
                    system=system.name,
                    metric=f"latency:p{p}:{workers}",
                )
            )
        if system.name in call50:
            figures.append(
                Figure(
                    "latency",
                    f"  of which the enqueue call, p50{suffix}: {system.label}",
                    "ms",
                    call50[system.name],
                    digits=2,
                    system=system.name,
                    metric=f"latency:call50:{workers}",
                )
            )
    return figures
