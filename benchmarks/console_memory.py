"""Console resident memory over minutes of live refresh on the large data set.

The real console runs in a 120×40 pty (see console_bytes.ConsolePty) with its 2 s refresh; every
few seconds it is sent a tab key (1–4 in turn) so every page keeps loading, and its VmRSS is read
from /proc every sample interval. Duration: 10 minutes (0.5 with --quick, or --minutes M).
Reported: the last sample, and the growth over the second half of the run ("not growing").
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks import bigdata
from benchmarks.common import Bench, Figure, at_most, rss_kb
from benchmarks.console_bytes import ConsolePty, console_argv

TABS = ("1", "2", "3", "4")


def drive(console: ConsolePty, duration: float, sample_every: float) -> list[tuple[float, float]]:
    """Keep the console refreshing, press a tab key every 5 s, sample its RSS (t, MB)."""
    series: list[tuple[float, float]] = []
    console.read_for(5)  # start-up
    t0 = time.monotonic()
    tab_every = float(os.environ.get("JOBTUI_BENCH_TAB_EVERY") or 5.0)  # 0: stay on Overview
    next_sample, tab = t0, 0
    next_tab = t0 + tab_every if tab_every > 0 else float("inf")
    while True:
        now = time.monotonic()
        if now >= next_sample:
            series.append((now - t0, rss_kb(console.pid) / 1024))
            print(f"    t={now - t0:5.0f}s rss={series[-1][1]:.1f} MB", flush=True)
            next_sample += sample_every
            if now - t0 >= duration:
                return series
        if now >= next_tab:
            tab = (tab + 1) % len(TABS)
            console.press(TABS[tab])
            next_tab += tab_every
        console.read_for(max(0.05, min(next_sample, next_tab) - time.monotonic()))


def heap(bench: Bench, dsn: str, seconds: float) -> None:
    """A second pass under tracemalloc (benchmarks.console_heap); print what grew."""
    out = bench.tmp / f"heap-{time.time_ns()}.txt"
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.console_heap",
        str(seconds / 3),
        str(seconds),
        str(out),
        "--",
        *console_argv(dsn),
    ]
    print(f"    tracemalloc pass ({seconds:.0f}s; its RSS is not comparable):", flush=True)
    with ConsolePty(dsn, cmd=cmd) as console:
        drive(console, seconds + 10, max(10.0, seconds / 4))
    text = out.read_text() if out.exists() else "no report (the console stopped early)"
    for line in text.strip().splitlines():
        print("    " + line, flush=True)


def run(bench: Bench) -> list[Figure]:
    minutes = float(os.environ.get("JOBTUI_BENCH_MINUTES") or (0.5 if bench.quick else 10))
    duration = minutes * 60
    sample_every = 30.0 if duration >= 300 else max(5.0, duration / 6)
    with bench.fresh_db("console_memory", template=bigdata.template(bench)) as dsn:
        with ConsolePty(dsn) as console:
            series = drive(console, duration, sample_every)
        if os.environ.get("JOBTUI_BENCH_HEAP"):
            heap(bench, dsn, min(duration, 180.0))
    last = series[-1][1]
    half = [mb for t, mb in series if t >= duration / 2]
    growth = half[-1] - half[0] if len(half) > 1 else 0.0
    shown = ", ".join(f"{mb:.0f}" for _, mb in series)
    return [
        Figure(
            "console_memory",
            f"console RSS after {minutes:g} min of refresh",
            "MB",
            [last],
            target="≤ 150 MB",
            check=at_most(150),
            note=f"series (MB): {shown}",
        ),
        Figure(
            "console_memory",
            "console RSS growth over the second half",
            "MB",
            [growth],
            target="not growing (≤ 5 MB)",
            check=at_most(5),
        ),
    ]
