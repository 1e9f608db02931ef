"""Plot how drain and pickup change with worker processes and backlog (`make bench-plot`).

    python benchmarks/plot.py benchmarks/results.json [more results…] [--history …history.json]
                              [--out benchmarks/scaling.png]

Reads the raw runs of one or more results JSON files, pooled (benchmarks/run.py; best with the
matrix `--workers 1,2,4 --backlog 20000,200000,2000000`), and draws three panels: drain jobs/s
against worker processes (one line per system and backlog), drain jobs/s against backlog (one
line per system and worker count, log scale) and pickup p50/p99 against worker processes; with
`--history` (benchmarks/history.py) a fourth: the console's reads against the number of
finished jobs kept. Points are medians, bars the min–max of the runs (for the history panel,
p50 with a bar up to p95). matplotlib comes with the bench extra.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import percentile

OUT = Path(__file__).resolve().parent / "scaling.png"
NAMES = {"jobtui": "jobtui", "pgqueuer": "PgQueuer", "procrastinate": "procrastinate"}


def spread(values: list[float]) -> tuple[float, float, float]:
    """median, and its distance to min and max (for error bars)."""
    mid = statistics.median(values)
    return mid, mid - min(values), max(values) - mid


def series(runs: list[dict[str, Any]], x: str, line: tuple[str, ...], value: str) -> dict:
    """{line key: {x: [values]}} from the raw runs."""
    out: dict[tuple[Any, ...], dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        out[tuple(run[k] for k in line)][run[x]].append(run[value])
    return out


def draw(ax: Any, data: dict, label: Any, log_x: bool = False) -> None:
    for key, points in sorted(data.items()):
        xs = sorted(points)
        mids, lows, highs = zip(*(spread(points[v]) for v in xs), strict=True)
        ax.errorbar(xs, mids, yerr=[lows, highs], marker="o", capsize=3, label=label(key))
    if log_x:
        ax.set_xscale("log")
    else:
        ax.set_xticks(sorted({x for points in data.values() for x in points}))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def draw_history(ax: Any, history: dict[str, Any]) -> None:
    """p50 of each read against the finished jobs kept, a bar up to its p95."""
    timings = history["timings_ms"]
    sizes = sorted(int(n) for n in timings)
    for label in timings[str(sizes[0])]:
        p50 = [statistics.median(timings[str(n)][label]) for n in sizes]
        p95 = [percentile(timings[str(n)][label], 95) for n in sizes]
        ups = [hi - mid for mid, hi in zip(p50, p95, strict=True)]
        ax.errorbar(sizes, p50, yerr=[[0] * len(sizes), ups], marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{n / 1e6:g}M" for n in sizes])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)
    ax.set(
        title="Console reads vs finished jobs kept",
        xlabel="finished jobs",
        ylabel="ms (p50, bar to p95)",
    )


def pooled(files: list[dict[str, Any]]) -> dict[str, Any]:
    """One results dict from several runs of run.py on one machine: their runs together."""
    first = files[0]
    return {
        **first,
        "date": " + ".join(str(f.get("date", "?"))[:16] for f in files),
        "mode": "/".join(sorted({str(f.get("mode", "?")) for f in files})),
        "runs": [r for f in files for r in f.get("runs", [])],
    }


def plot(results: dict[str, Any], out: Path, history: dict[str, Any] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drains = [r for r in results.get("runs", []) if r.get("scenario") == "drain"]
    pickups = []
    for r in results.get("runs", []):
        if r.get("scenario") == "latency" and r.get("delays_ms"):
            pickups.append({**r, "p50": percentile(r["delays_ms"], 50)})
            p99 = percentile(r["delays_ms"], 99)
            pickups.append({**r, "p50": p99, "system": f"{r['system']} p99"})
    if not drains and not pickups:
        raise ValueError("no drain or latency runs in these results")
    if history:
        fig, grid = plt.subplots(2, 2, figsize=(14, 9))
        axes = list(grid.flat)
    else:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    draw(
        axes[0],
        series(drains, "workers", ("system", "backlog"), "rate"),
        lambda k: f"{NAMES.get(k[0], k[0])}, {k[1]:,} jobs",
    )
    axes[0].set(title="Drain vs worker processes", xlabel="worker processes", ylabel="jobs/s")
    draw(
        axes[1],
        series(drains, "backlog", ("system", "workers"), "rate"),
        lambda k: f"{NAMES.get(k[0], k[0])}, {k[1]} worker{'s' if k[1] > 1 else ''}",
        log_x=True,
    )
    axes[1].set(title="Drain vs backlog", xlabel="ready jobs at release", ylabel="jobs/s")
    draw(
        axes[2],
        series(pickups, "workers", ("system",), "p50"),
        lambda k: k[0] if k[0].endswith("p99") else f"{k[0]} p50",
    )
    axes[2].set(title="Pickup latency vs worker processes", xlabel="worker processes", ylabel="ms")
    if history:
        draw_history(axes[3], history)
    machine = results.get("machine", {})
    fig.suptitle(
        f"{results.get('date', '')} · {machine.get('cores', '?')} cores · PostgreSQL "
        f"{machine.get('postgresql', '?')} · {results.get('mode', '?')} run · median, bars min–max",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/plot.py", description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--history", type=Path, help="benchmarks/history.py's results JSON")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        results = pooled([json.loads(p.read_text()) for p in args.results])
        history = json.loads(args.history.read_text()) if args.history else None
        plot(results, args.out, history)
    except ImportError:
        print(
            "bench-plot: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr
        )
        return 1
    except (OSError, ValueError, KeyError) as exc:
        print(f"bench-plot: {' '.join(map(str, args.results))}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: written from {' '.join(map(str, args.results))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
