"""Which statements a read call spends its time in, and (with --explain) their plans.

One extra call of the API is made with psycopg's cursor `execute` wrapped, in this process only,
to time each statement; the slowest are printed with their first SQL line. With `--explain`
the slowest is run again under EXPLAIN (ANALYZE, BUFFERS) with the same parameters.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg


@contextlib.contextmanager
def _recording(log: list[tuple[float, str, Any]]) -> Iterator[None]:
    original_async = psycopg.AsyncCursor.execute
    original_sync = psycopg.Cursor.execute

    async def async_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original_async(self, query, params, **kw)
        finally:
            log.append(((time.perf_counter() - t0) * 1000, _text(query), params))

    def sync_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original_sync(self, query, params, **kw)
        finally:
            log.append(((time.perf_counter() - t0) * 1000, _text(query), params))

    psycopg.AsyncCursor.execute = async_execute  # type: ignore[method-assign]
    psycopg.Cursor.execute = sync_execute  # type: ignore[method-assign]
    try:
        yield
    finally:
        psycopg.AsyncCursor.execute = original_async  # type: ignore[method-assign]
        psycopg.Cursor.execute = original_sync  # type: ignore[method-assign]


def _text(query: Any) -> str:
    return query if isinstance(query, str) else str(query)


def _first_line(sql: str) -> str:
    for line in sql.splitlines():
        line = line.strip()
        if line and not line.startswith("--"):
            return line[:90]
    return sql[:90]


def profile(dsn: str, api: Callable[..., Any], args: tuple[Any, ...], top: int = 3) -> str:
    """One line per slowest statement of one `api(conn, *args)` call (ms, first SQL line)."""
    log: list[tuple[float, str, Any]] = []
    wants_async = asyncio.iscoroutinefunction(api)

    async def go() -> None:
        if wants_async:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            try:
                await api(conn, *args)  # warm
                with _recording(log):
                    await api(conn, *args)
            finally:
                await conn.close()
        else:
            with psycopg.connect(dsn, autocommit=True) as sconn:
                api(sconn, *args)
                with _recording(log):
                    api(sconn, *args)

    asyncio.run(go())
    log.sort(key=lambda e: -e[0])
    lines = [f"      {ms:7.1f} ms  {_first_line(sql)}" for ms, sql, _ in log[:top]]
    if os.environ.get("JOBTUI_BENCH_EXPLAIN") and log:
        lines.append(explain(dsn, log[0][1], log[0][2]))
    return "\n".join([f"      {len(log)} statements; slowest:", *lines])


def explain(dsn: str, sql: str, params: Any) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params).fetchall()
        except psycopg.Error as exc:
            return f"      (EXPLAIN failed: {str(exc).splitlines()[0]})"
    return "\n".join("        " + r[0] for r in rows)
