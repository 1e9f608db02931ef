"""How a command reaches the database: connection settings from flags or the environment, one
async connection with the schema checked, and plain output on stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg

from jobtui.cli.args import Args
from jobtui.cli.errors import CliError
from jobtui.config import resolve_dsn, resolve_schema
from jobtui.db import acheck_schema, aconnect
from jobtui.inert import clean
from jobtui.sql import quote_schema

if TYPE_CHECKING:  # ops (and its imports) only for the commands that write: not `stats`
    from jobtui import ops

Body = Callable[[psycopg.AsyncConnection, str], Awaitable[int]]


def dsn_of(args: Args) -> str:
    """The DSN from --dsn, JOBTUI_DSN, DATABASE_URL, else libpq's own environment (PGHOST…).

    A --dsn or JOBTUI_DSN that is given but empty is refused: it is nearly always a
    `--dsn "$(cat file)"` whose file was not there, and libpq would quietly connect somewhere
    else (the local server, a database named after the user)."""
    flag = getattr(args, "dsn", None)
    if flag is not None and not flag.strip():
        raise CliError(
            "--dsn is empty (was it `$(cat FILE)` of a missing file?): give a connection "
            "string such as postgresql://user@host/db, or leave --dsn out to use "
            "JOBTUI_DSN, DATABASE_URL or PGHOST/PGDATABASE"
        )
    env = os.environ.get("JOBTUI_DSN")
    if flag is None and env is not None and not env.strip():
        raise CliError("JOBTUI_DSN is set but empty: set it to a connection string or unset it")
    return resolve_dsn(flag)


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


def flip_named(
    args: Args,
    name: str,
    action: ops.NamedAction,
    changed: str,
    unchanged: str,
    check: Callable[[psycopg.AsyncConnection, str, Args], Awaitable[None]] | None = None,
) -> int:
    """Pause or resume one named thing (a kind, a schedule): prints `changed`, or fails with
    `unchanged` (one error line, exit 1: nothing happened). `check` may refuse the name first."""

    from jobtui import ops

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        if check is not None:
            await check(conn, schema, args)
        n = await action(conn, schema, name, actor=ops.Actor.current())
        if not n:
            raise CliError(clean(unchanged.format(name)))
        out(clean(changed.format(name)))
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
