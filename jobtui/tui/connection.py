"""The console's one database connection: opened lazily, used by one operation at a time,
dropped on failure and reopened with back-off by the caller's next attempt.

Every read and write of the console goes through `Link.run(fn, ...)`, where `fn` is one of the
engine's functions (`browse`, `metrics`, `ops`, `export`) taking `(conn, schema, ...)`. A lock
serialises operations so a refresh never interleaves with an action inside a transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from jobtui.db import aconnect, describe_error

APPLICATION_NAME = "jobtui-console"
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)

T = TypeVar("T")


class LinkDown(Exception):
    """The database could not be reached; `message` is one line for the banner."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def live_target(conn: psycopg.AsyncConnection) -> str:
    """`user@host:port/database` as the server connection reports it (`conn.info`), not as a
    DSN string says: libpq's environment, service files and defaults are all resolved there."""
    info = conn.info
    host = info.host or "local"
    if host.startswith("/"):
        host = "local"  # a Unix socket directory: the server on this machine
    return f"{info.user}@{host}:{info.port}/{info.dbname}"


class Link:
    """Owns the console's autocommit AsyncConnection and its reconnect schedule."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema
        self.conn: psycopg.AsyncConnection | None = None
        self.failures = 0
        self.last_error: str | None = None
        self.next_attempt_at = 0.0
        self.connects = 0
        self.target: str | None = None  # user@host:port/database of the last live connection
        self._lock = asyncio.Lock()

    @property
    def up(self) -> bool:
        return self.conn is not None and not self.conn.closed and self.failures == 0

    def retry_in(self) -> float:
        """Seconds until the next reconnect attempt is allowed (0 when it may go now)."""
        return max(0.0, self.next_attempt_at - time.monotonic())

    async def _ensure(self) -> psycopg.AsyncConnection:
        if self.conn is not None and not self.conn.closed:
            return self.conn
        if self.retry_in() > 0:
            raise LinkDown(self.last_error or "database unreachable")
        try:
            self.conn = await aconnect(self.dsn, app=APPLICATION_NAME)
        except psycopg.Error as exc:
            self._failed(exc)
            raise LinkDown(self.last_error or "database unreachable") from None
        self.connects += 1
        self.target = live_target(self.conn)
        return self.conn

    def _failed(self, exc: BaseException) -> None:
        self.last_error = describe_error(exc)
        delay = BACKOFF_S[min(self.failures, len(BACKOFF_S) - 1)]
        self.failures += 1
        self.next_attempt_at = time.monotonic() + delay

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Call `fn(conn, schema, *args, **kwargs)`; a lost connection becomes LinkDown.

        Errors that are not about the connection (a permission denied, a bad filter) are
        raised as they are, and the connection is kept.
        """
        async with self._lock:
            conn = await self._ensure()
            try:
                result = await fn(conn, self.schema, *args, **kwargs)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if conn.closed or conn.broken or isinstance(exc, psycopg.InterfaceError):
                    await self._drop()
                    self._failed(exc)
                    raise LinkDown(self.last_error or "database unreachable") from None
                raise
            self.failures = 0
            self.next_attempt_at = 0.0
            return result

    async def _drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            # Closing a broken connection may fail; it is gone either way.
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
