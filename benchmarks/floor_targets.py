"""Issue 24's targets against their floors on the article's table, in one run.

    python -m benchmarks.floor_targets                     # 3 rounds, print the table
    python -m benchmarks.floor_targets --rounds 3 --record benchmarks/results.json

Each floor is measured on the article's own plain table (benchmarks/article.py), in a database
of its own, in the same run as jobtui's figure, never on jobtui's schema:

- pickup p50 ≤ 1.2× and p99 ≤ 1.5× a bare LISTEN consumer on the article's table: the
  `jobtui` and `article` systems of `benchmarks.pickup_breakdown` (enqueue call start →
  handler start), each round's p50 and p99 of every job timed in it;
- single enqueue ≤ 1.1× the article's INSERT + NOTIFY, and enqueue_many of 20,000 jobs ≤ 1.3×
  a bare COPY into the article's table: `benchmarks.enqueue` (what `benchmarks/run.py --only
  enqueue` runs);
- drain ≥ 0.9× `benchmarks.floor`'s bare loop on the article's table, and ≥ 2.5× PgQueuer
  (asyncpg, batch 100): 20,000 no-op jobs, 2 worker processes, rounds whose order rotates over
  the bare loop, jobtui's worker and PgQueuer's (as `benchmarks/run.py --only drain` runs them).

The ratio of each round is jobtui's figure over the floor's in that round; the cells give
median [min–max] (rounds), and a target is met when the median ratio is within it. With
`--record FILE` the run goes under the "floor_targets" key of that results JSON (the rest of
the file as it was; `make bench` keeps it) and `make bench-table` writes its table between
`<!-- floors:start -->` and `<!-- floors:end -->` in docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks import floor, pickup_breakdown  # noqa: E402
from benchmarks.common import Bench, machine_info, record_entry  # noqa: E402
from benchmarks.drain import drain_once  # noqa: E402
from benchmarks.enqueue import run as run_enqueue  # noqa: E402
from benchmarks.systems import runnable  # noqa: E402

KEY = "floor_targets"  # the results' key --record writes and benchmarks/table.py renders
ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"
BARE_LOOP = "bare loop"  # floor.py's consumer on the article's table, in the drain's rounds


def target(
    name: str,
    floor_label: str,
    unit: str,
    digits: int,
    floors: list[float],
    ours: list[float],
    sign: str,
    limit: float,
) -> dict[str, Any]:
    """One target: the floor's and jobtui's figures by round, each round's ratio, the verdict."""
    ratios = [a / b for a, b in zip(ours, floors, strict=True)]
    median = statistics.median(ratios)
    return {
        "target": name,
        "floor": floor_label,
        "unit": unit,
        "digits": digits,
        "floor_values": [round(v, 4) for v in floors],
        "jobtui_values": [round(v, 4) for v in ours],
        "ratios": [round(v, 4) for v in ratios],
        "limit": f"{sign} {limit:g}×",
        "met": median <= limit if sign == "≤" else median >= limit,
    }


def pickup(dsn: str, rounds: int) -> list[dict[str, Any]]:
    args = pickup_breakdown.parse(["--systems", "jobtui,article", "--rounds", str(rounds)])
    args.dsn = dsn
    _, per_round = pickup_breakdown.measure(args)
    ours, floors = per_round["jobtui"], per_round["article"]
    floor_label = "bare LISTEN consumer on the article's table (`benchmarks.pickup_breakdown`)"
    return [
        target(
            f"pickup p{p}",
            floor_label,
            "ms",
            2,
            [r[i] for r in floors],
            [r[i] for r in ours],
            "≤",
            limit,
        )
        for p, i, limit in ((50, 0, 1.2), (99, 2, 1.5))
    ]


def enqueue(bench: Bench) -> list[dict[str, Any]]:
    figures = {fig.label: fig for fig in run_enqueue(bench)}

    def values(start: str) -> list[float]:
        found = [fig for label, fig in figures.items() if label.startswith(start)]
        assert len(found) == 1, f"benchmarks.enqueue: no single figure {start!r}"
        return list(found[0].values)

    return [
        target(
            "single enqueue",
            "INSERT + NOTIFY into the article's table, one job a statement",
            "µs/job",
            0,
            values("article's table: INSERT + NOTIFY"),
            values("enqueue 20000 single calls"),
            "≤",
            1.1,
        ),
        target(
            "enqueue_many 20,000 jobs",
            "bare COPY of 20,000 rows into the article's table",
            "s",
            3,
            values("article's table: COPY"),
            values("enqueue_many 20000 jobs"),
            "≤",
            1.3,
        ),
    ]


