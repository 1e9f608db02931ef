"""The bundled worker: claim in batches, run handlers, record outcomes in batches, keep watch.

One asyncio process, a few long-lived connections, each with one job:

- claim: `worker_claim` takes as many ready jobs as there are free slots, woken at once by
  LISTEN/NOTIFY (own connection) and by finishing jobs, with a polling fallback. A second
  claim, on a second connection, starts while one is in flight once half the slots are free,
  so long jobs finishing one by one do not leave slots empty for a whole round trip;
- flush: a flusher writes every outcome buffered so far in one statement per kind of outcome
  (group commit) and the per-minute statistics, so no job costs its own round trip;
- maintenance: heartbeat, delivery of cancellations, rescue of jobs of dead workers and of rows
  locked by consumers that never heartbeat, pruning and queue samples.

Every write that ends an attempt re-checks `locked_by = me AND attempts = claimed attempt`, so
a job rescued from under this worker is never recorded twice. Database errors never stop the
worker: each connection is reopened with back-off and buffered outcomes are written later.

Shutdown (`request_stop`, SIGTERM/SIGINT via `run_worker`): claiming stops; running jobs get
`shutdown_grace` seconds; then they are cancelled (async handlers by `task.cancel()`, plain ones
by their `current_job().cancelled` event) and *released*: back to ready, with the attempt given
back (`attempts - 1`), because the job did not fail — the worker chose to stop it, and counting
it would dead-letter jobs that are merely longer than a deploy's grace period. A job that
crashes its worker is not released (the worker is gone), so its attempt still counts.

Limits worth knowing: a plain handler cannot be interrupted, only asked (its cancel event); one
that ignores the event past a timeout or the grace keeps its thread while its job is retried or
released. An async handler that swallows its cancellation is abandoned at shutdown the same way:
its job is released, not left locked by a worker that is gone. A payload PostgreSQL stored but
Python cannot decode (jsonb nested thousands deep) fails that job's attempt, not the batch.
An async handler that blocks the event loop stops the heartbeat too, and after
`heartbeat_timeout` its jobs are rescued by other workers; if this worker wakes up, it sees that
the database no longer says it holds them and stops their handlers, and its outcomes are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import secrets
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql as pgsql

from jobtui.db import acheck_schema, aconnect, describe_error
from jobtui.registry import HandlerSpec, Registry
from jobtui.sql import notify_channel
from jobtui.worker_context import JobCancelled, JobContext, current_job, set_current
from jobtui.worker_db import UndecodablePayload, WorkerDB
from jobtui.worker_link import Link
from jobtui.worker_outcomes import Outcomes, describe_exception, format_traceback
from jobtui.worker_stats import StatsBuffer

__all__ = [
    "JobCancelled",
    "JobContext",
    "Worker",
    "WorkerSettings",
    "current_job",
    "run_worker",
]

log = logging.getLogger("jobtui.worker")

SUMMARY_EVERY_S = 10.0
# A full claim slower than this means the planner is sorting the whole backlog, which happens
# when statistics say nothing is due (e.g. a large batch scheduled for one moment has just come
# due): the worker then refreshes the statistics itself rather than wait for autovacuum.
SLOW_CLAIM_S = 0.05
ANALYZE_AT_MOST_EVERY_S = 60.0
# How long plain (thread) handlers get, after their cancel event is set at shutdown, to notice.
THREAD_STOP_WAIT_S = 2.0
FINAL_FLUSH_TRIES = 5
FINAL_WRITES_S = 15.0  # at most this long trying to write outcomes at shutdown


@dataclass
class WorkerSettings:
    """How a worker runs; every interval is in seconds."""

    concurrency: int = 10
    kinds: tuple[str, ...] | None = None  # None = every kind in the registry
    poll_interval: float = 1.0
    heartbeat_interval: float = 5.0
    heartbeat_timeout: float = 30.0
    lock_timeout: float = 3600.0  # rows locked by something that never heartbeats
    shutdown_grace: float = 30.0
    retention: timedelta = timedelta(days=7)
    prune_interval: float = 60.0
    stats_flush_interval: float = 1.0
    claim_batch: int | None = None

    def check(self) -> None:
        """Raise ValueError (one line) for settings the worker cannot run with."""
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise ValueError(f"concurrency must be an integer, not {self.concurrency!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        for name in (
            "poll_interval",
            "heartbeat_interval",
            "heartbeat_timeout",
            "lock_timeout",
            "prune_interval",
            "stats_flush_interval",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if not self.shutdown_grace >= 0:
            raise ValueError(f"shutdown_grace must be >= 0, not {self.shutdown_grace!r}")
        if self.heartbeat_timeout <= self.heartbeat_interval:
            raise ValueError(
                f"heartbeat_timeout ({self.heartbeat_timeout}s) must be longer than "
                f"heartbeat_interval ({self.heartbeat_interval}s)"
            )
        if self.retention.total_seconds() <= 0:
            raise ValueError("retention must be a positive duration")
        if self.claim_batch is not None and self.claim_batch < 1:
            raise ValueError(f"claim_batch must be at least 1, not {self.claim_batch}")


class _Running:
    """One claimed job while its handler runs."""

    __slots__ = (
        "attempt",
        "claimed_at",
        "ctx",
        "id",
        "payload",
        "spec",
        "started",
        "task",
        "timed_out",
        "why",
    )

    def __init__(self, row: tuple[Any, ...], spec: HandlerSpec, worker_id: str) -> None:
        self.id: int = row[0]
        self.payload: Any = row[2]
        self.attempt: int = row[3]
        self.spec = spec
        self.ctx = JobContext(
            row[0], row[1], row[3], spec.max_attempts or row[4], worker_id=worker_id
        )
        self.claimed_at = time.monotonic()
        self.started = False
        self.timed_out = False
        self.task: asyncio.Task[None] | None = None
        # Why the worker stopped it: None, "cancel" (operator), "shutdown" or "lost".
        self.why: str | None = None


class Worker:
    """Runs the handlers of `registry` for jobs in `schema` until `request_stop()`."""

    def __init__(self, dsn: str, schema: str, registry: Registry, settings: WorkerSettings) -> None:
        settings.check()
        kinds = list(settings.kinds) if settings.kinds is not None else registry.kinds()
        unknown = sorted(set(kinds) - set(registry.kinds()))
        if unknown:
            raise ValueError(
                f"no handler for kind(s) {', '.join(unknown)}; "
                f"the app handles: {', '.join(registry.kinds()) or 'nothing'}"
            )
        if not kinds:
            raise ValueError("the worker has no kinds to handle")
        self.dsn = dsn
        self.schema = schema
        self.registry = registry
        self.settings = settings
        self.kinds = sorted(set(kinds))
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.host}:{self.pid}:{secrets.token_hex(3)}"
        self._db = WorkerDB(schema, self.id)
        self._channel = notify_channel(schema)
        self._specs: dict[str, HandlerSpec] = {k: registry.get(k) for k in self.kinds}  # type: ignore[misc]
        self._running: dict[int, _Running] = {}
        self._held: dict[int, int] = {}  # id -> attempt, from claim until the outcome is written
        self._outcomes = Outcomes()
        self._stats = StatsBuffer()
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_early = False
        self._force_early = False
        self._more = True  # the last claim was full (or a NOTIFY/poll says there may be work)
        self._pokes = 0  # NOTIFYs (and rescues) so far: one during a claim means "look again"
        self._claims: set[asyncio.Task[None]] = set()  # claims in flight
        self._reserved = 0  # slots asked for by the claims in flight
        self._claim_seq = 0  # launch number of the last claim, and of the one that set _more
        self._more_seq = 0
        self._check_orphans = False  # a claim failed: it may have committed with its reply lost
        self._claim_resume_at = 0.0  # no claim before this (back-off after a failure)
        self._stale_stats = False  # a full claim was slow: maintenance should ANALYZE jobs
        self._last_analyze = -ANALYZE_AT_MOST_EVERY_S
        self._counts = {"done": 0, "failed": 0, "dead": 0, "cancelled": 0, "rescued": 0}
        self._tasks: list[asyncio.Task[None]] = []

    # ----------------------------------------------------------------- control

    def request_stop(self) -> None:
        """Ask the worker to drain and stop; a second call skips what is left of the grace.

        Safe from a signal handler and from other threads.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            self._force_early = self._stop_early
            self._stop_early = True
            return
        try:
            same = asyncio.get_running_loop() is loop
        except RuntimeError:
            same = False
        if same:
            self._on_stop()
        else:
            loop.call_soon_threadsafe(self._on_stop)

    def _on_stop(self) -> None:
        if self._stopping.is_set():
            self._force.set()
            return
        log.info("worker=%s event=stopping running=%d", self.id, len(self._running))
        self._stopping.set()
        self._wake.set()

    @property
    def running_count(self) -> int:
        return len(self._running)

    # --------------------------------------------------------------------- run

    async def run(self) -> None:
        """Work until a stop is requested, then drain and return.

        Raises the connection error (or `SchemaMissing`) when the database cannot be reached
        or lacks jobtui's tables at start; after that, database errors are retried forever.
        """
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._force = asyncio.Event()
        self._closing = asyncio.Event()
        self._wake = asyncio.Event()
        self._flush_wake = asyncio.Event()
        self._cancel_wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._claim_links = [Link(self.dsn, "claim")]
        if self.settings.concurrency > 1:
            self._claim_links.append(Link(self.dsn, "claim 2"))
        self._flush_link = Link(self.dsn, "flush")
        self._maint_link = Link(self.dsn, "maintenance")
        try:
            conn = await self._maint_link.connection()
            await acheck_schema(conn, self.schema)
            await self._db.heartbeat(self._maint_link, self._heartbeat_params())
            # Opened now, not on first use: a connection opened by the first job to need it
            # (the second claim one may wait long for that) would add its set-up to that
            # job's pickup.
            for link in (*self._claim_links, self._flush_link):
                await link.connection()
        except BaseException:
            await self._close_links()
            raise
        if any(not spec.is_async for spec in self._specs.values()):
            self._executor = ThreadPoolExecutor(
                max_workers=self.settings.concurrency, thread_name_prefix="jobtui-job"
            )
        log.info(
            "worker=%s event=started kinds=%s concurrency=%d",
            self.id,
            ",".join(self.kinds),
            self.settings.concurrency,
        )
        if self._stop_early:
            self._on_stop()
            if self._force_early:
                self._force.set()
        self._flusher_task = asyncio.create_task(self._flusher(), name="jobtui-flush")
        self._tasks = [
            asyncio.create_task(self._listen(), name="jobtui-listen"),
            asyncio.create_task(self._maintenance(), name="jobtui-maintenance"),
        ]
        try:
            await self._claim_loop()
        finally:
            await self._drain()

    # ------------------------------------------------------------------- claim

    async def _claim_loop(self) -> None:
        """Keep the slots full: claim every free slot (up to `claim_batch`) when no claim is in
        flight, or when half the slots are free while one is; one claim per claim connection.

        Claims stay as large as the free slots allow: a claim's cost is mostly per row, but not
        only, and on a busy 2-core machine, cutting them in halves to keep two in flight cost
        more CPU than the overlap gained (no-op drain: 10 700 vs 11 200 jobs/s).
        """
        concurrency = self.settings.concurrency
        limit = self.settings.claim_batch or concurrency
        target = min(limit, max(1, concurrency // 2))
        idle = list(self._claim_links)
        try:
            while not self._stopping.is_set():
                wait = self.settings.poll_interval
                if self._check_orphans or time.monotonic() < self._claim_resume_at:
                    # After a failed claim: back off, and release what we may hold without
                    # knowing it once no other claim is in flight (its rows are not known yet).
                    wait = self._claim_resume_at - time.monotonic()
                    if wait <= 0:
                        if self._claims:  # each one wakes us when it ends
                            wait = self.settings.poll_interval
                        else:
                            await self._release_orphans_after_failure(idle[0])
                            continue
                else:
                    free = concurrency - len(self._running) - self._reserved
                    if free > 0 and self._more and idle and (not self._claims or free >= target):
                        self._launch_claim(idle, min(free, limit))
                        continue
                self._wake.clear()
                try:
                    async with asyncio.timeout(max(wait, 0.001)):
                        await self._wake.wait()
                except TimeoutError:
                    self._more = True
        finally:
            # Claims in flight end on their own (their rows are then started, and drained).
            while self._claims:
                await asyncio.wait(set(self._claims))

    def _launch_claim(self, idle: list[Link], n: int) -> None:
        link = idle.pop()
        self._reserved += n
        self._claim_seq += 1
        task = asyncio.get_running_loop().create_task(
            self._claim(link, n, self._claim_seq, idle), name="jobtui-claim"
        )
        self._claims.add(task)
        task.add_done_callback(self._claims.discard)

    async def _claim(self, link: Link, n: int, seq: int, idle: list[Link]) -> None:
        """One claim of up to `n` jobs on `link`; its jobs are started at once."""
        pokes = self._pokes
        try:
            claim_started = time.monotonic()
            rows = await self._db.claim(link, self.kinds, n)
            if len(rows) == n and time.monotonic() - claim_started > SLOW_CLAIM_S:
                self._stale_stats = True
                self._cancel_wake.set()  # wakes maintenance, which analyzes
        except psycopg.Error as exc:
            # The claim may have committed with its reply lost: release what we hold
            # without knowing it before claiming again.
            self._claim_failed(link.failed(exc))
            return
        except Exception:
            # Whatever failed may have failed after the claim committed: same as above.
            log.exception("worker=%s event=claim_error", self.id)
            self._claim_failed(1.0)
            return
        finally:
            self._reserved -= n
            idle.append(link)
            self._wake.set()
        # The latest claim says whether more is waiting (an older one's locks were skipped by
        # it, not missed); a NOTIFY during the claim may be for a job its snapshot missed.
        if seq >= self._more_seq:
            self._more_seq = seq
            self._more = len(rows) == n or self._pokes != pokes
        if rows:
            self._start(rows)

    def _claim_failed(self, delay: float) -> None:
        self._check_orphans = True
        self._claim_resume_at = max(self._claim_resume_at, time.monotonic() + delay)

    async def _release_orphans_after_failure(self, link: Link) -> None:
        try:
            await self._release_orphans(link)
        except psycopg.Error as exc:
            self._claim_resume_at = time.monotonic() + link.failed(exc)
        except Exception:
            log.exception("worker=%s event=claim_error", self.id)
            self._claim_resume_at = time.monotonic() + 1.0
        else:
            self._check_orphans = False

    def _poke(self) -> None:
        """There may be work (a NOTIFY, a rescue): claim as soon as there is a free slot."""
        self._pokes += 1
        self._more = True
        self._wake.set()

    async def _release_orphans(self, link: Link, *, abandoned: bool = False) -> None:
        """Release rows locked by us that we do not know about; with `abandoned`, also those
        whose handler is still running after the drain gave up on it (at shutdown only)."""
        known = [i for i in self._held if not (abandoned and i in self._running)]
        ids = await self._db.release_orphans(link, known)
        if ids:
            log.warning(
                "worker=%s event=released_orphans count=%d ids=%s",
                self.id,
                len(ids),
                _ids(ids),
            )

    def _start(self, rows: list[tuple[Any, ...]]) -> None:
        create = asyncio.get_running_loop().create_task
        debug = log.isEnabledFor(logging.DEBUG)
        for row in rows:
            job = _Running(row, self._specs[row[1]], self.id)
            self._running[job.id] = job
            self._held[job.id] = job.attempt
            job.task = create(self._run_job(job))
            if debug:
                log.debug(
                    "worker=%s event=claimed job=%d kind=%s attempt=%d",
                    self.id,
                    job.id,
                    row[1],
                    job.attempt,
                )
        self._idle.clear()

    # --------------------------------------------------------------------- run one

    async def _run_job(self, job: _Running) -> None:
        job.started = True
        spec = job.spec
        set_current(job.ctx)
        error: BaseException | None = None
        t0 = time.perf_counter()
        if job.why is not None:  # stopped before it started
            error = asyncio.CancelledError()
        elif isinstance(job.payload, UndecodablePayload):
            error = job.payload  # the handler cannot be given it: this attempt fails
        else:
            try:
                if spec.is_async:
                    if spec.timeout is None:
                        await spec.fn(job.payload)
                    else:
                        limit = asyncio.timeout(spec.timeout)
                        try:
                            async with limit:
                                await spec.fn(job.payload)
                        finally:
                            job.timed_out = limit.expired()
                else:
                    await self._run_plain(job)
            except BaseException as exc:  # noqa: BLE001 - handlers may raise anything
                error = exc
        self._finish(job, error, (time.perf_counter() - t0) * 1000.0)

    async def _run_plain(self, job: _Running) -> None:
        spec = job.spec
        call = functools.partial(contextvars.copy_context().run, spec.fn, job.payload)
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        try:
            if spec.timeout is None:
                result = await future
                if inspect.isawaitable(result):  # a plain function that returned a coroutine
                    await result
            else:
                limit = asyncio.timeout(spec.timeout)
                try:
                    async with limit:
                        result = await future
                        if inspect.isawaitable(result):
                            await result
                finally:
                    job.timed_out = limit.expired()
        except BaseException:
            job.ctx.cancelled.set()  # timeout or forced stop: tell the thread to give up
            raise

    def _finish(self, job: _Running, error: BaseException | None, ms: float) -> None:
        del self._running[job.id]
        kind = job.ctx.kind
        debug = log.isEnabledFor(logging.DEBUG)
        if error is None:
            self._outcomes.done.append((job.id, job.attempt))
            self._stats.done(kind, ms)
            self._counts["done"] += 1
            outcome = "succeeded"
        elif job.why == "cancel":
            self._outcomes.cancelled.append((job.id, job.attempt))
            self._counts["cancelled"] += 1
            outcome = "cancelled"
        elif job.why in ("shutdown", "lost"):
            self._outcomes.released.append((job.id, job.attempt))
            outcome = "released" if job.why == "shutdown" else "lost"
        else:
            outcome = self._failed(job, error)
        if debug:
            log.debug(
                "worker=%s event=%s job=%d kind=%s attempt=%d ms=%.1f",
                self.id,
                outcome,
                job.id,
                kind,
                job.attempt,
                ms,
            )
        self._flush_wake.set()
        if not self._running:
            self._idle.set()
        if self._more:
            self._wake.set()

    def _failed(self, job: _Running, error: BaseException) -> str:
        spec, kind = job.spec, job.ctx.kind
        if job.timed_out and isinstance(error, TimeoutError):
            text = f"TimeoutError: handler exceeded its timeout of {spec.timeout:g}s"
        else:
            text = describe_exception(error)
        tb = format_traceback(error)
        self._stats.failed(kind)
        self._counts["failed"] += 1
        if job.attempt >= job.ctx.max_attempts:
            self._outcomes.bury.append((job.id, job.attempt, text, tb, spec.max_attempts))
            self._stats.dead(kind)
            self._counts["dead"] += 1
            log.debug(
                "worker=%s event=dead job=%d kind=%s attempt=%d error=%s",
                self.id,
                job.id,
                kind,
                job.attempt,
                text.splitlines()[0] if text else "",
            )
            return "dead"
        delay = spec.backoff(job.attempt)
        self._outcomes.retry.append((job.id, job.attempt, delay, text, tb, spec.max_attempts))
        return "failed"

    def _interrupt(self, job: _Running, why: str) -> None:
        """Stop a running handler: set its event, and cancel it if it is a coroutine."""
        if job.why is not None:
            return
        job.why = why
        job.ctx.cancelled.set()
        if job.started and job.spec.is_async and job.task is not None:
            job.task.cancel()
        log.debug("worker=%s event=interrupt job=%d why=%s", self.id, job.id, why)

    # ------------------------------------------------------------------- flush

    async def _flusher(self) -> None:
        """Group commit: write whatever is buffered, as soon as the previous write returns."""
        link = self._flush_link
        every = self.settings.stats_flush_interval
        next_stats = time.monotonic() + every
        while not self._closing.is_set():
            if not self._outcomes:
                timeout = max(0.0, next_stats - time.monotonic())
                self._flush_wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._flush_wake.wait()
                if self._closing.is_set():
                    return
            try:
                if self._outcomes:
                    await self._write_outcomes(link)
                if time.monotonic() >= next_stats:
                    next_stats = time.monotonic() + every
                    await self._write_stats(link)
            except psycopg.Error as exc:
                await self._sleep_unless_closing(link.failed(exc))
            except Exception:
                log.exception("worker=%s event=flush_error", self.id)
                await self._sleep_unless_closing(1.0)

    async def _sleep_unless_closing(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closing.wait()

    async def _write_outcomes(self, link: Link) -> None:
        """Write everything buffered so far; what was not written goes back to the buffer."""
        batch, held = self._outcomes.take(), self._held
        sent = batch.ids()
        try:
            refused = await self._db.write_outcomes(link, batch)
        except BaseException:
            left = set(batch.ids())
            self._outcomes.put_back(batch)
            for job_id in sent:
                if job_id not in left:
                    held.pop(job_id, None)
            raise
        for job_id in sent:
            held.pop(job_id, None)
        for what, ids in refused:
            if ids:
                log.warning(
                    "worker=%s event=outcome_refused outcome=%s count=%d ids=%s "
                    "reason=no longer held by this worker (rescued, deleted or already written)",
                    self.id,
                    what,
                    len(ids),
                    _ids(ids),
                )

    async def _write_stats(self, link: Link) -> None:
        if not self._stats:
            return
        cells = self._stats.take()
        try:
            await self._db.write_stats(link, cells)
        except BaseException:
            self._stats.put_back(cells)
            raise

    # ------------------------------------------------------------------ listen

    async def _listen(self) -> None:
        """Wake the claim loop on NOTIFY; deliver cancellations at once."""
        failures = 0
        while True:
            conn: psycopg.AsyncConnection | None = None
            try:
                conn = await aconnect(self.dsn, app="jobtui worker (listen)")
                await conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(self._channel)))
                if failures:
                    log.info("worker=%s event=listen_reconnected", self.id)
                failures = 0
                # Anything sent while we were not listening was missed: look now.
                self._poke()
                self._cancel_wake.set()
                async for note in conn.notifies():
                    if note.payload == "cancel":
                        self._cancel_wake.set()
                    else:
                        # A kind, 'bulk', 'resume', 'requeue' …: there may be work. An empty
                        # claim costs one indexed query, so anything but 'cancel' wakes.
                        self._poke()
            except psycopg.Error as exc:
                failures += 1
                if failures == 1:
                    log.warning(
                        "worker=%s event=listen_lost error=%s", self.id, describe_error(exc)
                    )
                await asyncio.sleep(min(5.0, 0.05 * 2 ** min(failures, 10)))
            except Exception:
                log.exception("worker=%s event=listen_error", self.id)
                await asyncio.sleep(1.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    # ------------------------------------------------------------- maintenance

    def _heartbeat_params(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "kinds": self.kinds,
            "concurrency": self.settings.concurrency,
            "running": len(self._running),
        }

    async def _maintenance(self) -> None:
        """Heartbeat, cancellations, rescue and samples every heartbeat; housekeeping slower."""
        link, s, db = self._maint_link, self.settings, self._db
        next_beat = time.monotonic()
        next_prune = time.monotonic() + min(5.0, s.prune_interval)
        next_summary = time.monotonic() + SUMMARY_EVERY_S
        last_sample_minute = -1
        while True:
            now = time.monotonic()
            try:
                if self._cancel_wake.is_set():
                    self._cancel_wake.clear()
                    await self._check_my_jobs(link)
                if self._stale_stats:
                    self._stale_stats = False
                    await self._analyze_if_due(link)
                if now >= next_beat:
                    next_beat = now + s.heartbeat_interval
                    await db.heartbeat(link, self._heartbeat_params())
                    await self._check_my_jobs(link)
                    self._rescued(await db.rescue(link, s.heartbeat_timeout, s.lock_timeout))
                    minute = int(time.time() // 60)
                    if minute != last_sample_minute:
                        await db.queue_sample(link)
                        last_sample_minute = minute
                if now >= next_prune:
                    next_prune = now + s.prune_interval
                    await self._housekeeping(link)
            except psycopg.Error as exc:
                next_beat = min(next_beat, time.monotonic() + link.failed(exc))
            except Exception:
                log.exception("worker=%s event=maintenance_error", self.id)
            if now >= next_summary:
                next_summary = now + SUMMARY_EVERY_S
                self._summary()
            wait = max(0.0, min(next_beat, next_prune, next_summary) - time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._cancel_wake.wait()

    def _summary(self) -> None:
        c = self._counts
        if any(c.values()) or self._running:
            log.info(
                "worker=%s event=summary done=%d failed=%d dead=%d cancelled=%d rescued=%d "
                "running=%d period_s=%g",
                self.id,
                c["done"],
                c["failed"],
                c["dead"],
                c["cancelled"],
                c["rescued"],
                len(self._running),
                SUMMARY_EVERY_S,
            )
        for key in c:
            c[key] = 0

    async def _check_my_jobs(self, link: Link) -> None:
        """Deliver cancellations, and stop handlers whose job was rescued from under us."""
        if not self._running:
            return
        asked = time.monotonic()
        mine = await self._db.my_jobs(link)
        for job in list(self._running.values()):
            seen = mine.get(job.id)
            if seen is None or seen[0] != job.attempt:
                if job.claimed_at < asked:
                    log.warning(
                        "worker=%s event=job_lost job=%d attempt=%d "
                        "reason=no longer locked by this worker; stopping its handler",
                        self.id,
                        job.id,
                        job.attempt,
                    )
                    self._interrupt(job, "lost")
            elif seen[1]:
                log.debug("worker=%s event=cancel job=%d", self.id, job.id)
                self._interrupt(job, "cancel")

    def _rescued(self, rows: list[tuple[str, int, str]]) -> None:
        """Count and log rows (fate, id, kind) that rescue moved back to ready or to dead."""
        if not rows:
            return
        dead = [r for r in rows if r[0] == "dead"]
        for row in dead:
            self._stats.dead(row[2])
        self._counts["rescued"] += len(rows) - len(dead)
        self._counts["dead"] += len(dead)
        log.info(
            "worker=%s event=rescued retried=%d dead=%d ids=%s",
            self.id,
            len(rows) - len(dead),
            len(dead),
            _ids([r[1] for r in rows]),
        )
        self._poke()

    async def _analyze_if_due(self, link: Link) -> None:
        """Refresh the planner's statistics of `jobs`, at most once a minute per worker.

        A role that does not own the table gets a warning from PostgreSQL, not an error.
        """
        if time.monotonic() - self._last_analyze < ANALYZE_AT_MOST_EVERY_S:
            return
        self._last_analyze = time.monotonic()
        await self._db.analyze(link)
        log.info("worker=%s event=analyzed reason=slow_claim", self.id)

    async def _housekeeping(self, link: Link) -> None:
        """On the slow cadence: exhausted rows, stale worker rows, pruning.

        Exhausted rows are looked for here rather than at every heartbeat because finding
        them reads every pending row of the handled kinds.
        """
        self._rescued(await self._db.bury_exhausted(link, self.kinds))
        await self._db.forget_stale_workers(link)
        pruned = await self._db.prune(link, self.settings.retention.total_seconds())
        if pruned:
            log.info("worker=%s event=pruned count=%d", self.id, pruned)

    # ------------------------------------------------------------------- drain

    async def _wait_idle(self, seconds: float) -> bool:
        if not self._running:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                idle = asyncio.ensure_future(self._idle.wait())
                force = asyncio.ensure_future(self._force.wait())
                try:
                    await asyncio.wait({idle, force}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    idle.cancel()
                    force.cancel()
        return not self._running

    async def _drain(self) -> None:
        """Let running jobs finish within the grace, release the rest, write everything."""
        s = self.settings
        if self._running:
            log.info(
                "worker=%s event=draining running=%d grace_s=%g",
                self.id,
                len(self._running),
                s.shutdown_grace,
            )
        if not await self._wait_idle(s.shutdown_grace):
            for job in list(self._running.values()):
                self._interrupt(job, "shutdown")
            if not await self._wait_idle(THREAD_STOP_WAIT_S if not self._force.is_set() else 0.1):
                # Plain handlers that ignore their cancel event: stop waiting for them. The
                # thread runs on, but its job is released so it is not lost.
                for job in list(self._running.values()):
                    log.warning(
                        "worker=%s event=abandoned job=%d reason=handler ignored cancellation",
                        self.id,
                        job.id,
                    )
                    if job.task is not None:
                        job.task.cancel()
                await self._wait_idle(1.0)
        # The flusher finishes its write in flight (a query cut short would leave its connection
        # unusable for the final writes); listener and maintenance are simply cancelled.
        self._closing.set()
        self._flush_wake.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, self._flusher_task, return_exceptions=True)
        self._tasks = []
        await self._final_writes()
        await self._close_links()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker=%s event=stopped", self.id)

    async def _final_writes(self) -> None:
        """Outcomes, statistics, anything still locked by us released, the worker row gone."""
        link = self._flush_link
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FINAL_WRITES_S):
                for attempt in range(FINAL_FLUSH_TRIES):
                    try:
                        if self._outcomes:
                            await self._write_outcomes(link)
                        await self._write_stats(link)
                        # An async handler that swallows its cancellation is still "running":
                        # give its job back rather than leave it locked by a worker that is gone.
                        await self._release_orphans(link, abandoned=True)
                        await self._db.unregister(link)
                        return
                    except psycopg.Error as exc:
                        delay = link.failed(exc)
                        if attempt + 1 < FINAL_FLUSH_TRIES:
                            await asyncio.sleep(delay)
        log.error(
            "worker=%s event=final_flush_failed pending=%d "
            "reason=database unreachable; held jobs will be rescued after the heartbeat timeout",
            self.id,
            len(self._outcomes),
        )

    async def _close_links(self) -> None:
        for link in (*self._claim_links, self._flush_link, self._maint_link):
            await link.close()


def _ids(ids: list[int]) -> str:
    """The first ids of a list, for a log line."""
    return ",".join(map(str, ids[:20])) + (",…" if len(ids) > 20 else "")


async def run_worker(dsn: str, schema: str, registry: Registry, settings: WorkerSettings) -> None:
    """Run a worker with SIGTERM/SIGINT handlers that drain it (a second signal skips the grace)."""
    worker = Worker(dsn, schema, registry, settings)
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, worker.request_stop)
            installed.append(sig)
    try:
        await worker.run()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
