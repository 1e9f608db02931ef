"""How a command reaches the database: connection settings from flags or the environment, one
async connection with the schema checked, and plain output on stdout.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import psycopg

from jobtui import ops
from jobtui.cli.args import Args
from jobtui.config import resolve_dsn, resolve_schema
from jobtui.db import acheck_schema, aconnect
from jobtui.inert import clean
from jobtui.sql import quote_schema

Body = Callable[[psycopg.AsyncConnection, str], Awaitable[int]]


def dsn_of(args: Args) -> str:
    return resolve_dsn(getattr(args, "dsn", None))


def schema_of(args: Args) -> str:
    schema = resolve_schema(getattr(args, "schema", None))
    quote_schema(schema)  # an invalid name fails here, with one line
    return schema


async def _with_conn(args: Args, body: Body) -> int:
    schema = schema_of(args)
    conn = await aconnect(dsn_of(args))
    try:
        await acheck_schema(conn, schema)
        return await body(conn, schema)
    finally:
        await conn.close()


def run_with_connection(args: Args, body: Body) -> int:
    """Run `body(conn, schema)` on one connection whose schema is known to be migrated."""
    return asyncio.run(_with_conn(args, body))


def flip_named(args: Args, name: str, action: ops.NamedAction, changed: str, unchanged: str) -> int:
    """Pause or resume one named thing (a kind, a schedule) and say whether that changed it."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        n = await action(conn, schema, name, actor=ops.Actor.current())
        out(clean((changed if n else unchanged).format(name)))
        return 0

    return run_with_connection(args, body)


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    """A note for the operator on stderr (stdout stays the result scripts read)."""
    sys.stderr.write(text + "\n")


def plural(n: int, noun: str) -> str:
    """`1 job`, `3 jobs`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
