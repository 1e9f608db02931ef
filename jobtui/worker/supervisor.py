"""The worker as a whole: start its parts, stop them, drain.

Promise kept: a stop loses nothing. SIGTERM/SIGINT (`run_worker`) or `request_stop()`: claiming
stops; running jobs get `shutdown_grace` seconds; then they are cancelled (async handlers by
`task.cancel()`, plain ones by their `current_job().cancelled` event) and *released*: back to
ready with the attempt given back (the job did not fail; the worker chose to stop it), or
cancelled if a cancel was requested. A handler that ignores its cancellation is abandoned: its
job is released all the same, never left locked by a worker that is gone. Then the last
outcomes and statistics are written and the `workers` row removed. A second stop request skips
what is left of the grace. An operator's `jobtui workers stop` (jobtui.worker.control) runs the
same stop; `quiet` only stops claiming (running jobs finish, heartbeats go on) until `resume`.

The parts, each on its own connection and task: the dispatcher (claims and handlers, two claim
connections), the flusher (outcomes and statistics), liveness (heartbeat, cancellations), the
housekeeper (rescue, sweeps, pruning, ANALYZE, samples) and the listener (NOTIFY). Database
errors never stop a running worker: each connection is reopened with back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from jobtui.db import acheck_schema, describe_error
from jobtui.limits import sync_kind_limits
from jobtui.registry import HandlerSpec, Registry
from jobtui.schedules import sync_schedules
from jobtui.sql import notify_channel, queries
from jobtui.worker.control import Control
from jobtui.worker.dispatcher import Dispatcher
from jobtui.worker.flusher import FLUSH_LOCK_TIMEOUT_S, Flusher
from jobtui.worker.housekeeper import Housekeeper
from jobtui.worker.link import Link
from jobtui.worker.listener import Wakeups, listen, probe
from jobtui.worker.liveness import Liveness
from jobtui.worker.outcomes import short_ids
from jobtui.worker.settings import WorkerSettings
from jobtui.worker.statements import WorkerDB

log = logging.getLogger("jobtui.worker")

# How long plain (thread) handlers get, after their cancel event is set at shutdown, to notice.
THREAD_STOP_WAIT_S = 2.0
LISTEN_DSN_ENV = "JOBTUI_LISTEN_DSN"
FINAL_FLUSH_TRIES = 5
FINAL_WRITES_S = 15.0  # at most this long trying to write outcomes at shutdown
# A VACUUM of `jobs` (housekeeper.py) may take minutes on a large table; bounded all the same.
VACUUM_TIMEOUT_S = 600.0


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
        self._specs: dict[str, HandlerSpec] = {k: registry.get(k) for k in self.kinds}  # type: ignore[misc]
        # Declared limits of the kinds it handles, and the schedules of those kinds (a
        # schedule's kind may be handled by another worker of the same app: it is enqueued by
        # whichever workers declare it, once per tick however many).
        self.kind_limits = [lim for lim in registry.limits() if lim.kind in self._specs]
        self.schedules = registry.schedules()
        self._db = WorkerDB(schema, self.id)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_early = False
        self._force_early = False
        self._dispatcher: Dispatcher | None = None

    # ---------------------------------------------------------------- control

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
        log.info("worker=%s event=stopping running=%d", self.id, self.running_count)
        self._stopping.set()
        if self._dispatcher is not None:
            self._dispatcher.stop()

    @property
    def running_count(self) -> int:
        return len(self._dispatcher.running) if self._dispatcher is not None else 0

    def _row(self) -> dict[str, Any]:
        """This worker's `workers` row, as heartbeat parameters."""
        d, f, s = self._dispatcher, self._flusher, self.settings
        assert d is not None
        return {
            "host": self.host,
            "pid": self.pid,
            "kinds": self.kinds,
            "concurrency": s.concurrency,
            "running": len(d.running),
            "heartbeat_interval": s.heartbeat_interval,
            "heartbeat_timeout": s.heartbeat_timeout,
            "abandoned": d.threads.abandoned,
            "outcome_errors": f.outcome_errors,
            "last_outcome_error": f.last_outcome_error,
            **self._wakeups.row(),
        }

    # -------------------------------------------------------------------- run

    async def run(self) -> None:
        """Work until a stop is requested, then drain and return.

        Raises the connection error (or `SchemaMissing`) when the database cannot be reached
        or lacks jobtui's tables at start; after that, database errors are retried forever.
        """
        s = self.settings
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._force = asyncio.Event()
        work, frozen = s.statement_timeout, s.heartbeat_timeout
        claim_links = [Link(self.dsn, "claim", statement_timeout=work, frozen_after=frozen)]
        if s.concurrency > 1:
            claim_links.append(
                Link(self.dsn, "claim 2", statement_timeout=work, frozen_after=frozen)
            )
        flush_link = Link(
            self.dsn,
            "flush",
            statement_timeout=work,
            lock_timeout=FLUSH_LOCK_TIMEOUT_S,
            frozen_after=frozen,
        )
        beat = max(0.2, s.heartbeat_timeout / 3)
        live_link = Link(
            self.dsn, "liveness", statement_timeout=beat, lock_timeout=beat, frozen_after=frozen
        )

        def chores_link(name: str) -> Link:
            """A link bounded as housekeeping chores are."""
            return Link(
                self.dsn,
                name,
                statement_timeout=s.housekeeping_timeout,
                lock_timeout=s.housekeeping_lock_timeout,
                frozen_after=frozen,
            )

        house_link = chores_link("housekeeping")
        # VACUUM of `jobs` where autovacuum is off (housekeeper.py): a long statement, so on a
        # connection of its own, opened only while it runs; and its watch (does it hold up a
        # lock that stops the queue?) on another, which reads catalogs only and so never
        # queues behind that lock as the housekeeping link's statements on `jobs` would.
        vacuum_link = Link(
            self.dsn,
            "vacuum",
            statement_timeout=VACUUM_TIMEOUT_S,
            lock_timeout=s.housekeeping_lock_timeout,
            frozen_after=frozen,
        )
        vacuum_links = (vacuum_link, chores_link("vacuum watch"))
        self._links = [*claim_links, flush_link, live_link, house_link, *vacuum_links]
        self._flusher = Flusher(self.id, self._db, flush_link, s.stats_flush_interval)
        self._housekeeper: Housekeeper | None = None
        d = self._dispatcher = Dispatcher(
            self.id, s, self._specs, self._db, claim_links, self._flusher, self._want_analyze
        )
        control = Control(self.schema, self.id, d.poke, self.request_stop)
        self._liveness = live = Liveness(
            self._db,
            live_link,
            d,
            self._flusher.stats,
            s.heartbeat_interval,
            self._row,
            s.heartbeat_timeout,
            control,
        )
        d.on_claimed = live.claimed
        # Claim nothing while the heartbeat is overdue or an operator quieted this worker.
        d.fenced = lambda: live.fenced() or control.quiet
        listen_dsn = s.listen_dsn or os.environ.get(LISTEN_DSN_ENV) or self.dsn
        self._wakeups = Wakeups(self.id, s.poll_interval, listen_dsn != self.dsn)
        self._wakeups.on_change = lambda: d.set_poll_interval(self._wakeups.poll_s)
        live.listening = self._wakeups.hears_notifies
        self._housekeeper = Housekeeper(
            self._db,
            house_link,
            s,
            d,
            self._flusher.stats,
            [x.name for x in self.schedules],
            vacuum_links,
        )
        try:
            await acheck_schema(await live_link.connection(), self.schema)
            await self._liveness.beat()  # registered before the first claim
            await self._sync_declarations(house_link)
            # Opened now, not on first use: a connection opened by the first job to need it
            # would add its set-up to that job's pickup.
            for link in (*claim_links, flush_link, house_link):
                await link.connection()
        except BaseException:
            await self._close()
            raise
        log.info(
            "worker=%s event=started kinds=%s concurrency=%d heartbeat_s=%g timeout_s=%g",
            self.id,
            ",".join(self.kinds),
            s.concurrency,
            s.heartbeat_interval,
            s.heartbeat_timeout,
        )
        if self._stop_early:
            self._on_stop()
            if self._force_early:
                self._force.set()
        self._flusher_task = asyncio.create_task(self._flusher.run(), name="jobtui-flush")
        self._tasks = [
            asyncio.create_task(self._liveness.run(), name="jobtui-liveness"),
            asyncio.create_task(self._housekeeper.run(), name="jobtui-housekeeper"),
            asyncio.create_task(
                listen(
                    listen_dsn,
                    notify_channel(self.schema),
                    self._wakeups,
                    d.poke,
                    self._liveness.note_cancel,
                    d.limits_changed,
                    self._liveness.note_control,
                ),
                name="jobtui-listen",
            ),
            asyncio.create_task(
                # On the liveness link: one tiny statement every 30 s (the housekeeping link
                # runs transactions a probe would land in; the flush link must not have a
                # statement cut short at shutdown).
                probe(self._wakeups, lambda payload: self._db.probe(live_link, payload)),
                name="jobtui-probe",
            ),
        ]
        try:
            await d.run()
        finally:
            await self._drain()

    async def _sync_declarations(self, link: Link) -> None:
        """Write the handlers' declared limits and the app's schedules (before any claim), and
        their settings for the console's kind screen (`kind_handlers`)."""
        conn = await link.connection()
        handlers = [
            {
                "kind": k,
                "max_attempts": spec.max_attempts,
                "timeout_s": spec.timeout,
                "backoff_base_s": spec.backoff_base,
                "backoff_cap_s": spec.backoff_cap,
            }
            for k, spec in self._specs.items()
        ]
        try:
            await conn.execute(
                queries(self.schema).kind_declare_handlers,
                {"rows": Jsonb(handlers), "worker": self.id},
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            # Never a reason not to work; but the handlers' max_attempts is the one rule's
            # input (jobtui_max_attempts reads kind_handlers): without it the rows' apply.
            log.warning(
                "worker=%s event=handlers_not_recorded error=%s reason=the handlers' "
                "max_attempts are not applied (each job's own is); grant INSERT, UPDATE on "
                "kind_handlers to the worker's role (jobtui roles does)",
                self.id,
                describe_error(exc),
            )
        changed = await sync_kind_limits(conn, self.schema, self.kind_limits)
        if changed:
            log.info("worker=%s event=limits_declared kinds=%s", self.id, ",".join(changed))
        names = await sync_schedules(conn, self.schema, self.schedules)
        if names:
            log.info("worker=%s event=schedules_declared names=%s", self.id, ",".join(names))

    def _want_analyze(self) -> None:
        if self._housekeeper is not None:
            self._housekeeper.want_analyze()

    # ------------------------------------------------------------------ drain

    async def _wait_idle(self, seconds: float) -> bool:
        d = self._dispatcher
        assert d is not None
        if not d.running:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                idle = asyncio.ensure_future(d.idle.wait())
                force = asyncio.ensure_future(self._force.wait())
                try:
                    await asyncio.wait({idle, force}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    idle.cancel()
                    force.cancel()
        return not d.running

    async def _drain(self) -> None:
        """Let running jobs finish within the grace, release the rest, write everything."""
        d, s = self._dispatcher, self.settings
        assert d is not None
        if d.running:
            log.info(
                "worker=%s event=draining running=%d grace_s=%g",
                self.id,
                len(d.running),
                s.shutdown_grace,
            )
        if not await self._wait_idle(s.shutdown_grace):
            d.interrupt_all("shutdown")
            if not await self._wait_idle(THREAD_STOP_WAIT_S if not self._force.is_set() else 0.1):
                # Handlers that ignore their cancellation: stop waiting for them. A thread runs
                # on, but its job is released so it is not lost.
                for job in list(d.running.values()):
                    log.warning(
                        "worker=%s event=abandoned job=%d reason=handler ignored cancellation",
                        self.id,
                        job.id,
                    )
                    if job.task is not None:
                        job.task.cancel()
                await self._wait_idle(1.0)
        # Attempts whose thread overran its timeout keep their row until that thread ends; the
        # worker stops now, so their outcome (the timeout, or a cancel) is written with the rest.
        d.settle_lingering()
        # The flusher finishes its write in flight (a query cut short would leave its connection
        # unusable for the final writes); the other tasks are simply cancelled.
        self._flusher.closing.set()
        self._flusher.wake()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, self._flusher_task, return_exceptions=True)
        self._tasks = []
        await self._final_writes()
        await self._close()
        d.shutdown_executor()
        self._db.close()
        log.info("worker=%s event=stopped", self.id)

    async def _final_writes(self) -> None:
        """Outcomes, statistics, anything still locked by us released, the worker row gone."""
        f, d = self._flusher, self._dispatcher
        assert d is not None
        error: BaseException | None = None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FINAL_WRITES_S):
                for attempt in range(FINAL_FLUSH_TRIES):
                    try:
                        if f.has_pending():
                            await f.write_outcomes(held_back_too=True)
                        await f.write_stats()
                        # An async handler that swallows its cancellation is still "running":
                        # give its job back rather than leave it locked by a worker that is gone.
                        await d.release_orphans(f.link, abandoned=True)
                        await self._db.unregister(f.link)
                        if f.has_pending():
                            log.warning(
                                "worker=%s event=outcomes_unwritten ids=%s reason=rows held by "
                                "another session; they will be rescued and run again",
                                self.id,
                                short_ids(f.pending_ids()),
                            )
                        return
                    except psycopg.Error as exc:
                        error = exc
                        delay = f.link.failed(exc)
                        if attempt + 1 < FINAL_FLUSH_TRIES:
                            await asyncio.sleep(delay)
        log.error(
            "worker=%s event=final_flush_failed pending=%d error=%s "
            "reason=held jobs will be rescued after the heartbeat timeout",
            self.id,
            len(f.outcomes),
            describe_error(error) if error is not None else "timed out",
        )

    async def _close(self) -> None:
        for link in self._links:
            await link.close()


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
