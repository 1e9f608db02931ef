"""Per-minute, per-kind figures gathered in memory and written in one statement per flush.

Promises kept: figures land in the minute of the *server's* clock (the console reads them
against the server's now(), so a worker whose clock is minutes off still counts in the right
minute), and a flush writes its rows in one fixed order, (minute, kind), so two workers adding
to the same cells lock them in the same order and never deadlock.

Counting in memory keeps stat writes off the hot path: a flush adds every (minute, kind) cell
seen since the last one with `ON CONFLICT … DO UPDATE`, so several workers add up correctly.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobtui.stats import BUCKETS_MS, N_BUCKETS


@dataclass
class Cell:
    """The figures of one kind in one minute."""

    done: int = 0
    failed: int = 0
    dead: int = 0
    runtime_sum_ms: float = 0.0
    hist: list[int] = field(default_factory=lambda: [0] * N_BUCKETS)


class StatsBuffer:
    """Counts since the last flush, keyed by (minute as epoch seconds, kind)."""

    def __init__(self) -> None:
        self._cells: dict[tuple[int, str], Cell] = {}
        self._offset = 0.0  # server clock minus this machine's, from the last heartbeat

    def set_server_time(self, server_epoch: float, local_before: float, local_after: float) -> None:
        """Note the server's clock (`now()` as epoch seconds) read between two local readings."""
        self._offset = server_epoch - (local_before + local_after) / 2.0

    def _cell(self, kind: str) -> Cell:
        key = (int((time.time() + self._offset) // 60) * 60, kind)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = Cell()
        return cell

    def done(self, kind: str, runtime_ms: float) -> None:
        cell = self._cell(kind)
        cell.done += 1
        cell.runtime_sum_ms += runtime_ms
        # The first bucket whose bound is >= the run time, as jobtui.stats.bucket_index.
        cell.hist[bisect_left(BUCKETS_MS, runtime_ms)] += 1

    def failed(self, kind: str) -> None:
        self._cell(kind).failed += 1

    def dead(self, kind: str, n: int = 1) -> None:
        self._cell(kind).dead += n

    def __bool__(self) -> bool:
        return bool(self._cells)

    def take(self) -> dict[tuple[int, str], Cell]:
        """Everything counted so far; the buffer starts empty again."""
        cells, self._cells = self._cells, {}
        return cells

    def put_back(self, cells: dict[tuple[int, str], Cell]) -> None:
        """Return cells whose flush failed, adding them to what was counted meanwhile."""
        for key, old in cells.items():
            cell = self._cells.get(key)
            if cell is None:
                self._cells[key] = old
                continue
            cell.done += old.done
            cell.failed += old.failed
            cell.dead += old.dead
            cell.runtime_sum_ms += old.runtime_sum_ms
            cell.hist = [a + b for a, b in zip(cell.hist, old.hist, strict=True)]


def as_rows(cells: dict[tuple[int, str], Cell]) -> list[dict[str, Any]]:
    """The JSON rows `worker_stats_flush` reads with jsonb_to_recordset, in (minute, kind)
    order: every worker upserts its cells in the same order, so two flushes never deadlock."""
    return [
        {
            "minute": datetime.fromtimestamp(minute, UTC).isoformat(),
            "kind": kind,
            "done": c.done,
            "failed": c.failed,
            "dead": c.dead,
            "runtime_sum_ms": c.runtime_sum_ms,
            "hist": c.hist,
        }
        for (minute, kind), c in sorted(cells.items())
    ]
