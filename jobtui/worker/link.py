"""One long-lived worker connection that is reopened, with back-off, after it breaks.

Promise kept: no worker statement waits for ever, and a frozen worker's session ends on the
server's side. Every connection has TCP keepalives (a peer that vanished is noticed within
seconds, not after the kernel's two hours) and its own `statement_timeout` and `lock_timeout`,
so a claim stuck on a half-open connection cannot hold its slots for ever and a housekeeping
statement blocked by a lock is cut short; and server-side keepalives, `tcp_user_timeout` and
`idle_in_transaction_session_timeout` (frozen_session_settings) end the session of a worker
that froze (SIGSTOP, a VM pause, a network split) within its heartbeat timeout. Behind PgBouncer
the timeouts are not set (a session SET would leak to the pooler's other clients): set them on
the worker's role instead; the warning at start says so.

The worker keeps a few of these (claims, flush, liveness, housekeeping) rather than a pool:
each has one job, so statements on one never wait behind another's.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psycopg

from jobtui.db import abehind_pooler, aconnect, describe_error
from jobtui.sql import queries

log = logging.getLogger("jobtui.worker")

MAX_BACKOFF_S = 5.0
# libpq keepalives: probe after 10 s idle, every 5 s, give up after 3 misses; and give up on
# unacknowledged writes after 30 s (tcp_user_timeout, in ms).
KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


def frozen_session_settings(frozen_after: float) -> dict[str, str]:
    """Server-side settings that end a frozen worker's session, and so its locks, within
    `frozen_after` seconds (its heartbeat timeout): a transaction idle for half of it; TCP
    keepalives (idle a quarter, then 2 probes an eighth apart: at most 1/2 of it, or 3 s for
    timeouts under 8 s, whole seconds being the kernel's unit); unacknowledged data for half
    of it. Values as set_config() takes them."""
    half_ms = max(1000, int(frozen_after * 500))
    return {
        "idle_in_transaction": f"{half_ms}ms",
        "keepalives_idle": str(max(1, int(frozen_after / 4))),
        "keepalives_interval": str(max(1, int(frozen_after / 8))),
        "keepalives_count": "2",
        "tcp_user_timeout": str(half_ms),
    }


async def open_connection(dsn: str, app: str) -> psycopg.AsyncConnection:
    """An autocommit connection with keepalives and a bounded connect timeout; behind a
    transaction pooler, without prepared statements (jobtui.db decides)."""
    return await aconnect(dsn, app=app, extra=dict(KEEPALIVES))


_warned_pooled = False


def _warn_pooled_once() -> None:
    global _warned_pooled
    if not _warned_pooled:
        _warned_pooled = True
        log.warning(
            "event=behind_pooler prepared_statements=off session_timeouts=not_set "
            "reason=a session SET would leak to other clients of the pooler; bound the "
            "worker role's statements on the server instead (ALTER ROLE … SET "
            "statement_timeout / lock_timeout)"
        )


def is_transient(exc: BaseException) -> bool:
    """True for errors a retry can cure: connection loss, timeouts, lock waits, deadlocks,
    serialization failures, server shutdown or lack of resources. Anything else (a constraint,
    a missing privilege, bad data) fails again the same way."""
    state = getattr(exc, "sqlstate", None)
    if state is None:  # raised by the client: the connection broke or could not be made
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state[:2] in {"08", "40", "53", "57", "58"} or state == "55P03"


class Link:
    """An autocommit AsyncConnection opened on first use and after a failure."""

    def __init__(
        self,
        dsn: str,
        name: str,
        *,
        statement_timeout: float,
        lock_timeout: float = 0.0,
        frozen_after: float = 30.0,
    ) -> None:
        self.dsn = dsn
        self.name = name
        self.failures = 0
        self.statement_timeout = statement_timeout
        self.lock_timeout = lock_timeout
        self.frozen_after = frozen_after  # the worker's heartbeat timeout
        self._conn: psycopg.AsyncConnection | None = None

    async def connection(self) -> psycopg.AsyncConnection:
        if self._conn is None or self._conn.closed:
            conn = await open_connection(self.dsn, f"jobtui worker ({self.name})")
            try:
                if await abehind_pooler(conn):
                    # A session SET through a transaction pooler lands on one server
                    # connection and stays there for whichever client gets it next: it would
                    # not bound our statements and would bound the application's.
                    _warn_pooled_once()
                else:
                    await conn.execute(
                        queries().worker_session_timeouts,
                        {
                            "statement_timeout": f"{int(self.statement_timeout * 1000)}ms",
                            "lock_timeout": f"{int(self.lock_timeout * 1000)}ms",
                            **frozen_session_settings(self.frozen_after),
                        },
                    )
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
        return self._conn

    async def fetch(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty when it returns none)."""
        conn = await self.connection()
        cur = await conn.execute(sql, params)
        rows = await cur.fetchall() if cur.description is not None else []
        if self.failures:
            log.info("db=%s event=reconnected after=%d failures", self.name, self.failures)
            self.failures = 0
        return rows

    def failed(self, exc: BaseException) -> float:
        """Note a failure; returns how long to wait before trying again."""
        self.failures += 1
        if self.failures == 1 or self.failures % 20 == 0:
            log.warning(
                "db=%s event=db_error failures=%d error=%s",
                self.name,
                self.failures,
                describe_error(exc),
            )
        conn = self._conn
        if conn is not None and (conn.broken or conn.closed):
            self._conn = None
        return min(MAX_BACKOFF_S, 0.05 * 2 ** min(self.failures, 10))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):  # closing a dead connection may fail
                await conn.close()
