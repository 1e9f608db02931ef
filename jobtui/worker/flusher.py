"""Writes ended attempts and statistics: the flusher owns buffered outcomes and figures.

Promises kept: every outcome is written at most once for the attempt it ends (each statement
re-checks `locked_by = me AND attempts = claimed`), and one bad row never holds up the others.
Each group (done, retry, bury, cancelled, released) is written on its own; an error a retry
cannot cure (a constraint, a missing privilege) splits the group in halves down to the
offending row, which is logged with the real error, counted in the worker's `workers` row
(`outcome_errors`, `last_outcome_error`) and set aside, locked by this worker, never retried in
a loop: when the worker stops, it is rescued like any job of a lost worker. Errors a retry can
cure (connection lost, timeouts) put the outcome back and the write is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg

from jobtui.db import describe_error
from jobtui.worker.link import Link, is_transient
from jobtui.worker.outcomes import Outcomes, short_ids
from jobtui.worker.statements import WorkerDB
from jobtui.worker.stats import StatsBuffer

log = logging.getLogger("jobtui.worker")

GROUPS = ("done", "retry", "bury", "cancelled", "released")


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

    def wake(self) -> None:
        self._wake.set()

    def pending_ids(self) -> list[int]:
        """Ids whose outcome is buffered, being written, or set aside: still ours."""
        return self.outcomes.ids() + self._in_flight + list(self.stuck)

    async def run(self) -> None:
        """Write whatever is buffered as soon as the previous write returns, until closing."""
        next_stats = time.monotonic() + self.stats_every
        while not self.closing.is_set():
            if not self.outcomes:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, next_stats - time.monotonic())):
                        await self._wake.wait()
                if self.closing.is_set():
                    return
            try:
                if self.outcomes:
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

    async def write_outcomes(self) -> None:
        """Write everything buffered so far, group by group; on an error a retry can cure,
        what was not written goes back to the buffer and the error is raised."""
        batch = self.outcomes.take()
        queue: list[tuple[str, list[Any]]] = [
            (g, getattr(batch, g)) for g in GROUPS if getattr(batch, g)
        ]
        self._in_flight = batch.ids()
        try:
            while queue:
                group, items = queue.pop(0)
                try:
                    rows = await self.db.write_group(self.link, group, items)
                except Exception as exc:
                    if isinstance(exc, psycopg.Error) and is_transient(exc):
                        for g, its in [(group, items), *queue]:
                            getattr(self.outcomes, g)[:0] = its
                        raise
                    if len(items) == 1:
                        self._set_aside(group, items[0], exc)
                    else:  # find the offending row: halves, each written on its own
                        mid = len(items) // 2
                        queue[0:0] = [(group, items[:mid]), (group, items[mid:])]
                    continue
                self._written(group, items, rows)
        finally:
            self._in_flight = []

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
