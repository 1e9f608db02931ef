"""One long-lived worker connection that is reopened, with back-off, after it breaks.

The worker keeps a few of these (claim, flush, maintenance) rather than a pool: each has one
job, so statements on one never wait behind another's.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psycopg

from jobtui.db import aconnect, describe_error

log = logging.getLogger("jobtui.worker")

MAX_BACKOFF_S = 5.0


class Link:
    """An autocommit AsyncConnection opened on first use and after a failure."""

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.name = name
        self.failures = 0
        self._conn: psycopg.AsyncConnection | None = None

    async def connection(self) -> psycopg.AsyncConnection:
        if self._conn is None or self._conn.closed:
            self._conn = await aconnect(self.dsn, app=f"jobtui worker ({self.name})")
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
