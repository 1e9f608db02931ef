"""The heartbeat, and what the database says about the jobs this worker runs.

Promises kept: liveness is judged by the owner's own settings (the heartbeat writes this
worker's interval and timeout into its `workers` row, and rescuers read them there), and
nothing the worker does for housekeeping can delay its heartbeat: this task has its own
connection, does nothing but heartbeat and check its jobs, and every statement it runs is cut
short by a statement timeout well under the heartbeat timeout, then tried again.

Checking its jobs delivers cancellations (at once: the listener wakes this task on a 'cancel'
NOTIFY; without a LISTEN that works, every CANCEL_POLL_S while jobs run) and stops handlers
whose job was rescued from under this worker (seen when the database no longer says this
worker holds that attempt).

Self-fencing: a worker that cannot heartbeat (its liveness connection cannot reconnect) will be
judged dead by others, who rescue its jobs. So once its last successful heartbeat is overdue
(older than halfway between `interval` and `timeout`) it stops claiming and starting jobs
(`fenced`), and once it is older than
`timeout` it stops its running handlers as lost: their rows are or will be rescued (an
outcome for a rescued row is refused), and one still its own is recorded as a failed attempt
(HeartbeatLost, as a rescue records it: a handler that freezes its worker every time still
reaches its attempt limit). It claims again after its next successful heartbeat.

Operator requests (quiet, resume, stop; jobtui.worker.control) are read after every heartbeat
and at once when the listener hears this worker's `control:` NOTIFY (`note_control`), on this
task's own connection, so a worker that hears no NOTIFY still acts within one interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from jobtui.worker.control import Control
from jobtui.worker.dispatcher import Dispatcher
from jobtui.worker.link import Link
from jobtui.worker.statements import WorkerDB
from jobtui.worker.stats import StatsBuffer

log = logging.getLogger("jobtui.worker")
NEVER = float("inf")
# Without a working LISTEN (behind a transaction pooler without --listen-dsn, or while the
# LISTEN connection is down), how often this worker's running jobs are checked for cancels:
# a cancel then reaches its handler within this plus one indexed query (issue 25 item 6).
CANCEL_POLL_S = 0.5


class Liveness:
    """Heartbeat every `interval` seconds and check this worker's jobs."""

    def __init__(
        self,
        db: WorkerDB,
        link: Link,
        dispatcher: Dispatcher,
        stats: StatsBuffer,
        interval: float,
        row: Callable[[], dict[str, Any]],
        timeout: float = NEVER,
        control: Control | None = None,
    ) -> None:
        self.db = db
        self.link = link
        self.dispatcher = dispatcher
        self.stats = stats
        self.interval = interval
        self.timeout = timeout
        self.fence_after = interval + (timeout - interval) / 2
        self.last_beat = time.monotonic()  # of the last heartbeat that succeeded
        self._lost_all = False  # handlers were stopped as lost since the last good heartbeat
        self._deadline: asyncio.TimerHandle | None = None
        self.row = row  # the worker's `workers` row as heartbeat parameters
        self.check_jobs = asyncio.Event()
        self._cancel_noted = 0.0  # monotonic time of the last 'cancel' NOTIFY
        self.control = control
        self._control_due = False
        # Whether a cancel NOTIFY reaches this worker (the listener's Wakeups says); while not,
        # this worker's jobs are checked every CANCEL_POLL_S while any runs.
        self.listening: Callable[[], bool] = lambda: True

    def note_control(self) -> None:
        """An operator changed this worker's request: read it now."""
        self._control_due = True
        self.check_jobs.set()

    def note_cancel(self) -> None:
        """A cancel committed somewhere: check this worker's jobs now."""
        self._cancel_noted = time.monotonic()
        self.check_jobs.set()

    def claimed(self, claim_started: float) -> None:
        """A claim that began at `claim_started` returned jobs. A cancel NOTIFY since then may
        be for one of them (the claim skips only cancels committed before its snapshot), and
        the check it caused ran before they were known: check again."""
        if self._cancel_noted >= claim_started:
            self.check_jobs.set()

    async def beat(self) -> None:
        """One heartbeat; it also tells the statistics what time the server says it is."""
        before, sent = time.time(), time.monotonic()
        server = await self.db.heartbeat(self.link, self.row())
        self.stats.set_server_time(server, before, time.time())
        was_fenced = self.fenced()
        self.last_beat = sent
        if self.timeout != NEVER:
            # A timer, not the loop below: a beat waiting on a lock must not delay this check.
            if self._deadline is not None:
                self._deadline.cancel()
            loop = asyncio.get_running_loop()  # its clock is time.monotonic
            self._deadline = loop.call_at(sent + self.timeout + 0.01, self._stop_if_lost)
        if was_fenced or self._lost_all:
            self._lost_all = False
            log.warning("worker=%s event=heartbeat_restored; claiming again", self.db.worker_id)
            self.dispatcher.poke()

    def fenced(self) -> bool:
        """True while others may soon judge this worker dead: claim and start nothing."""
        return time.monotonic() - self.last_beat > self.fence_after

    def _stop_if_lost(self) -> None:
        """Past our own timeout without a heartbeat: our jobs are or will be rescued."""
        age = time.monotonic() - self.last_beat
        if age <= self.timeout or self._lost_all:
            return
        self._lost_all = True
        log.error(
            "worker=%s event=heartbeat_lost age_s=%.1f timeout_s=%g running=%d "
            "reason=no heartbeat within this worker's own timeout: its jobs may be rescued; "
            "stopping its handlers as lost and claiming nothing until a heartbeat succeeds",
            self.db.worker_id,
            age,
            self.timeout,
            len(self.dispatcher.running),
        )
        self.dispatcher.interrupt_all("lost")

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            if self._deadline is not None:
                self._deadline.cancel()

    async def _run(self) -> None:
        next_beat = time.monotonic() + self.interval
        while True:
            try:
                if self.check_jobs.is_set():
                    self.check_jobs.clear()
                    await self.check_my_jobs()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.interval
                    await self.beat()
                    await self.check_my_jobs()
                    self._control_due = True
                if self._control_due and self.control is not None:
                    self._control_due = False
                    await self.control.check(self.link)
            except psycopg.Error as exc:
                # Retried within half an interval whatever the link's back-off says: a back-off
                # grown past the heartbeat timeout (a server restart) got live workers' jobs
                # rescued and run twice at once (seen in tests/test_chaos.py).
                delay = min(self.link.failed(exc), self.interval / 2)
                next_beat = min(next_beat, time.monotonic() + delay)
            except Exception:
                log.exception("worker=%s event=liveness_error", self.db.worker_id)
            wake_at = next_beat
            poll = bool(self.dispatcher.running) and not self.listening()
            if poll:
                wake_at = min(wake_at, time.monotonic() + CANCEL_POLL_S)
            try:
                async with asyncio.timeout(max(0.0, wake_at - time.monotonic())):
                    await self.check_jobs.wait()
            except TimeoutError:
                if poll:
                    self.check_jobs.set()  # no NOTIFY can say a cancel came: look

    async def check_my_jobs(self) -> None:
        """Deliver cancellations, and stop handlers whose attempt is no longer ours."""
        running = self.dispatcher.running
        if not running:
            return
        asked = time.monotonic()
        mine = await self.db.my_jobs(self.link)
        for job in list(running.values()):
            seen = mine.get(job.id)
            if seen is None or seen[0] != job.attempt:
                if job.claimed_at < asked and job.why is None:
                    log.warning(
                        "worker=%s event=job_lost job=%d attempt=%d "
                        "reason=no longer locked by this worker; stopping its handler",
                        self.db.worker_id,
                        job.id,
                        job.attempt,
                    )
                    self.dispatcher.interrupt(job, "lost")
            elif seen[1]:
                self.dispatcher.interrupt(job, "cancel")
