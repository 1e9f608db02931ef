"""Writes ended attempts and statistics: the flusher owns buffered outcomes and figures.

Promises kept: every outcome is written at most once for the attempt it ends (each statement
re-checks `locked_by = me AND attempts = claimed`), and one bad row never holds up the others.
Each group (done, retry, bury, cancelled, released) is written on its own; an error a retry
cannot cure (a constraint, a missing privilege) splits the group in halves down to the
offending row, which is logged with the real error, counted in the worker's `workers` row
(`outcome_errors`, `last_outcome_error`) and set aside, locked by this worker, never retried in
a loop: when the worker stops, it is rescued like any job of a lost worker. Errors a retry can
cure put the outcome back and the write is tried again: after a lost connection, everything;
after a row lock held by another session (a write waits at most FLUSH_LOCK_TIMEOUT_S), only
the row that is held, found the same way, while the others are written at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from jobtui.db import describe_error
from jobtui.worker.link import Link, is_transient
from jobtui.worker.outcomes import Outcomes, short_ids
from jobtui.worker.statements import WorkerDB
from jobtui.worker.stats import StatsBuffer

log = logging.getLogger("jobtui.worker")

GROUPS = ("done", "retry", "bury", "cancelled", "released")
# A write that waited too long for a row lock (another session's open transaction holds the
# row) or ran too long: the rows are fine, so the offending one is found and waits; the others
# are written at once.
BLOCKED = {"55P03", "57014"}
# How long an outcome write waits for a row lock before its batch is split around that row.
FLUSH_LOCK_TIMEOUT_S = 2.0


class Flusher:
    """Group commit of outcomes, and the per-minute statistics, on one connection."""

    def __init__(self, worker_id: str, db: WorkerDB, link: Link, stats_every: float) -> None:
        self.worker_id = worker_id
        self.db = db
        self.link = link
        self.stats_every = stats_every
        self.outcomes = Outcomes()
        self.stats = StatsBuffer()
        self.stuck: dict[int, int] = {}  # id -> attempt whose outcome could not be written
        self.outcome_errors = 0
        self.last_outcome_error: str | None = None
        self.cancelled = 0  # outcomes the database turned into cancelled (a cancel won)
        self.closing = asyncio.Event()
        self._wake = asyncio.Event()
        self._in_flight: list[int] = []
        # Outcomes whose row another session holds: (group, item), tried again, one by one,
        # no sooner than `_held_back_at`, so the rest never waits for them.
        self._held_back: list[tuple[str, Any]] = []
        self._held_back_at = 0.0
        self.on_written: Callable[[], None] = lambda: None  # after each write of outcomes

    def wake(self) -> None:
        self._wake.set()

    def pending_ids(self) -> list[int]:
        """Ids whose outcome is buffered, being written, or set aside: still ours."""
        held_back = [item[0] for _, item in self._held_back]
        return self.outcomes.ids() + self._in_flight + held_back + list(self.stuck)

    def has_pending(self, *, now: float | None = None) -> bool:
        """Anything to write (held-back rows count once their retry time has come)."""
        if self.outcomes:
            return True
        return bool(self._held_back) and (now is None or now >= self._held_back_at)

    async def run(self) -> None:
        """Write whatever is buffered as soon as the previous write returns, until closing."""
        next_stats = time.monotonic() + self.stats_every
        while not self.closing.is_set():
            if not self.has_pending(now=time.monotonic()):
                self._wake.clear()
                until = next_stats
                if self._held_back:
                    until = min(until, self._held_back_at)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, until - time.monotonic())):
                        await self._wake.wait()
                if self.closing.is_set():
                    return
            try:
                if self.has_pending(now=time.monotonic()):
                    await self.write_outcomes()
                if time.monotonic() >= next_stats:
                    next_stats = time.monotonic() + self.stats_every
                    await self.write_stats()
            except psycopg.Error as exc:
                await self._sleep_unless_closing(self.link.failed(exc))
            except Exception:
                log.exception("worker=%s event=flush_error", self.worker_id)
                await self._sleep_unless_closing(1.0)

    async def _sleep_unless_closing(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.closing.wait()

    async def write_outcomes(self, *, held_back_too: bool = False) -> None:
        """Write everything buffered so far, group by group; on a lost connection, what was
        not written goes back to the buffer and the error is raised."""
        batch = self.outcomes.take()
        queue: list[tuple[str, list[Any]]] = [
            (g, getattr(batch, g)) for g in GROUPS if getattr(batch, g)
        ]
        if held_back_too or time.monotonic() >= self._held_back_at:
            queue += [(g, [item]) for g, item in self._held_back]  # last, one by one
            self._held_back = []
        self._in_flight = batch.ids() + [items[0][0] for _, items in queue if len(items) == 1]
        try:
            while queue:
                group, items = queue.pop(0)
                try:
                    rows = await self.db.write_group(self.link, group, items)
                except Exception as exc:
                    blocked = isinstance(exc, psycopg.Error) and exc.sqlstate in BLOCKED
                    if isinstance(exc, psycopg.Error) and is_transient(exc) and not blocked:
                        for g, its in [(group, items), *queue]:
                            getattr(self.outcomes, g)[:0] = its
                        raise
                    if len(items) > 1:  # find the offending row: halves, each on its own
                        mid = len(items) // 2
                        queue[0:0] = [(group, items[:mid]), (group, items[mid:])]
                    elif blocked:  # a row another session holds: it waits, the rest go on
                        self._hold_back(group, items[0], exc)
                    else:
                        self._set_aside(group, items[0], exc)
                    continue
                self._written(group, items, rows)
        finally:
            self._in_flight = []
        self.on_written()

    def _hold_back(self, group: str, item: tuple[Any, ...], exc: BaseException) -> None:
        self._held_back.append((group, item))
        self._held_back_at = time.monotonic() + FLUSH_LOCK_TIMEOUT_S
        log.warning(
            "worker=%s event=outcome_waits outcome=%s job=%d attempt=%d error=%s "
            "reason=its row is held by another session; the other outcomes are written",
            self.worker_id,
            group,
            item[0],
            item[1],
            describe_error(exc),
        )

    def _written(self, group: str, items: list[Any], rows: list[tuple[int, str]]) -> None:
        turned = [r[0] for r in rows if r[1] == "cancelled" and group != "cancelled"]
        if turned:
            self.cancelled += len(turned)
            log.info(
                "worker=%s event=cancel_won outcome=%s count=%d ids=%s",
                self.worker_id,
                group,
                len(turned),
                short_ids(turned),
            )
        if len(rows) == len(items):
            return
        got = {r[0] for r in rows}
        refused = [item[0] for item in items if item[0] not in got]
        log.warning(
            "worker=%s event=outcome_refused outcome=%s count=%d ids=%s "
            "reason=no longer held by this worker (rescued, deleted or already written)",
            self.worker_id,
            group,
            len(refused),
            short_ids(refused),
        )

    def _set_aside(self, group: str, item: tuple[Any, ...], exc: BaseException) -> None:
        job_id, attempt = item[0], item[1]
        error = describe_error(exc)
        self.stuck[job_id] = attempt
        self.outcome_errors += 1
        self.last_outcome_error = f"job {job_id} attempt {attempt} ({group}): {error}"[:2000]
        log.error(
            "worker=%s event=outcome_write_failed outcome=%s job=%d attempt=%d error=%s "
            "action=set aside; the job stays locked by this worker and is rescued after it stops",
            self.worker_id,
            group,
            job_id,
            attempt,
            error,
        )

    async def write_stats(self) -> None:
        if not self.stats:
            return
        cells = self.stats.take()
        try:
            await self.db.write_stats(self.link, cells)
        except Exception as exc:
            if isinstance(exc, psycopg.Error) and is_transient(exc):
                self.stats.put_back(cells)
                raise
            log.error(
                "worker=%s event=stats_write_failed cells=%d error=%s action=dropped",
                self.worker_id,
                len(cells),
                describe_error(exc),
            )
