"""Where the console's memory grows: the app headless (`run_test`, 120×40) under tracemalloc.

`python -m benchmarks.console_heap DSN SECONDS` — the live refresh runs and the tabs are pressed
1–4 in turn every 5 s, as in console_memory; a tracemalloc snapshot is taken after a third of
the time and another at the end, and the biggest growths by source line are printed. Run by
`run.py --heap` after console_memory; slower than the real console (tracemalloc), so its
figures are for finding a leak, not for the table.
"""

from __future__ import annotations

import asyncio
import sys
import time
import tracemalloc

TOP = 15


async def main(dsn: str, seconds: float) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    tracemalloc.start(12)
    app = JobtuiApp(dsn, "public", config=ConsoleConfig(refresh_s=2.0))
    report: list[str] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(3.0)  # mounted and first refresh done
            t0 = time.monotonic()
            first: tracemalloc.Snapshot | None = None
            tab = 0
            while (elapsed := time.monotonic() - t0) < seconds:
                await pilot.pause(5.0)
                tab = (tab + 1) % 4
                await pilot.press(str(tab + 1))
                if first is None and elapsed >= seconds / 3:
                    first = tracemalloc.take_snapshot()
            if first is not None:
                report = growth(first, tracemalloc.take_snapshot())
    except Exception as exc:  # noqa: BLE001 - a diagnostic: say what failed in one line
        report.append(f"console stopped: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    print("\n".join(report) or "no snapshot taken")


def growth(first: tracemalloc.Snapshot, last: tracemalloc.Snapshot) -> list[str]:
    """The source lines whose live allocations grew most between the two snapshots."""
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = last.filter_traces(keep).compare_to(first.filter_traces(keep), "lineno")
    total = sum(s.size_diff for s in stats)
    stats.sort(key=lambda s: s.size_diff, reverse=True)
    lines = [f"traced growth over the last two thirds: {total / 1024:+.0f} KiB; biggest:"]
    for stat in stats[:TOP]:
        frame = stat.traceback[0]
        lines.append(
            f"  {stat.size_diff / 1024:+8.0f} KiB {stat.count_diff:+7d} blocks  "
            f"{frame.filename}:{frame.lineno}"
        )
    return lines


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
