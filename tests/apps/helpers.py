"""Shared helpers of the worker tests: run a worker in-process, wait for a condition."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from jobtui.registry import Registry
from jobtui.worker import Worker, WorkerSettings

FAST: dict[str, Any] = {
    "poll_interval": 0.1,
    "heartbeat_interval": 0.2,
    "heartbeat_timeout": 2.0,
    "stats_flush_interval": 0.1,
    "shutdown_grace": 2.0,
}


def settings(**overrides: Any) -> WorkerSettings:
    return WorkerSettings(**{**FAST, **overrides})


async def wait_until(
    check: Callable[[], Any | Awaitable[Any]],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> Any:
    """Poll `check` (sync or async) until it returns something truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


async def fetchall(conn: psycopg.AsyncConnection, sql: str, params: Any = None) -> list[Any]:
    return await (await conn.execute(sql, params)).fetchall()


async def fetchval(conn: psycopg.AsyncConnection, sql: str, params: Any = None) -> Any:
    row = await (await conn.execute(sql, params)).fetchone()
    return None if row is None else row[0]


@asynccontextmanager
async def running_worker(dsn: str, registry: Registry, **overrides: Any) -> AsyncIterator[Worker]:
    """A Worker running in this event loop; stopped (and drained) on exit."""
    worker = Worker(dsn, "public", registry, settings(**overrides))
    task = asyncio.create_task(worker.run())
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:

        async def registered() -> bool:
            if task.done():
                task.result()  # surface a start-up failure
            return bool(await fetchval(conn, "SELECT 1 FROM workers WHERE id = %s", (worker.id,)))

        await wait_until(registered, what="the worker to register")
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 20)
