"""Opening connections and turning connection failures into one clear line.

Everything here is shared by the CLI, the worker and the console; no module formats its own
"could not connect" message.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import errors as pgerrors

from jobtui.config import connect_kwargs
from jobtui.sql import queries

APPLICATION_NAME = "jobtui"


class SchemaMissing(Exception):
    """jobtui's tables are not in the database: `jobtui migrate` has not been run."""


def connect(
    dsn: str, *, autocommit: bool = True, app: str = APPLICATION_NAME
) -> psycopg.Connection:
    """A sync connection with a bounded connect timeout."""
    return psycopg.connect(
        dsn,
        autocommit=autocommit,
        application_name=app,
        **connect_kwargs(),  # type: ignore[arg-type]
    )


async def aconnect(
    dsn: str, *, autocommit: bool = True, app: str = APPLICATION_NAME
) -> psycopg.AsyncConnection:
    """An async connection with a bounded connect timeout."""
    return await psycopg.AsyncConnection.connect(
        dsn,
        autocommit=autocommit,
        application_name=app,
        **connect_kwargs(),  # type: ignore[arg-type]
    )


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(FATAL|ERROR):\s+", "", line)
    return text.strip()


def describe_error(exc: BaseException) -> str:
    """One line a person can act on, for any error raised while talking to PostgreSQL."""
    if isinstance(exc, SchemaMissing):
        return str(exc)
    text = _first_line(str(exc)) or exc.__class__.__name__
    low = text.lower()
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return f"permission denied: {text} (the database role lacks this privilege)"
    if isinstance(exc, psycopg.OperationalError):
        if "password authentication failed" in low or "no password supplied" in low:
            return f"authentication failed: {text}"
        if re.search(r'database ".*" does not exist', low):
            return f"database missing: {text}"
        if "timeout expired" in low or "timed out" in low:
            return f"could not connect: timed out ({text})"
        if (
            "could not translate host name" in low
            or "name or service not known" in low
            or "connection refused" in low
            or "no such file or directory" in low
            or "is the server running" in low
            or "could not connect" in low
            or "connection failed" in low
        ):
            return f"could not connect to PostgreSQL: {text}"
        return f"database error: {text}"
    if isinstance(exc, psycopg.Error):
        return f"database error: {text}"
    return text


_MISSING = "jobtui's tables are not in schema {schema!r}: run `jobtui migrate` first"


def check_schema(conn: psycopg.Connection, schema: str) -> None:
    """Raise SchemaMissing unless jobtui's tables exist in `schema`."""
    row = conn.execute(queries(schema).schema_present).fetchone()
    if not row or not row[0]:
        raise SchemaMissing(_MISSING.format(schema=schema))


async def acheck_schema(conn: psycopg.AsyncConnection, schema: str) -> None:
    """Async twin of check_schema."""
    row = await (await conn.execute(queries(schema).schema_present)).fetchone()
    if not row or not row[0]:
        raise SchemaMissing(_MISSING.format(schema=schema))
