"""Where the console's memory grows: the real console under tracemalloc.

`python -m benchmarks.console_heap FIRST_S LAST_S OUT -- JOBTUI_ARGS…` starts tracemalloc, runs
`jobtui.cli.main(JOBTUI_ARGS)` (the real console, in the caller's pty), and from a background
thread takes a snapshot FIRST_S seconds in and another LAST_S seconds in, then writes the source
lines whose live allocations grew most in between to OUT. Used by `run.py --heap`
(console_memory); tracemalloc makes the console slower and bigger, so the RSS of such a run is
not the figure for the table, only a pointer to what grows.
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from pathlib import Path

TOP = 15


def growth(first: tracemalloc.Snapshot, last: tracemalloc.Snapshot) -> list[str]:
    """The source lines whose live allocations grew most between the two snapshots."""
    keep = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    stats = last.filter_traces(keep).compare_to(first.filter_traces(keep), "lineno")
    total = sum(s.size_diff for s in stats)
    stats.sort(key=lambda s: s.size_diff, reverse=True)
    lines = [f"python heap growth between the snapshots: {total / 1024:+.0f} KiB; biggest:"]
    for stat in stats[:TOP]:
        frame = stat.traceback[0]
        lines.append(
            f"  {stat.size_diff / 1024:+8.0f} KiB {stat.count_diff:+7d} blocks  "
            f"{frame.filename}:{frame.lineno}"
        )
    return lines


def watch(first_s: float, last_s: float, out: Path) -> None:
    t0 = time.monotonic()
    time.sleep(first_s)
    first = tracemalloc.take_snapshot()
    time.sleep(max(0.0, last_s - (time.monotonic() - t0)))
    out.write_text("\n".join(growth(first, tracemalloc.take_snapshot())) + "\n")


def main() -> int:
    first_s, last_s, out = float(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
    argv = sys.argv[sys.argv.index("--") + 1 :]
    tracemalloc.start(1)
    threading.Thread(target=watch, args=(first_s, last_s, out), daemon=True).start()
    from jobtui.cli import main as jobtui_main

    return jobtui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
