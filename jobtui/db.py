"""Opening connections and turning connection failures into one clear line.

Everything here is shared by the CLI, the worker and the console; no module formats its own
"could not connect" message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict

from jobtui.config import InvalidSetting, connect_kwargs
from jobtui.sql import queries

APPLICATION_NAME = "jobtui"

# Whether connections may use server-side prepared statements (psycopg prepares a statement
# after its 5th execution on a connection). Behind a transaction pooler they must not: the next
# Bind can land on another server connection, which lacks the statement or holds another one
# under the same name. "auto" (the default) turns them off when the connection is pooled.
PREPARED_ENV = "JOBTUI_PREPARED_STATEMENTS"
PREPARED_MODES = ("auto", "on", "off")


def prepared_mode() -> str:
    """`JOBTUI_PREPARED_STATEMENTS`: auto (default), on or off; InvalidSetting otherwise."""
    mode = os.environ.get(PREPARED_ENV, "auto").strip().lower() or "auto"
    if mode not in PREPARED_MODES:
        raise InvalidSetting(f"{PREPARED_ENV} must be auto, on or off, not {mode!r}")
    return mode


def _pooled(client_pid: int, server_pid: Any) -> bool:
    """PgBouncer answers the startup with its own backend key: the pid the client was told
    differs from the one the server reports. (Poolers that pass the real pid through are not
    detected: set JOBTUI_PREPARED_STATEMENTS=off for them.)"""
    return server_pid is not None and int(server_pid) != client_pid


def behind_pooler(conn: psycopg.Connection) -> bool:
    """Whether `conn` goes through PgBouncer (see `_pooled`); one round trip."""
    row = conn.execute(queries().backend_pid, prepare=False).fetchone()
    return _pooled(conn.info.backend_pid, row[0] if row else None)


def apply_prepared_mode(conn: psycopg.Connection) -> bool:
    """Turn prepared statements off on `conn` when the setting says so; True if off."""
    mode = prepared_mode()
    off = behind_pooler(conn) if mode == "auto" else mode == "off"
    if off:
        conn.prepare_threshold = None
    return off


async def abehind_pooler(conn: psycopg.AsyncConnection) -> bool:
    """Whether `conn` goes through PgBouncer (see `_pooled`); one round trip."""
    cur = await conn.execute(queries().backend_pid, prepare=False)
    row = await cur.fetchone()
    return _pooled(conn.info.backend_pid, row[0] if row else None)


async def aapply_prepared_mode(conn: psycopg.AsyncConnection) -> bool:
    """Async twin of apply_prepared_mode."""
    mode = prepared_mode()
    off = await abehind_pooler(conn) if mode == "auto" else mode == "off"
    if off:
        conn.prepare_threshold = None
    return off


def _output_styles(conn: psycopg.Connection | psycopg.AsyncConnection) -> tuple[bool, bool]:
    """Whether the session reports a date style, and an interval style, psycopg cannot read."""
    date_style = conn.info.parameter_status("DateStyle") or "ISO"
    interval_style = conn.info.parameter_status("IntervalStyle") or "postgres"
    return not date_style.startswith("ISO"), interval_style != "postgres"


def _output_styles_sql(date: bool, interval: bool) -> str | None:
    """The SETs for what needs setting; None when nothing does.

    Behind a pooler (`_pooled`) IntervalStyle is left alone: PgBouncer before 1.20 does not
    track it, so a SET would stay on whichever server connection took it and hand other clients
    of the pool intervals in a style they were not told of (their reads fail), while this
    client's later transactions land on connections that never got it. jobtui reads no interval
    columns, and psycopg writes intervals in a form every style reads. DateStyle is tracked by
    every PgBouncer (restored per client on each server connection), so it is still set."""
    q = queries()
    if date and interval:
        return q.output_styles
    if date:
        return q.output_date_style
    if interval:
        return q.output_interval_style
    return None


def apply_output_styles(conn: psycopg.Connection) -> None:
    """Set ISO dates and `postgres` intervals when the server's default is another style
    (the interval style not behind a pooler: see `_output_styles_sql`)."""
    date, interval = _output_styles(conn)
    if interval:
        interval = not behind_pooler(conn)
    sql = _output_styles_sql(date, interval)
    if sql:
        conn.execute(sql, prepare=False)


async def aapply_output_styles(conn: psycopg.AsyncConnection) -> None:
    """Async twin of apply_output_styles."""
    date, interval = _output_styles(conn)
    if interval:
        interval = not await abehind_pooler(conn)
    sql = _output_styles_sql(date, interval)
    if sql:
        await conn.execute(sql, prepare=False)


class SchemaMissing(Exception):
    """jobtui's tables are not in the database: `jobtui migrate` has not been run."""


