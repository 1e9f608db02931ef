"""Run the jobtui benchmarks and print figures against the targets of issues 5, 11 and 14.

    python benchmarks/run.py [--quick] [--only NAME[,NAME]] [--skip NAME[,NAME]] [--runs N]
                             [--no-peers | --peers NAME[,NAME]] [--allow-missing-peers]
                             [--minutes M] [--explain] [--heap]
                             [--concurrency jobtui=N,pgqueuer=N,procrastinate=N]
                             [--workers 1,2,4] [--backlog 20000,200000] [--results FILE]

The server is JOBTUI_BENCH_DSN when set, otherwise an embedded PostgreSQL in a temporary
directory. Every scenario makes its own database and drops it. Figures print as they come and
once more as a Markdown table at the end; every run's raw figures, the machine and each
system's settings go to the results JSON, from which `benchmarks/table.py` writes the docs'
table. Any failure (an API that moved, a worker that died, a peer that is not installed unless
--allow-missing-peers) is printed with its cause and makes the exit status non-zero.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Bench, Figure, ScenarioSkipped, describe_machine, machine_info

DEFAULT_RESULTS = Path(__file__).resolve().parent / "results.json"


def _scenarios() -> dict[str, Callable[[Bench], list[Figure]]]:
    from benchmarks import (
        chaos_drain,
        console_bytes,
        console_memory,
        console_tmux,
        drain,
        enqueue,
        queries,
    )
    from benchmarks import requeue as requeue_mod

    return {
        "enqueue": enqueue.run,
        "drain": drain.run_drain,
        "latency": drain.run_latency,
        "metrics": queries.run_metrics,
        "queries": queries.run_queries,
        "requeue": requeue_mod.run,
        "console_bytes": console_bytes.run,
        "console_tmux": console_tmux.run,
        "chaos": chaos_drain.run,
        # Long-running: last, and skippable with --only/--skip.
        "console_memory": console_memory.run,
    }


def parse_args(argv: list[str] | None, names: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description="jobtui benchmarks (issue 5 targets)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", help=f"comma-separated scenarios: {', '.join(names)}")
    parser.add_argument("--skip", help="comma-separated scenarios to leave out")
    parser.add_argument("--runs", type=int, help="runs per scenario (default: per scenario)")
    parser.add_argument("--no-peers", action="store_true", help="skip PgQueuer/procrastinate")
    parser.add_argument(
        "--peers",
        metavar="NAME[,NAME]",
        help="only these peers beside jobtui: pgqueuer, procrastinate (default both; the matrix"
        " runs pgqueuer)",
    )
    parser.add_argument(
        "--allow-missing-peers",
        action="store_true",
        help="a peer whose package is not installed is noted, not a failure",
    )
    parser.add_argument(
        "--workers",
        metavar="N[,N]",
        help="drain and latency at these numbers of worker processes (default 2; matrix: 1,2,4)",
    )
    parser.add_argument(
        "--backlog",
        metavar="N[,N]",
        help="drain backlogs of ready jobs (default 20000, --quick 2000; matrix: "
        "20000,200000,2000000)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=DEFAULT_RESULTS,
        help="results JSON to write (default benchmarks/results.json)",
    )
    parser.add_argument(
        "--minutes", type=float, help="console_memory duration (default 10, --quick 0.5)"
    )
    parser.add_argument(
        "--concurrency",
        metavar="SYS=N[,SYS=N]",
        help="worker concurrency per system (default jobtui=200,pgqueuer=100,procrastinate=200;"
        " PgQueuer's is its batch size)",
    )
    parser.add_argument(
        "--tab-every",
        type=float,
        metavar="S",
        help="console_memory: press the next tab key every S seconds (default 5; 0: never)",
    )
    parser.add_argument(
        "--heap", action="store_true", help="console_memory: also trace where the heap grows"
    )
    parser.add_argument(
        "--explain", action="store_true", help="EXPLAIN ANALYZE the slowest read statement"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="kept for old commands: tracebacks always print"
    )
    args = parser.parse_args(argv)
    for flag in ("only", "skip"):
        value = getattr(args, flag)
        chosen = [s.strip() for s in value.split(",") if s.strip()] if value else []
        unknown = [s for s in chosen if s not in names]
        if unknown:
            parser.error(
                f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(names)}"
            )
        setattr(args, flag, chosen)
    for flag in ("workers", "backlog"):
        value = getattr(args, flag)
        try:
            numbers = [int(v) for v in value.split(",") if v.strip()] if value else []
        except ValueError:
            parser.error(f"--{flag}: expected comma-separated whole numbers, got {value!r}")
        if any(v < 1 for v in numbers):
            parser.error(f"--{flag}: every number must be at least 1")
        setattr(args, flag, numbers)
    if args.no_peers and args.allow_missing_peers:
        parser.error("--no-peers and --allow-missing-peers: choose one")
    args.peers = parse_peers(parser, args.peers)
    if args.no_peers and args.peers:
        parser.error("--no-peers and --peers: choose one")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.tab_every is not None and args.tab_every < 0:
        parser.error("--tab-every must be 0 or more")
    if args.minutes is not None and args.minutes <= 0:
        parser.error("--minutes must be more than 0")
    if args.concurrency:
        from benchmarks.systems import set_concurrency

        try:
            set_concurrency(args.concurrency)
        except ValueError as exc:
            parser.error(str(exc))
    return args


def parse_peers(parser: argparse.ArgumentParser, value: str | None) -> list[str]:
    """`--peers pgqueuer,procrastinate` as a list of known peer names."""
    from benchmarks.systems import PEER_NAMES

    names = [v.strip() for v in value.split(",") if v.strip()] if value else []
    unknown = [n for n in names if n not in PEER_NAMES]
    if unknown:
        parser.error(f"--peers: unknown {', '.join(unknown)}; choose from {', '.join(PEER_NAMES)}")
    return names


def start_server(tmp: Path) -> tuple[str, str, object | None]:
    external = os.environ.get("JOBTUI_BENCH_DSN")
    if external:
        return external, "JOBTUI_BENCH_DSN", None
    from jobtui.embedded import EmbeddedUnavailable, start_embedded

    try:
        server = start_embedded(tmp / "pg")
    except EmbeddedUnavailable as exc:
        sys.exit(f"benchmarks: {exc}; or set JOBTUI_BENCH_DSN")
    return server.dsn, "embedded", server


def main(argv: list[str] | None = None) -> int:
    scenarios = _scenarios()
    args = parse_args(argv, list(scenarios))
    chosen = args.only or list(scenarios)
    chosen = [s for s in chosen if s not in args.skip]
    bench = Bench(
        admin_dsn="",
        quick=args.quick,
        runs=args.runs,
        origin="",
        peers=not args.no_peers,
        peer_names=args.peers,
        allow_missing_peers=args.allow_missing_peers,
        workers=args.workers,
        backlogs=args.backlog,
    )
    if args.explain:
        os.environ["JOBTUI_BENCH_EXPLAIN"] = "1"
    if args.heap:
        os.environ["JOBTUI_BENCH_HEAP"] = "1"
    if args.tab_every is not None:
        os.environ["JOBTUI_BENCH_TAB_EVERY"] = str(args.tab_every)
    if args.minutes is not None:
        os.environ["JOBTUI_BENCH_MINUTES"] = str(args.minutes)
    dsn, origin, server = start_server(bench.tmp)
    bench.admin_dsn, bench.origin = dsn, origin
    figures: list[Figure] = []
    # The machine may be shared: the load average goes with the figures.
    load = {"before": [round(x, 2) for x in os.getloadavg()]}
    started = time.monotonic()
    began = datetime.datetime.now(datetime.UTC)
    command = "python benchmarks/run.py " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        machine = machine_info(bench)
        print(describe_machine(machine), flush=True)
        print(
            f"mode: {'quick' if args.quick else 'full'}; scenarios: {', '.join(chosen)}", flush=True
        )
        for name in chosen:
            print(f"\n== {name} ==", flush=True)
            t0 = time.monotonic()
            try:
                got = scenarios[name](bench)
            except ScenarioSkipped as exc:
                # A scenario that cannot run here is a failure of the run, never a quiet skip.
                bench.fail(f"{name}: {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - report, go on with the rest, exit non-zero
                # An API that moved (ImportError, AttributeError, TypeError) lands here too:
                # the traceback says where.
                traceback.print_exc()
                bench.fail(f"{name}: {type(exc).__name__}: {exc}")
                continue
            for figure in got:
                print(figure.line(), flush=True)
            print(f"  ({time.monotonic() - t0:.0f}s)", flush=True)
            figures.extend(got)
        seconds = time.monotonic() - started
        load["after"] = [round(x, 2) for x in os.getloadavg()]
        print(f"load average (1, 5, 15 min): before {load['before']}, after {load['after']}")
        print_table(bench, machine, command, figures, seconds)
        write_results(
            args.results,
            {
                "date": began.isoformat(timespec="seconds"),
                "command": command.strip(),
                "mode": "quick" if args.quick else "full",
                "seconds": round(seconds, 1),
                "scenarios": chosen,
                "machine": machine,
                "load": load,
                "settings": bench.settings,
                "figures": [f.to_dict() for f in figures],
                "runs": bench.records,
                "failures": bench.failures,
            },
        )
    finally:
        bench.cleanup()
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
        shutil.rmtree(bench.tmp, ignore_errors=True)
    if bench.failures:
        print(f"\n{len(bench.failures)} failure(s):", file=sys.stderr)
        for failure in bench.failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    return 0


# Entries other scripts record into the same file (`write_cost.py --record`,
# `floor_targets.py --record`): a run of the scenarios keeps them, so `make bench` never drops
# a table the docs render from them.
KEPT_ENTRIES = ("write_cost", "floor_targets")


def write_results(path: Path, results: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        earlier = {}
    if isinstance(earlier, dict):
        for key in KEPT_ENTRIES:
            if key in earlier and key not in results:
                results[key] = earlier[key]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str) + "\n")
    tmp.replace(path)
    print(f"\nresults: {path} (make bench-table writes the docs' table from it)", flush=True)


def print_table(
    bench: Bench, machine: dict[str, object], command: str, figures: list[Figure], seconds: float
) -> None:
    print("\n## Results\n")
    print(describe_machine(machine) + f"; {'quick' if bench.quick else 'full'} run, {seconds:.0f}s")
    for name, settings in bench.settings.items():
        print(f"settings {name}: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print(f"command: {command}".rstrip() + "\n")
    print("| scenario | figure | median [min–max] | target | met |")
    print("|---|---|---|---|---|")
    for f in figures:
        print(f"| {f.scenario} | {f.label} | {f.summary()} | {f.target} | {f.verdict()} |")
    for failure in bench.failures:
        print(f"\n- FAILED: {failure}")


if __name__ == "__main__":
    sys.exit(main())