def drain(bench: Bench, rounds: int, jobs: int, workers: int) -> list[dict[str, Any]]:
    found = {s.name: s for s in runnable(bench) if s.name in ("jobtui", "pgqueuer")}
    template = bench.template("floor_article", lambda dsn: floor.setup(floor.ARTICLE, dsn))
    loop = argparse.Namespace(jobs=jobs, workers=workers, batch=100)
    runs: dict[str, Callable[[], float]] = {
        BARE_LOOP: lambda: float(floor.one_drain(bench, template, floor.ARTICLE, loop)["rate"]),
        **{name: _drain_of(bench, s, jobs, workers) for name, s in found.items()},
    }
    rates: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        print(f"  drain round {r + 1}: {', '.join(order)}", flush=True)
        for name in order:
            rates[name].append(runs[name]())
            print(f"    {name}: {rates[name][-1]:,.0f} jobs/s", flush=True)
    label = f"{jobs:,} no-op jobs, {workers} worker processes"
    out = [
        target(
            "drain",
            f"`benchmarks.floor`'s bare loop on the article's table (batch 100), {label}",
            "jobs/s",
            0,
            rates[BARE_LOOP],
            rates["jobtui"],
            "≥",
            0.9,
        )
    ]
    if "pgqueuer" in rates:
        out.append(
            target(
                "drain against PgQueuer",
                f"PgQueuer (asyncpg, batch 100), {label}",
                "jobs/s",
                0,
                rates["pgqueuer"],
                rates["jobtui"],
                "≥",
                2.5,
            )
        )
    return out


def _drain_of(bench: Bench, system: Any, jobs: int, workers: int) -> Callable[[], float]:
    return lambda: float(drain_once(bench, system, jobs, workers)["rate"])


def entry(
    targets: list[dict[str, Any]],
    command: str,
    rounds: int,
    load: dict[str, list[float]],
    machine: dict[str, Any],
) -> dict[str, Any]:
    from datetime import UTC, datetime

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "rounds": rounds,
        "load": load,
        "machine": {k: machine.get(k, "?") for k in ("cores", "cpu_model", "postgresql")},
        "targets": targets,
    }


def record(path: Path, run: dict[str, Any]) -> None:
    """`run` under the results JSON's floor_targets key, the rest of the file as it was."""
    record_entry(path, KEY, run)
    print(f"recorded the targets against their floors in {path} (make bench-table: the docs)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.floor_targets", description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=20000, help="jobs per drain")
    ap.add_argument("--workers", type=int, default=2, help="worker processes per drain")
    ap.add_argument("--dsn", default=os.environ.get("JOBTUI_BENCH_DSN", ADMIN_DSN))
    ap.add_argument("--record", type=Path, metavar="FILE", help="keep the run in this JSON")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.jobs < 1 or args.workers < 1:
        ap.error("--rounds, --jobs and --workers must be at least 1")
    if args.record is not None:
        try:  # fail before the run, not after it
            json.loads(args.record.read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--record: cannot read {args.record}: {exc}")
    load = {"before": [round(x, 2) for x in os.getloadavg()]}
    print(f"load average before: {load['before']}", flush=True)
    bench = Bench(args.dsn, quick=False, runs=args.rounds, origin="JOBTUI_BENCH_DSN")
    machine = machine_info(bench)
    try:
        targets = pickup(args.dsn, args.rounds)
        targets += enqueue(bench)
        targets += drain(bench, args.rounds, args.jobs, args.workers)
    finally:
        bench.cleanup()
    load["after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average after: {load['after']}")
    words = sys.argv[1:] if argv is None else argv
    command = "python -m benchmarks.floor_targets " + " ".join(shlex.quote(a) for a in words)
    run = entry(targets, command, args.rounds, load, machine)
    if args.record is not None:
        record(args.record, run)
    from benchmarks.table import render_floor_targets

    print(render_floor_targets(run))
    return 0 if not bench.failures else 1


if __name__ == "__main__":
    sys.exit(main())
