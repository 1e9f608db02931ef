"""One function on every target at once (issue 28): each target on its own connection, under
its own connect and statement timeout, so a target that is down, slow or locked gives its own
error and never delays or hides the others. `jobtui stats` and `jobtui check` use it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import psycopg

from jobtui.db import SchemaMissing, aapply_prepared_mode, acheck_schema, aconnect, describe_error
from jobtui.sql import queries
from jobtui.targets import Target, redact

T = TypeVar("T")
V = TypeVar("V", covariant=True)  # an Outcome of a narrower value is one of a wider value
APPLICATION_NAME = "jobtui-targets"


@dataclass(frozen=True)
class Outcome(Generic[V]):
    """What one target gave: a value, or the one-line error that took its place."""

    target: Target
    value: V | None = None
    error: str | None = None
    timed_out: bool = False
    db_ms: float = 0.0


async def open_target(target: Target, schema: str) -> psycopg.AsyncConnection:
    """A connection to `target` with its own connect and statement timeout, schema checked."""
    conn = await aconnect(
        target.dsn,
        app=APPLICATION_NAME,
        extra={"connect_timeout": target.connect_timeout_s},
    )
    try:
        if not await aapply_prepared_mode(conn):  # a session SET would leak behind a pooler
            ms = str(round(target.timeout_s * 1000))
            await conn.execute(queries().browse_statement_timeout, {"ms": ms})
        await acheck_schema(conn, schema)
    except BaseException:
        await conn.close()
        raise
    return conn


async def on_target(
    target: Target,
    schema: str,
    fn: Callable[[psycopg.AsyncConnection, str], Awaitable[T]],
) -> Outcome[T]:
    """`fn(conn, schema)` on a connection of its own, bounded by the target's timeout (twice:
    to connect, then to read); any failure is this target's error line, never raised."""
    started = time.perf_counter()
    conn: psycopg.AsyncConnection | None = None
    try:
        async with asyncio.timeout(target.connect_timeout_s + target.timeout_s):
            conn = await open_target(target, schema)
            value = await fn(conn, schema)
    except TimeoutError:
        ms = (time.perf_counter() - started) * 1000
        return Outcome(target, error=f"timed out after {ms / 1000:.1f} s", timed_out=True, db_ms=ms)
    except (psycopg.Error, SchemaMissing, OSError, ValueError) as exc:
        timed_out = isinstance(exc, psycopg.errors.QueryCanceled)
        ms = (time.perf_counter() - started) * 1000
        error = redact(describe_error(exc), target.dsn)  # libpq may quote a malformed DSN whole
        return Outcome(target, error=error, timed_out=timed_out, db_ms=ms)
    finally:
        if conn is not None:
            await conn.close()
    return Outcome(target, value=value, db_ms=(time.perf_counter() - started) * 1000)


async def gather(
    targets: Sequence[Target],
    default_schema: str,
    fn: Callable[[psycopg.AsyncConnection, str], Awaitable[T]],
) -> list[Outcome[T]]:
    """`fn` on every target at once (one connection each), outcomes in the targets' order."""
    return list(
        await asyncio.gather(*(on_target(t, t.schema or default_schema, fn) for t in targets))
    )
