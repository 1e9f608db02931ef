"""Run the jobtui benchmarks and print figures against the targets of issue 5.

    python benchmarks/run.py [--quick] [--only NAME[,NAME]] [--skip NAME[,NAME]] [--runs N]
                             [--no-peers] [--minutes M] [--explain] [--heap]
                             [--concurrency jobtui=N,pgqueuer=N,procrastinate=N]

The server is JOBTUI_BENCH_DSN when set, otherwise an embedded PostgreSQL in a temporary
directory. Every scenario makes its own database and drops it. Figures print as they come and
once more as a Markdown table at the end (for the README).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Bench, Figure, ScenarioSkipped, machine_line


def _scenarios() -> dict[str, Callable[[Bench], list[Figure]]]:
    from benchmarks import chaos_drain, console_bytes, console_memory, drain, enqueue, queries
    from benchmarks import requeue as requeue_mod

    return {
        "enqueue": enqueue.run,
        "drain": drain.run_drain,
        "latency": drain.run_latency,
        "metrics": queries.run_metrics,
        "queries": queries.run_queries,
        "requeue": requeue_mod.run,
        "console_bytes": console_bytes.run,
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
        "--minutes", type=float, help="console_memory duration (default 10, --quick 0.5)"
    )
    parser.add_argument(
        "--concurrency",
        metavar="SYS=N[,SYS=N]",
        help="worker concurrency per system (default jobtui=200,pgqueuer=100,procrastinate=20;"
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
    parser.add_argument("--verbose", action="store_true", help="tracebacks for failures")
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
        admin_dsn="", quick=args.quick, runs=args.runs, origin="", peers=not args.no_peers
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
    notes: list[str] = []
    started = time.monotonic()
    try:
        print(machine_line(bench), flush=True)
        print(
            f"mode: {'quick' if args.quick else 'full'}; scenarios: {', '.join(chosen)}", flush=True
        )
        for name in chosen:
            print(f"\n== {name} ==", flush=True)
            t0 = time.monotonic()
            try:
                got = scenarios[name](bench)
            except ScenarioSkipped as exc:
                notes.append(f"{name}: not run: {exc}")
                print(f"  not run: {exc}", flush=True)
                continue
            except (ImportError, AttributeError, TypeError) as exc:
                # The engine/console API this scenario drives is missing or has changed.
                notes.append(f"{name}: not run: {type(exc).__name__}: {exc}")
                print(f"  not run: {type(exc).__name__}: {exc}", flush=True)
                if args.verbose:
                    traceback.print_exc()
                continue
            except Exception as exc:  # noqa: BLE001 - one scenario must not stop the rest
                notes.append(f"{name}: failed: {type(exc).__name__}: {exc}")
                print(f"  failed: {type(exc).__name__}: {exc}", flush=True)
                if args.verbose:
                    traceback.print_exc()
                continue
            for figure in got:
                print(figure.line(), flush=True)
            print(f"  ({time.monotonic() - t0:.0f}s)", flush=True)
            figures.extend(got)
        print_table(bench, figures, notes, time.monotonic() - started)
    finally:
        bench.cleanup()
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
        shutil.rmtree(bench.tmp, ignore_errors=True)
    return 0


def print_table(bench: Bench, figures: list[Figure], notes: list[str], seconds: float) -> None:
    print("\n## Results\n")
    print(machine_line(bench) + f"; {'quick' if bench.quick else 'full'} run, {seconds:.0f}s")
    print(f"command: python benchmarks/run.py {' '.join(sys.argv[1:])}".rstrip() + "\n")
    print("| scenario | figure | median [min–max] | target | met |")
    print("|---|---|---|---|---|")
    for f in figures:
        print(f"| {f.scenario} | {f.label} | {f.summary()} | {f.target} | {f.verdict()} |")
    for note in notes:
        print(f"\n- {note}")


if __name__ == "__main__":
    sys.exit(main())
