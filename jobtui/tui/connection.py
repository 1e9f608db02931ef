"""The console's one database connection: opened lazily, used by one operation at a time,
dropped on failure and reopened with back-off by the caller's next attempt.

Every read and write of the console goes through `Link.run(fn, ...)`, where `fn` is one of the
engine's functions (`browse`, `metrics`, `ops`, `export`) taking `(conn, schema, ...)`. A lock
serialises operations so a refresh never interleaves with an action inside a transaction.

The console watches its own cost (issue 12). Every statement runs under `statement_timeout_s`
where the session is the console's own (`SET statement_timeout`; not behind a transaction
pooler, where a session setting would stay on a server connection for other clients). Each
read of a refresh (`async with link.refresh():` around a pane's reads) is also bounded on the
client, so it holds behind a pooler too: a read still running at the limit is cancelled in the
server (psycopg cancels the query of a cancelled task). Either way it raises `RefreshDropped`:
the refresh is dropped and said so, never left running under the next. Operator actions and
exports are not refreshes: only the per-statement limit applies to them, so a bulk action of
many short batches is never cut in the middle. `last_db_ms` is the time the last refresh spent
in the database (wall time of its reads), for the status line.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg

from jobtui.db import abehind_pooler, aconnect, describe_error
from jobtui.sql import queries

APPLICATION_NAME = "jobtui-console"
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)
# Long enough for any console read at millions of rows (benchmarks/console_scale.py: well
# under a second), short enough that a stuck one does not hold the console's link for long.
STATEMENT_TIMEOUT_S = 5.0

T = TypeVar("T")

# Set inside `Link.refresh()`: each read of this task (a refresh) is bounded on the client.
_refreshing: contextvars.ContextVar[bool] = contextvars.ContextVar("refreshing", default=False)


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


class RefreshDropped(Exception):
    """An operation ran past the statement timeout and was cancelled; nothing was shown."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.message = f"refresh dropped: took longer than {timeout_s:g} s"
        super().__init__(self.message)


class Link:
    """Owns the console's autocommit AsyncConnection and its reconnect schedule."""

    def __init__(
        self, dsn: str, schema: str, *, statement_timeout_s: float = STATEMENT_TIMEOUT_S
    ) -> None:
        if not statement_timeout_s > 0:
            raise ValueError("statement_timeout_s must be a positive number of seconds")
        self.dsn = dsn
        self.schema = schema
        self.statement_timeout_s = statement_timeout_s
        self.db_ms = 0.0  # time spent in the database by every operation so far
        self.last_db_ms: float | None = None  # by the last finished refresh
        self.dropped = 0  # operations cancelled at the statement timeout
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
        try:
            if not await abehind_pooler(self.conn):  # a session SET would leak to other clients
                ms = round(self.statement_timeout_s * 1000)
                await self.conn.execute(queries().browse_statement_timeout, {"ms": str(ms)})
        except psycopg.Error as exc:
            await self._drop()
            self._failed(exc)
            raise LinkDown(self.last_error or "database unreachable") from None
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
            started = time.perf_counter()
            bound = self.statement_timeout_s if _refreshing.get() else None
            try:
                async with asyncio.timeout(bound):
                    result = await fn(conn, self.schema, *args, **kwargs)
            except (TimeoutError, psycopg.errors.QueryCanceled) as exc:
                if isinstance(exc, psycopg.errors.QueryCanceled) and not _timed_out(exc):
                    raise
                self.dropped += 1
                if conn.closed or conn.broken:
                    await self._drop()
                raise RefreshDropped(self.statement_timeout_s) from None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if conn.closed or conn.broken or isinstance(exc, psycopg.InterfaceError):
                    await self._drop()
                    self._failed(exc)
                    raise LinkDown(self.last_error or "database unreachable") from None
                raise
            finally:
                self.db_ms += (time.perf_counter() - started) * 1000
            self.failures = 0
            self.next_attempt_at = 0.0
            return result

    @contextlib.asynccontextmanager
    async def refresh(self) -> AsyncIterator[None]:
        """Brackets one refresh: each of its reads is bounded by `statement_timeout_s` on the
        client too, and on success `last_db_ms` is the time they took."""
        before = self.db_ms
        token = _refreshing.set(True)
        try:
            yield
        finally:
            _refreshing.reset(token)
        self.last_db_ms = self.db_ms - before

    async def _drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            # Closing a broken connection may fail; it is gone either way.
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()


def _timed_out(exc: psycopg.errors.QueryCanceled) -> bool:
    """The server's statement_timeout, as opposed to a cancel sent by someone else."""
    return "statement timeout" in (exc.diag.message_primary or "")
