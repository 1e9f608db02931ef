"""Claims jobs into free slots and runs their handlers: the dispatcher owns slots and jobs.

Promises kept: at most `concurrency` handlers hold a slot, counting threads of plain handlers
that overran their timeout until they really end (`Threads`); running jobs are keyed by
(id, attempt), so a job rescued from under this worker and claimed again by it is two separate
attempts, each with its own outcome; a job is started only from a claim that took its row, and
only while that claim is fresh: a claim whose reply took longer than `recheck_after` to reach
its handlers (a stalled loop, a huge reply) is checked again with one query (still locked by
this worker, same attempt, no cancel requested), so a job rescued and cancelled meanwhile never
starts. While liveness says this worker may be judged dead (`fenced`), it neither claims nor
starts: what it claimed then is released unstarted.

Claims: as many ready jobs as there are free slots, woken at once by NOTIFY (the listener's poke
launches the claim itself, one event-loop turn sooner than the claim loop could) and by
finishing jobs, with a polling fallback; claimed jobs' handler tasks are created before the
claim loop is woken, so they run first. A second claim, on a second connection, starts
while one is in flight once half the slots are free, so long jobs finishing one by one do not
leave slots empty for a whole round trip. A claim that failed may have committed with its
reply lost: rows this worker holds without knowing are released before it claims again.

Kinds with a limit (issue 13, jobtui.limits) are claimed apart: the fast claim leaves them
out (in its SQL, so a new limit applies at once; while this worker handles a limited kind it
walks each other kind on its own, worker_claim_per_kind, so a limited kind's backlog ahead of
them costs nothing), and a claim first calls claim_limited for
the limited kinds this worker handles when they are due (told its other kinds, so that the
free slots go to all its kinds in one claim order: migration 0030): at once after a NOTIFY, a limits
change or one of its own limited jobs finishing; after the rate's wait when a kind ran out of
tokens; after FULL_POLL_S when a kind sits at its concurrency limit with jobs waiting (another
worker's completion sends no NOTIFY). Which kinds are limited is read again every
LIMITS_REFRESH_S and on a 'limits' NOTIFY; while none of ours is, the periodic read follows a
claim's start of its jobs instead of preceding the claim (the fast claim leaves limited kinds
out by itself), so it adds no round trip to a pickup. With no limited kind, claims are what
they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg

from jobtui.registry import HandlerSpec
from jobtui.worker.flusher import Flusher
from jobtui.worker.link import Link
from jobtui.worker.outcomes import record_failure, short_ids
from jobtui.worker.running import Running, Threads, run_handler
from jobtui.worker.settings import WorkerSettings
from jobtui.worker.statements import UndecodablePayload, WorkerDB

log = logging.getLogger("jobtui.worker")

# A full claim slower than this means the planner is sorting the whole backlog, which happens
# when statistics say nothing is due (e.g. a large batch scheduled for one moment has just come
# due): the housekeeper then refreshes the statistics rather than wait for autovacuum. The
# limited claim too, when slow while jobs are ready (see _claim_limited).
SLOW_CLAIM_S = 0.05
LIMITS_REFRESH_S = 5.0
CONTESTED_RETRY_S = 0.01  # a limited kind another worker was claiming at that moment
NEVER = float("inf")
FENCED_POLL_S = 0.1  # while fenced, how often to look whether a heartbeat succeeded again


class HeartbeatLost(Exception):
    """The failure recorded for an attempt this worker stopped as lost after its handler ran
    (its heartbeat was overdue past its own timeout): like a rescue, the attempt counts, so a
    job whose handler freezes its worker every time still reaches its attempt limit."""


class Dispatcher:
    """Slots, claims and running jobs of one worker."""

    def __init__(
        self,
        worker_id: str,
        settings: WorkerSettings,
        specs: dict[str, HandlerSpec],
        db: WorkerDB,
        links: list[Link],
        flusher: Flusher,
        on_slow_claim: Callable[[], None],
        on_claimed: Callable[[float], None] = lambda started: None,
    ) -> None:
        self.worker_id = worker_id
        self.settings = settings
        self.specs = specs
        self.kinds = sorted(specs)
        self.db = db
        self.links = links
        self.flusher = flusher
        self.on_slow_claim = on_slow_claim
        self.on_claimed = on_claimed
        # Liveness's verdict: True while this worker's last heartbeat is too old to claim on.
        self.fenced: Callable[[], bool] = lambda: False
        # A claim older than this when its handlers would start is checked again: rescuers may
        # take its rows once the heartbeat is `heartbeat_timeout` old, and at the claim it may
        # have been up to `heartbeat_interval` old already.
        self.recheck_after = max(0.0, settings.heartbeat_timeout - settings.heartbeat_interval) / 4
        self.running: dict[tuple[int, int], Running] = {}
        # Attempts whose plain handler's thread overran its timeout or ignored a stop and still
        # runs: their outcome is written when that thread ends, so until then their row stays
        # locked by this worker and counts toward the kind's concurrency limit (issue 25).
        self.lingering: dict[tuple[int, int], tuple[Running, BaseException | None, float]] = {}
        self.threads = Threads(self.poke)
        self.executor: ThreadPoolExecutor | None = None
        if any(not spec.is_async for spec in specs.values()):
            self.executor = ThreadPoolExecutor(
                max_workers=settings.concurrency, thread_name_prefix="jobtui-job"
            )
        self.counts = {"done": 0, "failed": 0, "dead": 0, "cancelled": 0}
        self.stopping = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self._wake = asyncio.Event()
        self._more = True  # the last claim was full (or a NOTIFY/poll says there may be work)
        self._pokes = 0  # NOTIFYs (and rescues) so far: one during a claim means "look again"
        self._claims: set[asyncio.Task[None]] = set()
        self._reserved = 0  # slots asked for by the claims in flight
        # Set by run(): the claim links not in use, the most one claim asks for, and the free
        # slots from which a second claim starts while one is in flight.
        self._looping = False
        self._idle: list[Link] = []
        self._limit = settings.claim_batch or settings.concurrency
        self._target = min(self._limit, max(1, settings.concurrency // 2))
        self._claim_seq = 0
        self._more_seq = 0
        self._check_orphans = False  # a claim failed: it may have committed with its reply lost
        self._resume_at = 0.0  # no claim before this (back-off after a failure)
        # How long to wait for a wake-up before claiming anyway: shorter while LISTEN is
        # known not to work (the listener's Wakeups sets it).
        self.poll_interval = settings.poll_interval
        self.limited: set[str] = set()  # kinds of ours with a limit, as last read
        self._limited_due = 0.0  # claim limited kinds from this monotonic time on
        self._limits_read_at = -NEVER  # when `limited` was read
        self._limited_freed = False  # a limited job ended; its outcome not yet written
        # The last limited claim held jobs back for rows of other kinds the fast claim then
        # could not take (locked by another transaction, taken by another worker): the next
        # limited claim is not told the other kinds, or the slot stays free and wait 0 spins.
        self._unmerged_next = False
        flusher.on_written = self._outcomes_written

    # ---------------------------------------------------------------- control

    def poke(self) -> None:
        """There may be work (a NOTIFY, a rescue, a slot freed): claim when a slot is free.

        The claim is launched from here when one is due, rather than by the claim loop once it
        has woken: that saves an event-loop turn on every pickup from an idle queue. The loop
        is still woken, after the claim task, to work out its next wait."""
        self._pokes += 1
        self._more = True
        self._limited_due = 0.0
        if self._looping:
            self._launch_if_due()
        self._wake.set()

    def limits_changed(self) -> None:
        """An operator changed a limit: read which kinds are limited at the next claim."""
        self._limits_read_at = -NEVER
        self.poke()

    def _outcomes_written(self) -> None:
        """The flusher wrote outcomes: a limited kind's slot freed by this worker is free in
        the database now, so claim it at once."""
        if self._limited_freed:
            self._limited_freed = False
            self._limited_due = 0.0
            self._wake.set()

    def _limited_wanted(self, now: float) -> bool:
        return now - self._limits_read_at >= LIMITS_REFRESH_S or (
            bool(self.limited) and now >= self._limited_due
        )

    def set_poll_interval(self, seconds: float) -> None:
        self.poll_interval = seconds
        self._wake.set()

    def stop(self) -> None:
        self.stopping.set()
        self._wake.set()

    def free_slots(self) -> int:
        return (
            self.settings.concurrency - len(self.running) - self.threads.abandoned - self._reserved
        )

    def known_ids(self, *, abandoned: bool = False) -> list[int]:
        """Ids this worker knows it holds (running or outcome not written yet); with
        `abandoned`, leave out the ones still running (at shutdown, to release them)."""
        ids = set(self.flusher.pending_ids())
        if not abandoned:
            ids.update(key[0] for key in self.running)
            ids.update(key[0] for key in self.lingering)
        return list(ids)

    # ----------------------------------------------------------------- claims

    async def run(self) -> None:
        """Keep the slots full until `stop()`; claims in flight end on their own."""
        idle = self._idle = list(self.links)
        self._looping = True
        try:
            while not self.stopping.is_set():
                wait = self.poll_interval
                if self._check_orphans or time.monotonic() < self._resume_at:
                    wait = self._resume_at - time.monotonic()
                    if wait <= 0:
                        if self._claims:  # each one wakes us when it ends
                            wait = self.poll_interval
                        else:
                            await self._release_orphans_after_failure(idle[0])
                            continue
                else:
                    now = time.monotonic()
                    if self._launch_if_due(now):
                        continue
                    if self.fenced():
                        wait = min(wait, FENCED_POLL_S)
                    if self.free_slots() > 0 and self.limited and not self._claims:
                        wait = min(wait, self._limited_due - now)
                self._wake.clear()
                try:
                    async with asyncio.timeout(max(wait, 0.001)):
                        await self._wake.wait()
                except TimeoutError:
                    self._more = True
        finally:
            self._looping = False
            while self._claims:
                await asyncio.wait(set(self._claims))

    def _launch_if_due(self, now: float | None = None) -> bool:
        """Start a claim if one is due now (free slots, maybe work, an idle link, no second
        claim before half the slots are free, not fenced, not backing off); True if started."""
        if self.stopping.is_set() or self._check_orphans:
            return False
        now = time.monotonic() if now is None else now
        if now < self._resume_at:
            return False
        free = self.free_slots()
        if (
            free > 0
            and self._idle
            and (not self._claims or free >= self._target)
            and (self._more or self._limited_wanted(now))
            and not self.fenced()
        ):
            self._launch(self._idle, min(free, self._limit))
            return True
        return False

    def _launch(self, idle: list[Link], n: int) -> None:
        link = idle.pop()
        self._reserved += n
        self._claim_seq += 1
        task = asyncio.get_running_loop().create_task(
            self._claim(link, n, self._claim_seq, idle), name="jobtui-claim"
        )
        self._claims.add(task)
        task.add_done_callback(self._claim_ended)

    def _claim_ended(self, task: asyncio.Task[None]) -> None:
        """Wake the loop once the claim has left `_claims`: the wake-up the claim sets at its
        end runs the loop before this callback, which then saw a claim in flight and waited
        the whole polling interval, past a limited kind's short wait (CONTESTED_RETRY_S,
        FULL_POLL_S, the merge's 0)."""
        self._claims.discard(task)
        self._wake.set()

    async def _claim(self, link: Link, n: int, seq: int, idle: list[Link]) -> None:
        pokes = self._pokes
        fast_n = 0
        claimed = False
        t0 = time.monotonic()
        # While no kind of ours is limited, the periodic look at whether one has become so
        # waits until this claim's jobs have started: the fast claim leaves limited kinds out
        # by itself, so only their own claim waits for it, not every pickup.
        read_after = (
            not self.limited
            and self._limits_read_at != -NEVER
            and t0 - self._limits_read_at >= LIMITS_REFRESH_S
        )
        if read_after:
            self._limits_read_at = t0  # this claim reads them: no other claim does meanwhile
        try:
            wanted = not read_after and self._limited_wanted(t0)
            rows, held = await self._claim_limited(link, n, t0) if wanted else ([], False)
            fast_n = n - len(rows)
            if fast_n > 0 and len(self.limited) < len(self.kinds):
                t1 = time.monotonic()
                fast = await self.db.claim(link, self.kinds, fast_n, per_kind=bool(self.limited))
                self._unmerged_next = held and len(fast) < fast_n
                if len(fast) == fast_n and time.monotonic() - t1 > SLOW_CLAIM_S:
                    self.on_slow_claim()
                rows += fast
            else:
                fast_n = 0  # no fast claim: it would find nothing, or there was no room
            if rows and time.monotonic() - t0 > self.recheck_after:
                rows = await self._still_ours(link, rows, t0)
            claimed = True
        except Exception as exc:
            if isinstance(exc, psycopg.Error):
                delay = link.failed(exc)
            else:
                log.exception("worker=%s event=claim_error", self.worker_id)
                delay = 1.0
            self._check_orphans = True
            self._resume_at = max(self._resume_at, time.monotonic() + delay)
        finally:
            self._reserved -= n
            if not claimed:
                if read_after:
                    self._limits_read_at = -NEVER  # read them before the next claim
                idle.append(link)
                self._wake.set()
        if not claimed:
            return
        if not read_after:
            idle.append(link)
        # The latest claim says whether more is waiting (an older one's locks were skipped by
        # it, not missed); a NOTIFY during the claim may be for a job its snapshot missed.
        if seq >= self._more_seq:
            self._more_seq = seq
            fast_full = fast_n > 0 and len(rows) == n
            self._more = fast_full or self._pokes != pokes
        if rows:
            self._start(rows, "lost" if self.fenced() else None)
            self.on_claimed(t0)
        # Woken after the handlers' tasks were created, so they run before its next turn.
        self._wake.set()
        if read_after:
            try:
                await self._read_limits(link)
            finally:
                idle.append(link)
                self._wake.set()

    async def _read_limits(self, link: Link) -> None:
        """Read which of our kinds are limited now (after a claim that did not wait for it)."""
        try:
            limited = await self.db.limited_kinds(link) & set(self.kinds)
        except BaseException as exc:
            self._limits_read_at = -NEVER  # read them before the next claim instead
            if not isinstance(exc, Exception):
                raise
            if isinstance(exc, psycopg.Error):
                delay = link.failed(exc)
            else:
                log.exception("worker=%s event=limits_read_error", self.worker_id)
                delay = 1.0
            self._resume_at = max(self._resume_at, time.monotonic() + delay)
            return
        self.limited = limited
        self._limited_due = 0.0  # a kind just found limited is claimed at the loop's next turn

    async def _still_ours(
        self, link: Link, rows: list[tuple[Any, ...]], t0: float
    ) -> list[tuple[Any, ...]]:
        """The rows of a late claim this worker still holds (same attempt); a cancel requested
        meanwhile is marked on the row (index 5) so the job ends cancelled without starting."""
        mine = await self.db.my_jobs(link)
        kept, gone = [], []
        for row in rows:
            seen = mine.get(row[0])
            if seen is None or seen[0] != row[3]:
                gone.append(row[0])
            else:
                kept.append((*row[:5], "cancel") if seen[1] else row)
        if gone:
            log.warning(
                "worker=%s event=claim_taken_meanwhile count=%d ids=%s age_s=%.2f "
                "reason=no longer locked by this worker when its handlers would start; not started",
                self.worker_id,
                len(gone),
                short_ids(gone),
                time.monotonic() - t0,
            )
        return kept

    async def _claim_limited(
        self, link: Link, n: int, now: float
    ) -> tuple[list[tuple[Any, ...]], bool]:
        """Claim from the limited kinds (reading which they are when due); set when to next.
        True with the rows if jobs were held back for the other kinds' (said with wait 0)."""
        if now - self._limits_read_at >= LIMITS_REFRESH_S:
            self.limited = await self.db.limited_kinds(link) & set(self.kinds)
            self._limits_read_at = now
            self._limited_due = 0.0
        if not self.limited or now < self._limited_due:
            return [], False
        # the fast claim's kinds, in one claim order (none after a merge the fast claim undid)
        others = [] if self._unmerged_next else sorted(set(self.kinds) - self.limited)
        self._unmerged_next = False
        t1 = time.monotonic()
        rows, said = await self.db.claim_limited(link, sorted(self.limited), n, others)
        after = time.monotonic()
        # Slow with jobs ready (some claimed, or held back by the merge or the limit): stale
        # statistics, as for the fast claim (200,000 jobs scheduled for one moment, analysed
        # before it, come due: 162-281 ms a claim; a worker of that kind alone ran 90-100 of
        # them in 6 s, 820-865 with this; migration 0031's plan without sorts covers only a
        # table never analysed, or analysed with no row waiting). A worker whose kinds are all
        # limited makes no fast claim to ask for it.
        if (rows or said.wait_s) and after - t1 > SLOW_CLAIM_S:
            self.on_slow_claim()
        if said.skipped:
            if set(said.skipped) - set(await self.db.limited_kinds(link)):
                self._limits_read_at = -NEVER  # a limit was lifted: read them again
            self._limited_due = after + CONTESTED_RETRY_S
        elif said.wait_s:
            self._limited_due = after + min(said.wait_s.values())
        elif len(rows) == n:
            self._limited_due = 0.0  # no slot left to fill: there may be more
        else:
            # Nothing ready now: a NOTIFY or a completion wakes it sooner, and like the fast
            # claim it looks again after the polling interval (a delayed or retried job of a
            # limited kind comes due without any NOTIFY).
            self._limited_due = after + self.poll_interval
        return rows, bool(others) and 0.0 in said.wait_s.values()

    async def _release_orphans_after_failure(self, link: Link) -> None:
        try:
            await self.release_orphans(link)
        except psycopg.Error as exc:
            self._resume_at = time.monotonic() + link.failed(exc)
        except Exception:
            log.exception("worker=%s event=claim_error", self.worker_id)
            self._resume_at = time.monotonic() + 1.0
        else:
            self._check_orphans = False

    async def release_orphans(self, link: Link, *, abandoned: bool = False) -> None:
        """Release rows locked by us that we do not know about (see `known_ids`)."""
        ids = await self.db.release_orphans(link, self.known_ids(abandoned=abandoned))
        if ids:
            log.warning(
                "worker=%s event=released_orphans count=%d ids=%s",
                self.worker_id,
                len(ids),
                short_ids(ids),
            )

    # ------------------------------------------------------------------- jobs

    def _start(self, rows: list[tuple[Any, ...]], why: str | None = None) -> None:
        """Run the handlers of claimed rows; with `why` (or a row marked so by _still_ours),
        end them unstarted for that reason instead (released, or cancelled)."""
        create = asyncio.get_running_loop().create_task
        now = time.monotonic()
        for row in rows:
            job = Running(row, self.specs[row[1]], self.worker_id, now)
            stop = row[5] if len(row) > 5 else why
            if stop is not None:
                job.interrupt(stop)
            self.running[job.key] = job
            job.task = create(self._run(job))
        self.idle.clear()

    async def _run(self, job: Running) -> None:
        job.started = True
        t0 = time.perf_counter()
        error: BaseException | None
        if job.why is not None:  # stopped before it started
            error = asyncio.CancelledError()
        elif isinstance(job.payload, UndecodablePayload):
            error = job.payload  # the handler cannot be given it: this attempt fails
        else:
            job.ran = True
            error = await run_handler(job, self.executor, self.threads)
        ms = (time.perf_counter() - t0) * 1000.0
        thread = job.thread
        if thread is not None and not thread.done() and job.why != "shutdown":
            self._linger(job, thread, error, ms)
        else:
            self._finish(job, error, ms)

    def _linger(
        self, job: Running, thread: Future[Any], error: BaseException | None, ms: float
    ) -> None:
        """Write the outcome of an attempt whose thread still runs only when it ends."""
        del self.running[job.key]
        self.lingering[job.key] = (job, error, ms)
        loop = asyncio.get_running_loop()

        def ended(_: Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the worker's loop is gone
                loop.call_soon_threadsafe(self._thread_ended, job.key)

        thread.add_done_callback(ended)
        if not self.running:
            self.idle.set()

    def _thread_ended(self, key: tuple[int, int]) -> None:
        ended = self.lingering.pop(key, None)
        if ended is not None:
            self._finish(*ended)

    def settle_lingering(self) -> None:
        """At shutdown: record now the outcome of attempts whose thread still runs (their
        timeout, or cancel) rather than release them; the thread ends with the process."""
        for key in list(self.lingering):
            self._thread_ended(key)

    def _finish(self, job: Running, error: BaseException | None, ms: float) -> None:
        self.running.pop(job.key, None)
        out, stats, kind = self.flusher.outcomes, self.flusher.stats, job.ctx.kind
        if error is None:
            out.done.append(job.key)
            stats.done(kind, ms)
            self.counts["done"] += 1
        elif job.why == "cancel":
            out.cancelled.append(job.key)
            self.counts["cancelled"] += 1
        elif job.why == "shutdown" or (job.why == "lost" and not job.ran):
            out.released.append(job.key)  # the worker chose to stop it: the attempt is given back
        else:
            if job.why == "lost":  # its handler ran: the attempt counts, as a rescue counts it
                error = HeartbeatLost(
                    "this worker missed its own heartbeat timeout while the handler ran; "
                    "stopped as lost"
                )
            fate = record_failure(
                out,
                job.spec,
                job.id,
                job.attempt,
                job.ctx.max_attempts,
                error,
                timed_out=job.timed_out,
            )
            stats.failed(kind)
            self.counts["failed"] += 1
            if fate == "dead":
                stats.dead(kind)
                self.counts["dead"] += 1
        self.flusher.wake()
        if kind in self.limited:
            self._limited_freed = True  # its slot is free once the flusher has written it
        if not self.running:
            self.idle.set()
        if self._more or self.threads.abandoned:
            self._wake.set()

    def interrupt(self, job: Running, why: str) -> None:
        if job.interrupt(why):
            log.debug("worker=%s event=interrupt job=%d why=%s", self.worker_id, job.id, why)

    def interrupt_all(self, why: str) -> None:
        for job in list(self.running.values()):
            self.interrupt(job, why)

    def shutdown_executor(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
