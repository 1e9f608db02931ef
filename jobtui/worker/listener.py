"""LISTEN on the schema's channel: wake the dispatcher on new work, liveness on a cancel.

Promise kept: a cancel reaches a live worker at once (the 'cancel' NOTIFY wakes the liveness
task, which checks this worker's jobs), not at its next heartbeat. Anything sent while the
connection was down is assumed missed: on every (re)connect both are woken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql as pgsql

from jobtui.db import describe_error
from jobtui.worker.link import open_connection

log = logging.getLogger("jobtui.worker")


async def listen(
    dsn: str,
    channel: str,
    worker_id: str,
    on_work: Callable[[], None],
    on_cancel: Callable[[], None],
) -> None:
    """Run until cancelled, reconnecting with back-off."""
    failures = 0
    while True:
        conn: psycopg.AsyncConnection | None = None
        try:
            conn = await open_connection(dsn, "jobtui worker (listen)")
            await conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
            if failures:
                log.info("worker=%s event=listen_reconnected", worker_id)
            failures = 0
            on_work()
            on_cancel()
            async for note in conn.notifies():
                if note.payload == "cancel":
                    on_cancel()
                else:
                    # A kind, 'bulk', 'resume', 'requeue' …: there may be work. An empty claim
                    # costs one indexed query, so anything but 'cancel' wakes.
                    on_work()
        except psycopg.Error as exc:
            failures += 1
            if failures == 1:
                log.warning("worker=%s event=listen_lost error=%s", worker_id, describe_error(exc))
            await asyncio.sleep(min(5.0, 0.05 * 2 ** min(failures, 10)))
        except Exception:
            log.exception("worker=%s event=listen_error", worker_id)
            await asyncio.sleep(1.0)
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
