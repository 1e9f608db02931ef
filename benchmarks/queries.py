"""Read paths on the large data set: the Overview snapshot and each console page's query.

Each run is a batch of calls on one connection after two warm-up calls (the console keeps its
connection and calls the same statements every refresh); a run gives p50 and p95, and the
figures are the median [min–max] of those over the runs.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

import psycopg

from benchmarks import bigdata, sqlprofile
from benchmarks.common import SCHEMA, Bench, Figure, at_most, percentile


async def _timed(
    dsn: str, fn: Callable[[Any], Any], calls: int, warmup: int = 2, budget_s: float = 8.0
) -> list[float]:
    """Milliseconds per call of `fn(conn)`, sync or async API alike.

    A slow statement stops after `budget_s` (with at least 5 calls) to keep the run short.
    """
    aconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    sconn = psycopg.connect(dsn, autocommit=True)
    try:
        times: list[float] = []
        started = time.perf_counter()
        for i in range(warmup + calls):
            if len(times) >= 5 and time.perf_counter() - started > budget_s:
                break
            t0 = time.perf_counter()
            result = fn((aconn, sconn))
            if inspect.isawaitable(result):
                await result
            if i >= warmup:
                times.append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        await aconn.close()
        sconn.close()


def measure(
    bench: Bench, dsn: str, label: str, api: Callable[..., Any], args: tuple[Any, ...], calls: int
) -> tuple[list[float], list[float]]:
    """p50s and p95s (ms) of `api(conn, *args)`, with an async connection if `api` is async."""
    runs = bench.n_runs(3)
    p50, p95 = [], []
    index = 0 if asyncio.iscoroutinefunction(api) else 1
    for _ in range(runs):
        times = asyncio.run(_timed(dsn, lambda conns: api(conns[index], *args), calls))
        p50.append(percentile(times, 50))
        p95.append(percentile(times, 95))
    print(f"    {label}: p50 {_ms(p50)} p95 {_ms(p95)} ({len(times)} calls a run)", flush=True)
    print(sqlprofile.profile(dsn, api, args), flush=True)
    return p50, p95


def run_metrics(bench: Bench) -> list[Figure]:
    from jobtui import metrics

    with bench.fresh_db("metrics", template=bigdata.template(bench)) as dsn:
        p50, p95 = measure(bench, dsn, "snapshot", metrics.snapshot, (SCHEMA,), bench.scale(20, 10))
    label = "metrics snapshot " + _data_label(bench)
    return [
        Figure("metrics", f"{label} p50", "ms", p50),
        Figure("metrics", f"{label} p95", "ms", p95, target="≤ 50 ms", check=at_most(50)),
    ]


def run_queries(bench: Bench) -> list[Figure]:
    from jobtui import browse
    from jobtui.models import DeadFilter, JobFilter

    pages: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
        ("Jobs filtered by kind", browse.list_jobs, (SCHEMA, JobFilter(kind="report.render"))),
        (
            "Jobs text search (1 row in 5 000)",
            browse.list_jobs,
            (SCHEMA, JobFilter(text="cust-4242")),
        ),
        ("Dead letters grouped", browse.dead_groups, (SCHEMA, DeadFilter())),
        ("Dead letters, one kind", browse.list_dead, (SCHEMA, DeadFilter(kind="report.render"))),
    ]
    figures = []
    with bench.fresh_db("queries", template=bigdata.template(bench)) as dsn:
        for label, api, args in pages:
            p50, p95 = measure(bench, dsn, label, api, args, bench.scale(20, 10))
            figures.append(Figure("queries", f"{label} p50", "ms", p50))
            figures.append(
                Figure("queries", f"{label} p95", "ms", p95, target="≤ 100 ms", check=at_most(100))
            )
    return figures


def _data_label(bench: Bench) -> str:
    s = bigdata.sizes(bench)
    return f"({s['finished'] // 1000}k fin/{s['ready'] // 1000}k ready/{s['dead'] // 1000}k dead)"


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values) + " ms"
