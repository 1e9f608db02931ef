"""LISTEN on the schema's channel: wake the dispatcher on new work, liveness on a cancel; and
find out, rather than assume, whether LISTEN works.

Promise kept: a cancel reaches a live worker at once (the 'cancel' NOTIFY wakes the liveness
task, which checks this worker's jobs), not at its next heartbeat. Anything sent while the
connection was down is assumed missed: on every (re)connect all are woken. An operator's
request for this worker (`control:<worker id>`, quiet/resume/stop) wakes liveness to read it.

A LISTEN can be connected and hear nothing: through a transaction pooler (PgBouncer's
`pool_mode = transaction`) the LISTEN stays on whichever server connection ran it, and
NOTIFYs never come back. So the prober sends `probe:<worker id>:<n>` from ANOTHER connection
(the liveness one; a NOTIFY sent on the listening connection could come back through the same
server connection and prove nothing) right after LISTEN and then every PROBE_EVERY_S. A probe
not heard within PROBE_WAIT_S, or the LISTEN connection being down, switches the worker to
polling every NO_LISTEN_POLL_S (or its poll interval if shorter); one warning says so, the
`workers` row says so (wakeup_mode, wakeup_note), and a later probe heard switches it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import psycopg
from psycopg import sql as pgsql

from jobtui.db import describe_error
from jobtui.worker.link import open_connection

log = logging.getLogger("jobtui.worker")

PROBE_EVERY_S = 30.0
PROBE_WAIT_S = 2.0
NO_LISTEN_POLL_S = 0.25
PROBE_PREFIX = "probe:"
CONTROL_PREFIX = "control:"  # jobtui.worker_control's NOTIFY: "control:<worker id>"


class Wakeups:
    """How this worker is woken right now; written into its `workers` row by the heartbeat."""

    def __init__(self, worker_id: str, poll_interval: float, listen_dsn_given: bool) -> None:
        self.worker_id = worker_id
        self.poll_interval = poll_interval
        self.listen_dsn_given = listen_dsn_given
        self.mode = "listen"
        self.note: str | None = None
        self.connected = False
        self.last_wakeup_at: datetime | None = None
        self.heard_seq = 0
        self.heard = asyncio.Event()  # a probe of ours came back
        self.reconnected = asyncio.Event()  # LISTEN (re)connected: probe at once
        self.on_change: Callable[[], None] = lambda: None

    @property
    def poll_s(self) -> float:
        """How long the claim loop waits for a wake-up before it looks anyway."""
        if self.mode == "listen":
            return self.poll_interval
        return min(self.poll_interval, NO_LISTEN_POLL_S)

    def hears_notifies(self) -> bool:
        """True once a probe of ours came back over a LISTEN still connected and still judged
        working: only then does a cancel NOTIFY reach this worker."""
        return self.connected and self.mode == "listen" and self.heard_seq > 0

    def woken(self) -> None:
        self.last_wakeup_at = datetime.now(UTC)

    def set_mode(self, mode: str, note: str | None) -> None:
        if (mode, note) == (self.mode, self.note):
            return
        self.mode, self.note = mode, note
        if mode == "polling":
            log.warning(
                "worker=%s event=listen_unusable wakeup=polling poll_s=%g reason=%s",
                self.worker_id,
                self.poll_s,
                note,
            )
        else:
            log.info("worker=%s event=listen_works wakeup=listen", self.worker_id)
        self.on_change()

    def row(self) -> dict[str, object]:
        return {
            "wakeup_mode": self.mode,
            "wakeup_note": self.note,
            "listen_connected": self.connected,
            "last_wakeup_at": self.last_wakeup_at,
            "poll_interval_s": self.poll_s,
        }


async def listen(
    dsn: str,
    channel: str,
    state: Wakeups,
    on_work: Callable[[], None],
    on_cancel: Callable[[], None],
    on_limits: Callable[[], None] = lambda: None,
    on_control: Callable[[], None] = lambda: None,
) -> None:
    """Run until cancelled, reconnecting with back-off. `on_control` runs when an operator
    changed this worker's request (a `control:<worker id>` NOTIFY, jobtui.worker_control)."""
    failures = 0
    mine = f"{PROBE_PREFIX}{state.worker_id}:"
    control = f"{CONTROL_PREFIX}{state.worker_id}"
    while True:
        conn: psycopg.AsyncConnection | None = None
        try:
            conn = await open_connection(dsn, "jobtui worker (listen)")
            await conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
            if failures:
                log.info("worker=%s event=listen_reconnected", state.worker_id)
            failures = 0
            state.connected = True
            state.reconnected.set()
            on_work()
            on_cancel()
            on_control()
            async for note in conn.notifies():
                payload = note.payload
                if payload.startswith(PROBE_PREFIX):
                    if payload.startswith(mine):
                        state.woken()
                        with contextlib.suppress(ValueError):
                            state.heard_seq = max(state.heard_seq, int(payload[len(mine) :]))
                        state.heard.set()
                    continue  # another worker's probe: no work in it
                if payload.startswith(CONTROL_PREFIX):
                    if payload == control:
                        state.woken()
                        on_control()
                    continue  # a request for another worker: no work in it
                state.woken()
                if payload == "cancel":
                    on_cancel()
                elif payload == "limits":
                    on_limits()  # an operator changed a kind's limits; also wakes
                else:
                    # A kind, 'bulk', 'resume', 'requeue' …: there may be work. An empty claim
                    # costs one indexed query, so anything but 'cancel' wakes.
                    on_work()
                    # The claim task on_work started runs now, before this task goes back to
                    # reading the connection (psycopg's notifies() does ~0.1 ms of work
                    # before it waits): the claim is sent that much sooner.
                    await asyncio.sleep(0)
        except psycopg.Error as exc:
            failures += 1
            state.connected = False
            if failures == 1:
                log.warning(
                    "worker=%s event=listen_lost error=%s", state.worker_id, describe_error(exc)
                )
                state.set_mode("polling", f"LISTEN connection lost: {describe_error(exc)}")
            await asyncio.sleep(min(5.0, 0.05 * 2 ** min(failures, 10)))
        except Exception:
            state.connected = False
            log.exception("worker=%s event=listen_error", state.worker_id)
            await asyncio.sleep(1.0)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()


async def probe(
    state: Wakeups, send: Callable[[str], Awaitable[object]], every: float = PROBE_EVERY_S
) -> None:
    """Send self-NOTIFY probes (through `send`, on another connection) and set the mode from
    whether they are heard. Runs until cancelled."""
    seq = 0
    while True:
        if state.connected:
            seq += 1
            state.heard.clear()
            try:
                await send(f"{PROBE_PREFIX}{state.worker_id}:{seq}")
            except psycopg.Error:
                pass  # the sending connection is down: try again at the next round
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PROBE_WAIT_S):
                        while state.heard_seq < seq:
                            await state.heard.wait()
                            state.heard.clear()
                if state.heard_seq >= seq:
                    state.set_mode("listen", None)
                elif state.connected:
                    where = (
                        "the --listen-dsn connection"
                        if state.listen_dsn_given
                        else "the worker's connection (behind a transaction pooler? give "
                        "--listen-dsn a session-mode DSN)"
                    )
                    state.set_mode(
                        "polling",
                        f"LISTEN hears nothing: a self-NOTIFY probe was not heard within "
                        f"{PROBE_WAIT_S:g}s on {where}",
                    )
        # Wait for the next round, or for a (re)connect, which asks for a probe at once.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(every):
                await state.reconnected.wait()
        state.reconnected.clear()
