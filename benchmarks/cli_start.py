"""Issue 24 (CLI start): how long `jobtui --version` takes, beside `python -c pass`.

Median of `--runs` (default 10) whole processes each, and their ratio (target: at most 3x).
With `--dsn`, `jobtui stats --json` against that database too. The interpreter is this one,
so `PYTHONPATH=/path/to/older/checkout` measures an older version ("before").

    .venv/bin/python benchmarks/cli_start.py
    .venv/bin/python benchmarks/cli_start.py --dsn postgresql://root@127.0.0.1:5432/bigdata
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path


def median_ms(cmd: list[str], runs: int) -> float:
    """Median wall time of `runs` runs of `cmd` (one warm-up run first), in ms."""
    subprocess.run(cmd, check=True, capture_output=True, cwd="/")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd="/")
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--dsn", help="also time `jobtui stats --json` on this database")
    args = ap.parse_args()
    where = subprocess.run(
        [sys.executable, "-c", "import jobtui; print(jobtui.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout.strip()
    # Bytecode as an installed package has it (pip compiles it at install): with
    # PYTHONDONTWRITEBYTECODE set (as in some shells and CI) an editable checkout would compile
    # every jobtui module it imports in every run, about 100 ms here.
    compileall.compile_dir(str(Path(where).parent), quiet=1)
    print(f"jobtui from {where}; median of {args.runs} runs (a shared machine: noisy)")
    bare = median_ms([sys.executable, "-c", "pass"], args.runs)
    version = median_ms([sys.executable, "-m", "jobtui", "--version"], args.runs)
    print(f"python -c pass          {bare:7.1f} ms")
    print(f"jobtui --version        {version:7.1f} ms   {version / bare:.2f}x (target <= 3x)")
    if args.dsn:
        stats = median_ms(
            [sys.executable, "-m", "jobtui", "stats", "--json", "--dsn", args.dsn], args.runs
        )
        print(f"jobtui stats --json     {stats:7.1f} ms")


if __name__ == "__main__":
    main()