class InvalidDsn(psycopg.ProgrammingError):
    """A connection string libpq cannot parse: said as such, not as a database error (it is a
    psycopg.Error, so every handler of connection failures takes it)."""


def check_dsn(dsn: str) -> None:
    """Raise InvalidDsn unless libpq can parse `dsn`. Done where a DSN is connected, so a
    config file's target is judged as --dsn is (it said `database error: missing "=" …`)."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidDsn(
            f"invalid DSN: {str(exc).strip()}; give a connection string such as "
            "postgresql://user@host/db"
        ) from None


# libpq (`connection is bad`, before any network) or psycopg refusing a parsed DSN's values:
# sslmode=bogus, port=abc, port=99999, connect_timeout=abc, a service not defined, more ports
# than hosts.
_BAD_DSN_VALUE = re.compile(
    r"^(?:connection is bad: )?(invalid \S+ value.*|invalid integer value.*"
    r"|invalid port number.*|bad value for \w+.*"
    r"|definition of service .* not found|service file .* not found"
    r"|could not match \d+ (?:port numbers|host names).*)$",
    re.IGNORECASE,
)
# The connection option each of those refusals is about.
_BAD_OPTION = (
    re.compile(r'for connection option "(\w+)"'),
    re.compile(r"^invalid (\w+) value", re.IGNORECASE),
    re.compile(r"^bad value for (\w+)"),
    re.compile(r"^invalid (port) number"),
    re.compile(r"^definition of (service) "),
    re.compile(r"^could not match \d+ (port numbers|host names) to \d+ (hosts|port numbers)"),
)
_OPTION_WORDS = {"port numbers": "port", "host names": "host", "hosts": "host"}


def _environment_variables() -> dict[str, str]:
    """libpq's connection option -> the PG* variable that sets it (PGPORT for port, ...)."""
    from psycopg import pq

    return {d.keyword.decode(): d.envvar.decode() for d in pq.Conninfo.get_defaults() if d.envvar}


def _refused_setting(exc: psycopg.Error, dsn: str) -> psycopg.Error | None:
    """`exc` said better, when a connection setting's value was refused or a host named by
    the environment did not resolve: a value from a PG* variable the DSN does not override
    names that variable (`PGPORT=abc` said `invalid DSN: invalid integer value "abc" for
    connection option "port"`, `PGCONNECT_TIMEOUT=abc` `database error: bad value for
    connect_timeout: 'abc'`, `PGHOST=typo` `failed to resolve host None`); one from the DSN
    is an InvalidDsn. None when `exc` is none of those."""
    text = _first_line(str(exc))
    given = conninfo_to_dict(dsn)
    if text.startswith("failed to resolve host None") and "host" not in given:
        host = os.environ.get("PGHOST")
        if host is None:
            return None
        return psycopg.OperationalError(text.replace("host None", f"host {host!r} (PGHOST)", 1))
    bad = _BAD_DSN_VALUE.match(text)
    if not bad:
        return None
    detail = bad[1]
    variables = _environment_variables()
    options = [
        _OPTION_WORDS.get(word, word)
        for pattern in _BAD_OPTION
        if (match := pattern.search(detail))
        for word in match.groups()
    ]
    # the values the refusal quotes (`invalid integer value "abc" for … "port"`)
    quoted = [a or b for a, b in re.findall(r'"([^"]*)"|\'([^\']*)\'', detail)]
    named = [
        f"{variables[o]}={os.environ[variables[o]]!r}"
        for o in dict.fromkeys(options)
        if o not in given
        and o in variables
        and variables[o] in os.environ
        # a service's value comes before the variable's: PGPORT=abc was named for a service
        # file's port=xyz (`PGPORT='abc': invalid integer value "xyz"`)
        and (not quoted or os.environ[variables[o]] in quoted)
    ]
    if not named:
        service = given.get("service") or os.environ.get("PGSERVICE")
        where = f"DSN or its service {service!r}" if service and "service" not in options else "DSN"
        return InvalidDsn(f"invalid {where}: {detail}")
    return InvalidDsn(
        f"invalid connection setting in the environment, {' '.join(named)}: {detail}; "
        "fix or unset it (or give the value in --dsn)"
    )


