"""How a command reaches the database: connection settings from flags or the environment, one
async connection with the schema checked, and plain output on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg.conninfo import make_conninfo

from jobtui.cli.args import Args
from jobtui.cli.errors import EXIT_USAGE, CliError
from jobtui.config import InvalidSetting, resolve_dsn, resolve_schema
from jobtui.db import acheck_schema, aconnect, check_dsn
from jobtui.inert import clean
from jobtui.sql import InvalidSchemaName, quote_schema
from jobtui.targets import Target, TargetError, select

if TYPE_CHECKING:  # ops (and its imports) only for the commands that write: not `stats`
    from jobtui import ops

Body = Callable[[psycopg.AsyncConnection, str], Awaitable[int]]


def targets_of(args: Args) -> list[Target]:
    """The targets `--target NAME` (repeatable) or `--all-targets` ask for, from the config
    file (`--config` where the command has it, else the default file); [] when neither is
    given. An unknown name, or --dsn with either, is a one-line usage error (exit 2)."""
    from jobtui.console_config import load_console_config

    names = getattr(args, "target", None) or []
    every = bool(getattr(args, "all_targets", False))
    if not names and not every:
        return []
    path = getattr(args, "config", None)
    declared = load_console_config(Path(path) if path else None).targets
    try:
        return select(declared, names, every, getattr(args, "dsn", None))
    except TargetError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def one_target(args: Args) -> Target | None:
    """The one target a single-database command acts on (None: --dsn or the environment)."""
    chosen = targets_of(args)
    if len(chosen) > 1:
        raise CliError(
            "this command acts on one database: give one --target (stats, check and the "
            "console take several)",
            EXIT_USAGE,
        )
    return chosen[0] if chosen else None


def with_connect_timeout(target: Target) -> str:
    """The target's DSN with its own connect timeout, as `stats`/`check` over targets connect:
    `jobs list --target slow` (timeout = "9s") gave up after jobtui's 5 s, and one whose DSN
    said connect_timeout=0 waited psycopg's 130 s where `stats --target` took 5 s."""
    try:
        return make_conninfo(target.dsn, connect_timeout=target.connect_timeout_s)
    except psycopg.ProgrammingError:  # unparsable: connecting says so, in one line
        return target.dsn


def dsn_of(args: Args) -> str:
    """The DSN from --dsn, JOBTUI_DSN, DATABASE_URL, else libpq's own environment (PGHOST…).

    A --dsn or JOBTUI_DSN that is given but empty is refused: it is nearly always a
    `--dsn "$(cat file)"` whose file was not there, and libpq would quietly connect somewhere
    else (the local server, a database named after the user)."""
    target = one_target(args)
    if target is not None:
        return with_connect_timeout(target)
    flag = getattr(args, "dsn", None)
    if flag is not None and not flag.strip():
        raise CliError(
            "--dsn is empty (was it `$(cat FILE)` of a missing file?): give a connection "
            "string such as postgresql://user@host/db, or leave --dsn out to use "
            "JOBTUI_DSN, DATABASE_URL or PGHOST/PGDATABASE",
            EXIT_USAGE,
        )
    if flag is None:
        for name in ("JOBTUI_DSN", "DATABASE_URL"):
            value = os.environ.get(name)
            if value is not None and not value.strip():
                raise CliError(
                    f"{name} is set but empty: set it to a connection string or unset it",
                    EXIT_USAGE,
                )
            if value:
                break
    dsn = resolve_dsn(flag)
    # libpq's parse error alone ("missing "=" after "x" in connection info string") came out
    # as "database error: …", as if the server had refused something. Said before anything.
    check_dsn(dsn)
    return dsn


def without_passwords(message: str, args: Args) -> str:
    """`message` without the password of any DSN this run could have used: libpq quotes a
    malformed connection string whole in its error ("… in URI: "postgresql://u:pw@[::1/db"").
    For every line a failure prints: `jobtui: error:` and `check`'s UNKNOWN line."""
    from jobtui.targets import redact

    dsns = [
        getattr(args, "dsn", None),
        os.environ.get("JOBTUI_DSN"),
        os.environ.get("DATABASE_URL"),
    ]
    # The config itself may be what failed: redact what we have.
    with contextlib.suppress(Exception):
        dsns += [t.dsn for t in targets_of(args)]
    for dsn in dsns:
        if dsn:
            message = redact(message, dsn)
    return message


def base_schema(args: Args) -> str:
    """The schema of targets that name none: --schema, $JOBTUI_SCHEMA or public."""
    flag = getattr(args, "schema", None)
    if flag is not None and not flag.strip():
        raise CliError(
            "--schema is empty: name the schema holding jobtui's tables, or leave it out",
            EXIT_USAGE,
        )
    try:
        schema = resolve_schema(flag)
    except InvalidSetting as exc:  # JOBTUI_SCHEMA set but empty: a usage error as --schema ""
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        quote_schema(schema)
    except InvalidSchemaName as exc:  # say where the name came from: a flag or the environment
        source = "--schema" if flag else "JOBTUI_SCHEMA"
        raise InvalidSchemaName(f"{source}: {exc}") from None
    return schema


def schema_of(args: Args) -> str:
    """The schema: the target's own, else --schema, $JOBTUI_SCHEMA or public."""
    target = one_target(args)
    if target is None or not target.schema:
        return base_schema(args)
    quote_schema(target.schema)  # an invalid name fails here, with one line
    return target.schema


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
