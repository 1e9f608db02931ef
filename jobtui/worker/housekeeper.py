"""Rescue, sweeps, pruning, ANALYZE, VACUUM and queue samples: the housekeeper's chores.

Promise kept: no chore can hold up anything else, and none waits for a lock. The housekeeper
has its own connection whose every statement runs under `lock_timeout` and `statement_timeout`
(settings `housekeeping_lock_timeout`, `housekeeping_timeout`); a chore blocked by a lock (an
ANALYZE behind a VACUUM or CREATE INDEX CONCURRENTLY, say) is cancelled by PostgreSQL, skipped,
logged, and tried again on its next turn. The heartbeat lives elsewhere (liveness.py).

Every second, when the app declares schedules: enqueue their due ticks (by the database's
clock). Every heartbeat interval: rescue jobs of lost workers (judged by their owners' own timeouts)
and write the minute's queue sample; when a claim was slow: ANALYZE jobs (at most once a
minute); when autovacuum is off for `jobs` and the table holds more dead row versions than
autovacuum would have let it: VACUUM it, on a connection of its own so that the other chores
go on meanwhile (without it a drain's claims walk every claimed row's old index entries);
every prune interval: bury exhausted rows, end unlocked rows whose cancel was
requested, forget long-dead worker rows, prune finished jobs and old tick records.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

import psycopg

from jobtui.db import describe_error
from jobtui.schedules import enqueue_due_ticks, prune_ticks
from jobtui.worker.dispatcher import Dispatcher
from jobtui.worker.link import Link
from jobtui.worker.outcomes import short_ids
from jobtui.worker.settings import WorkerSettings
from jobtui.worker.statements import WorkerDB
from jobtui.worker.stats import StatsBuffer

log = logging.getLogger("jobtui.worker")

ANALYZE_AT_MOST_EVERY_S = 60.0
TICKS_EVERY_S = 1.0
# Tick records are kept this long (checked_until already stops old ticks coming back; the
# records let a person see what was enqueued).
TICK_RETENTION = timedelta(days=7)
NEVER = float("inf")
SUMMARY_EVERY_S = 10.0
# The count deltas are folded at least this often, whatever the heartbeat: since migration 0019
# the worker's own writes never fold in their triggers, so job_counts grows by a few rows per
# claim and completion batch until the next fold (~3,700 rows at 5 s and ~1,600 jobs/s; with
# `--heartbeat 30s` it was ~18,000 rows, each summed by every snapshot).
FOLD_AT_LEAST_EVERY_S = 5.0
# Below this many dead row versions a VACUUM of `jobs` gains nothing a claim would notice (a
# walk over a few dozen index pages); it also keeps small test tables from being vacuumed.
VACUUM_MIN_DEAD = 10_000
# Between two VACUUMs of `jobs` (by any worker: the table's last_vacuum), at least this many
# times the longest this worker has seen one take: the fleet vacuums at most about a fifth of
# the time however large the table (jobs' own scale factor, 0.02, would otherwise have a large
# table vacuumed back to back through a drain).
VACUUM_PAUSE_FACTOR = 4.0
# After a VACUUM of `jobs` that did not run (skipped because something held the table, or
# failed), at least this long before the next try: not a new connection and a log line every
# housekeeping turn while a CREATE INDEX CONCURRENTLY or a long ANALYZE holds it.
VACUUM_RETRY_AFTER_S = 30.0
# While its VACUUM of `jobs` runs, the housekeeper looks this often whether it holds up a lock
# that stops the queue (an ALTER TABLE waiting behind it), and cancels it if so, as PostgreSQL
# cancels autovacuum after deadlock_timeout (1 s by default).
VACUUM_YIELD_CHECK_S = 1.0


class Housekeeper:
    """The slow, skippable chores of one worker."""

    def __init__(
        self,
        db: WorkerDB,
        link: Link,
        settings: WorkerSettings,
        dispatcher: Dispatcher,
        stats: StatsBuffer,
        schedules: list[str] | None = None,
        vacuum_links: tuple[Link, Link] | None = None,
    ) -> None:
        self.db = db
        self.schedules = schedules or []  # names of the schedules this worker enqueues
        self.link = link
        self.settings = settings
        self.dispatcher = dispatcher
        self.stats = stats
        self.skipped = 0  # chores skipped because they were blocked or too slow
        self.rescued = 0
        self._analyze_wanted = False
        self._last_analyze = -ANALYZE_AT_MOST_EVERY_S
        self._wake = asyncio.Event()
        # The VACUUM's own connection and its watch's, both opened only while it runs.
        self.vacuum_links = vacuum_links
        self._vacuum: asyncio.Task[None] | None = None
        self._vacuum_longest = 0.0  # seconds, the longest VACUUM of jobs this worker ran
        self._vacuum_not_before = 0.0  # monotonic time; set when a VACUUM did not run

    def want_analyze(self) -> None:
        """A full claim was slow: the planner's statistics of `jobs` are probably stale."""
        self._analyze_wanted = True
        self._wake.set()

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if self._vacuum is not None:
                self._vacuum.cancel()
                await asyncio.gather(self._vacuum, return_exceptions=True)

    async def _run(self) -> None:
        s = self.settings
        now = time.monotonic()
        next_rescue = now
        next_prune = now + min(5.0, s.prune_interval)
        next_summary = now + SUMMARY_EVERY_S
        next_ticks = now if self.schedules else NEVER
        next_fold = now
        last_sample_minute = -1
        while True:
            now = time.monotonic()
            # Not while this worker's VACUUM of `jobs` runs: ANALYZE wants the lock it holds.
            if (
                self._analyze_wanted
                and now - self._last_analyze >= ANALYZE_AT_MOST_EVERY_S
                and not self._vacuuming()
            ):
                self._analyze_wanted = False
                self._last_analyze = now
                # ok=True: the ANALYZE returns nothing, which read as skipped (never logged)
                if await self._chore("analyze", self.db.analyze(self.link), ok=True):
                    log.info("worker=%s event=analyzed reason=slow_claim", self.db.worker_id)
            if now >= next_rescue:
                next_rescue = now + s.heartbeat_interval
                rescue = self.db.rescue(self.link, s.lock_timeout)
                self._rescued(await self._chore("rescue", rescue))
                minute = int(time.time() // 60)
                if minute != last_sample_minute and await self._chore(
                    "queue_sample", self.db.queue_sample(self.link), default=False, ok=True
                ):
                    last_sample_minute = minute
                await self._maybe_vacuum()
            if now >= next_fold:
                next_fold = now + min(s.heartbeat_interval, FOLD_AT_LEAST_EVERY_S)
                await self._fold_counts()
            if now >= next_ticks:
                next_ticks = now + TICKS_EVERY_S
                await self._ticks()
            if now >= next_prune:
                next_prune = now + s.prune_interval
                await self._slow_chores()
            if now >= next_summary:
                next_summary = now + SUMMARY_EVERY_S
                self._summary()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                wait = min(next_rescue, next_prune, next_summary, next_ticks, next_fold)
                wait -= time.monotonic()
                async with asyncio.timeout(max(0.0, wait)):
                    await self._wake.wait()

    async def _ticks(self) -> None:
        """Enqueue the due ticks of this worker's schedules (database clock; each tick once
        however many workers do this at the same moment: jobtui.schedules)."""
        conn = await self._chore("ticks_connect", self.link.connection())
        if conn is None:
            return
        done = await self._chore(
            "ticks", enqueue_due_ticks(conn, self.db.q.schema, self.schedules), default=[]
        )
        for tick in done:
            log.info(
                "worker=%s event=tick_enqueued schedule=%s tick=%s job=%d",
                self.db.worker_id,
                tick.schedule,
                tick.tick.isoformat(),
                tick.job_id,
            )

    def _vacuuming(self) -> bool:
        return self._vacuum is not None and not self._vacuum.done()

    async def _maybe_vacuum(self) -> None:
        """Start a VACUUM of `jobs` when autovacuum is off and would have run by now."""
        if self.vacuum_links is None or self._vacuuming():
            return
        if time.monotonic() < self._vacuum_not_before:
            return
        pause = VACUUM_PAUSE_FACTOR * self._vacuum_longest
        due = self.db.jobs_vacuum_due(self.link, VACUUM_MIN_DEAD, pause)
        if await self._chore("vacuum_check", due, default=False):
            self._vacuum = asyncio.create_task(self._vacuum_jobs(), name="jobtui-vacuum")

    async def _vacuum_jobs(self) -> None:
        assert self.vacuum_links is not None
        link, watch = self.vacuum_links
        t0 = time.monotonic()
        ran = None
        try:
            ran = await self._vacuum_yielding(link, watch)
            if ran:
                log.info(
                    "worker=%s event=vacuumed table=jobs seconds=%.1f reason=autovacuum_off",
                    self.db.worker_id,
                    time.monotonic() - t0,
                )
            elif ran is False:
                log.info(
                    "worker=%s event=vacuum_skipped table=jobs reason=table_locked retry_s=%g",
                    self.db.worker_id,
                    VACUUM_RETRY_AFTER_S,
                )
        finally:
            self._vacuum_longest = max(self._vacuum_longest, time.monotonic() - t0)
            if not ran:
                self._vacuum_not_before = time.monotonic() + VACUUM_RETRY_AFTER_S
            await link.close()  # no connection held between vacuums
            await watch.close()

    async def _vacuum_yielding(self, link: Link, watch: Link) -> bool | None:
        """The VACUUM on `link`: True when it ran, False when skipped for a lock, None when it
        failed or was cancelled because it held up a lock that stops the queue (checked on
        `watch` every VACUUM_YIELD_CHECK_S)."""
        vacuum = asyncio.create_task(
            self._chore("vacuum_jobs", self.db.vacuum_jobs(link), link=link),
            name="jobtui-vacuum-statement",
        )
        try:
            while True:
                done, _ = await asyncio.wait({vacuum}, timeout=VACUUM_YIELD_CHECK_S)
                if done:
                    return vacuum.result()
                if await self._chore("vacuum_watch", self.db.vacuum_blocks(watch), link=watch):
                    log.info(
                        "worker=%s event=vacuum_yielded table=jobs reason=lock_wanted retry_s=%g",
                        self.db.worker_id,
                        VACUUM_RETRY_AFTER_S,
                    )
                    return None
        finally:
            if not vacuum.done():
                vacuum.cancel()  # psycopg cancels the statement on the server
                await asyncio.gather(vacuum, return_exceptions=True)

    async def _fold_counts(self) -> None:
        """Merge the count deltas, then VACUUM them away (autovacuum may be off)."""
        if await self._chore("fold_counts", self.link.fetch(self.db.q.worker_fold_counts), ok=True):
            await self._chore("vacuum_counts", self.link.fetch(self.db.q.worker_vacuum_counts))

    async def _slow_chores(self) -> None:
        db, link = self.db, self.link
        if self.schedules:
            conn = await self._chore("prune_ticks_connect", link.connection())
            if conn is not None:
                await self._chore(
                    "prune_ticks", prune_ticks(conn, db.q.schema, TICK_RETENTION), default=0
                )
        self._rescued(await self._chore("sweep", db.bury_exhausted(link, self.dispatcher.kinds)))
        ended = await self._chore("finish_cancelled", db.finish_cancelled(link), default=0)
        if ended:
            log.info("worker=%s event=cancel_requests_ended count=%d", db.worker_id, ended)
        await self._chore("forget_workers", db.forget_stale_workers(link))
        pruned = 0
        if self.settings.prunes_anything():
            pruned = await self._chore(
                "prune", db.prune(link, self.settings.retention.total_seconds()), default=0
            )
        if pruned:
            log.info("worker=%s event=pruned count=%d", db.worker_id, pruned)

    async def _chore(
        self,
        name: str,
        work: Awaitable[Any],
        default: Any = None,
        ok: Any = None,
        link: Link | None = None,
    ) -> Any:
        """Run one chore (on `link`, the housekeeping link by default); its result (or `ok`
        when it returns nothing), `default` if skipped."""
        try:
            result = await work
        except psycopg.Error as exc:
            self.skipped += 1
            if _connection_lost(exc):
                await asyncio.sleep((link or self.link).failed(exc))
            else:
                log.warning(
                    "worker=%s event=chore_skipped chore=%s error=%s",
                    self.db.worker_id,
                    name,
                    describe_error(exc),
                )
            return default
        except Exception:
            self.skipped += 1
            log.exception("worker=%s event=chore_error chore=%s", self.db.worker_id, name)
            return default
        return ok if result is None and ok is not None else result

    def _rescued(self, rows: list[tuple[str, int, str]] | None) -> None:
        """Count and log rows (fate, id, kind) that rescue or the sweep moved."""
        if not rows:
            return
        fates: dict[str, list[int]] = {}
        for fate, job_id, kind in rows:
            fates.setdefault(fate, []).append(job_id)
            if fate == "dead":
                self.stats.dead(kind)
        self.rescued += len(rows)
        log.info(
            "worker=%s event=rescued %s ids=%s",
            self.db.worker_id,
            " ".join(f"{fate}={len(ids)}" for fate, ids in sorted(fates.items())),
            short_ids([r[1] for r in rows]),
        )
        self.dispatcher.poke()

    def _summary(self) -> None:
        c, d = self.dispatcher.counts, self.dispatcher
        if any(c.values()) or d.running or self.rescued or d.threads.abandoned:
            log.info(
                "worker=%s event=summary done=%d failed=%d dead=%d cancelled=%d rescued=%d "
                "running=%d abandoned=%d skipped_chores=%d period_s=%g",
                self.db.worker_id,
                c["done"],
                c["failed"],
                c["dead"],
                c["cancelled"],
                self.rescued,
                len(d.running),
                d.threads.abandoned,
                self.skipped,
                SUMMARY_EVERY_S,
            )
        for key in c:
            c[key] = 0
        self.rescued = 0


def _connection_lost(exc: psycopg.Error) -> bool:
    """The connection broke (as opposed to one statement blocked, too slow or refused)."""
    state = exc.sqlstate
    return state is None or state[:2] == "08" or state in {"57P01", "57P02", "57P03"}