@contextmanager
def _refusals_said_better(dsn: str) -> Iterator[None]:
    """Around a connect: a refused setting is raised as `_refused_setting` says it."""
    try:
        yield
    except psycopg.Error as exc:
        better = _refused_setting(exc, dsn)
        if better is None:
            raise
        raise better from exc


def connect(
    dsn: str, *, autocommit: bool = True, app: str = APPLICATION_NAME
) -> psycopg.Connection:
    """A sync connection with a bounded connect timeout, prepared statements off behind a
    transaction pooler, dates and intervals in the styles psycopg reads."""
    check_dsn(dsn)
    with _refusals_said_better(dsn):
        conn = psycopg.connect(
            dsn,
            autocommit=True,
            application_name=app,
            **connect_kwargs(dsn),  # type: ignore[arg-type]
        )
    try:
        apply_prepared_mode(conn)
        apply_output_styles(conn)
        conn.autocommit = autocommit
    except BaseException:
        conn.close()
        raise
    return conn


async def aconnect(
    dsn: str,
    *,
    autocommit: bool = True,
    app: str = APPLICATION_NAME,
    extra: dict[str, Any] | None = None,
) -> psycopg.AsyncConnection:
    """An async connection with a bounded connect timeout, prepared statements off behind a
    transaction pooler; `extra` are more libpq/psycopg arguments (the worker's keepalives)."""
    check_dsn(dsn)
    with _refusals_said_better(dsn):
        conn = await psycopg.AsyncConnection.connect(
            dsn,
            autocommit=True,
            application_name=app,
            **{**connect_kwargs(dsn), **(extra or {})},
        )
    try:
        await aapply_prepared_mode(conn)
        await aapply_output_styles(conn)
        await conn.set_autocommit(autocommit)
    except BaseException:
        await conn.close()
        raise
    return conn


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(FATAL|ERROR):\s+", "", line)
    return text.strip()


def describe_error(exc: BaseException) -> str:
    """One line a person can act on, for any error raised while talking to PostgreSQL."""
    if isinstance(exc, SchemaMissing | InvalidDsn):
        return str(exc)
    text = _first_line(str(exc)) or exc.__class__.__name__
    low = text.lower()
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        return f"permission denied: {text} (the database role lacks this privilege)"
    if isinstance(exc, psycopg.OperationalError):
        bad_value = _BAD_DSN_VALUE.match(text)
        if bad_value:
            return f"invalid DSN: {bad_value[1]}"
        # A role that does not exist is refused at login as a wrong password is: said as
        # "could not connect" it sent people looking at the network.
        if (
            "password authentication failed" in low
            or "no password supplied" in low
            or re.search(r'role ".*" does not exist', low)
        ):
            return f"authentication failed: {text}"
        if re.search(r'database ".*" does not exist', low):
            return (
                f"database missing: {text} (create it, e.g. `createdb NAME`, then run "
                "`jobtui migrate`; or fix the DSN)"
            )
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


CLI_FIX = "give --dsn of the database that has them"


def schema_missing(info: psycopg.ConnectionInfo, schema: str, fix: str = CLI_FIX) -> SchemaMissing:
    """Names the database reached: with no DSN given, libpq's defaults pick one (as root, a
    database `root` on the local socket), and "run `jobtui migrate` first" alone invited
    migrating that one rather than fixing --dsn. `fix` is the other way out: the CLI's --dsn,
    the producer API's connection."""
    return SchemaMissing(
        f"jobtui's tables are not in schema {schema!r} of database {info.dbname!r} on "
        f"{info.host}: run `jobtui migrate` first, or {fix}"
    )


def is_schema_missing_error(exc: BaseException) -> bool:
    """Whether a failed statement of jobtui's says its tables (or its schema) are not there:
    PostgreSQL's undefined table (42P01) or invalid schema name (3F000)."""
    return isinstance(exc, pgerrors.UndefinedTable | pgerrors.InvalidSchemaName)


def check_schema(conn: psycopg.Connection, schema: str) -> None:
    """Raise SchemaMissing unless jobtui's tables exist in `schema`."""
    row = conn.execute(queries(schema).schema_present).fetchone()
    if not row or not row[0]:
        raise schema_missing(conn.info, schema)


async def acheck_schema(conn: psycopg.AsyncConnection, schema: str) -> None:
    """Async twin of check_schema."""
    row = await (await conn.execute(queries(schema).schema_present)).fetchone()
    if not row or not row[0]:
        raise schema_missing(conn.info, schema)
