"""Named targets: several jobtui databases watched from one console and one `stats`/`check`.

Declared in the config file (`jobtui.console_config`), one table per target:

    [targets.eu]
    dsn = "postgresql://monitor@eu-db/app"
    schema = "jobs"            # default: $JOBTUI_SCHEMA or public
    label = "EU production"    # shown instead of the name
    colour = "magenta"         # the header's colour while in this target (a colour name or #rgb)
    danger = true              # production: marked in the header and in every confirmation
    timeout = "5s"             # statement and connect timeout of this target's reads

`select` turns `--target NAME` (repeatable), `--all-targets` and `--dsn` into the targets to
use; `gather` runs one function on every target at once, each on its own connection under its
own timeout, so a target that is down, slow or locked gives its own error and never delays
or hides the others. Free of textual: the CLI and the console both use it.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobtui.config import InvalidDuration, parse_duration
from jobtui.sql import SCHEMA_PATTERN, queries

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,39}$")
COLOUR_PATTERN = re.compile(r"^(#[0-9A-Fa-f]{6}|#[0-9A-Fa-f]{3}|[a-z_]+[0-9]*)$")
DEFAULT_TIMEOUT_S = 5.0
MIN_CONNECT_TIMEOUT_S = 2  # libpq's floor for connect_timeout
KEYS = ("dsn", "schema", "label", "colour", "color", "danger", "timeout")
APPLICATION_NAME = "jobtui-targets"


class TargetError(ValueError):
    """A target's declaration or selection cannot be used; the message is one line."""


@dataclass(frozen=True)
class Target:
    """One database to watch; `name` is "" for the unnamed target of a bare `--dsn`."""

    name: str
    dsn: str
    schema: str | None = None  # None: $JOBTUI_SCHEMA or public, decided by the caller
    label: str | None = None
    colour: str | None = None
    danger: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def title(self) -> str:
        """How the target is named on screen and in every message."""
        return self.label or self.name or "default"

    @property
    def key(self) -> str:
        """The name in JSON keys and Prometheus labels (`default` for the unnamed one)."""
        return self.name or "default"

    @property
    def connect_timeout_s(self) -> int:
        return max(MIN_CONNECT_TIMEOUT_S, math.ceil(self.timeout_s))


def parse_targets(table: object, where: str = "config") -> dict[str, Target]:
    """The `[targets.NAME]` tables of the config file, by name, in file order."""
    if not isinstance(table, Mapping):
        raise TargetError(f"{where}: [targets] must be a table of [targets.NAME] tables")
    out: dict[str, Target] = {}
    for name, body in table.items():
        at = f"{where}: [targets.{name}]"
        if not NAME_PATTERN.match(str(name)):
            raise TargetError(f"{at}: a target name is letters, digits, _ . - (at most 40)")
        if not isinstance(body, Mapping):
            raise TargetError(f"{at}: expected a table with dsn = ...")
        unknown = set(body) - set(KEYS)
        if unknown:
            raise TargetError(f"{at}: unknown key(s) {', '.join(sorted(unknown))}")
        dsn = body.get("dsn")
        if not isinstance(dsn, str) or not dsn.strip():
            raise TargetError(f"{at}: dsn must be a non-empty connection string")
        out[str(name)] = Target(
            name=str(name),
            dsn=dsn.strip(),
            schema=_schema(at, body.get("schema")),
            label=_text(at, "label", body.get("label")),
            colour=_colour(at, body.get("colour", body.get("color"))),
            danger=_flag(at, body.get("danger", False)),
            timeout_s=_timeout(at, body.get("timeout")),
        )
    return out


def _schema(at: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not SCHEMA_PATTERN.match(value):
        raise TargetError(f"{at}: schema must be a plain identifier (letters, digits, _)")
    return value


def _text(at: str, key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 40:
        raise TargetError(f"{at}: {key} must be a non-empty string of at most 40 characters")
    return " ".join(value.split())


def _colour(at: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not COLOUR_PATTERN.match(value.strip().lower()):
        raise TargetError(f'{at}: colour must be a colour name such as "magenta" or "#ff8800"')
    return value.strip().lower()


def _flag(at: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TargetError(f"{at}: danger must be true or false")
    return value


def _timeout(at: str, value: object) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TargetError(f'{at}: timeout must be a duration such as "5s"')
    try:
        seconds = parse_duration(str(value)).total_seconds()
    except InvalidDuration as exc:
        raise TargetError(f"{at}: timeout: {exc}") from None
    if not 0.1 <= seconds <= 300:
        raise TargetError(f"{at}: timeout must be from 100ms to 5m")
    return seconds


def select(
    declared: Mapping[str, Target], names: Sequence[str], every: bool, dsn: str | None = None
) -> list[Target]:
    """The targets asked for: each `--target NAME` once, in the order given, or every declared
    one with `every`; [] when none is asked for (a bare `--dsn`, or the environment's DSN)."""
    if (names or every) and dsn is not None:
        raise TargetError("give --dsn or --target/--all-targets, not both")
    if every:
        if names:
            raise TargetError("give --target NAME or --all-targets, not both")
        if not declared:
            raise TargetError("--all-targets: the config file declares no [targets.NAME]")
        return list(declared.values())
    chosen: list[Target] = []
    for name in names:
        if name not in declared:
            known = ", ".join(declared) or "none declared"
            raise TargetError(f"unknown target {name!r} (known: {known})")
        if declared[name] not in chosen:
            chosen.append(declared[name])
    return chosen


# --- one function on every target at once ---------------------------------------------------


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What one target gave: a value, or the one-line error that took its place."""

    target: Target
    value: T | None = None
    error: str | None = None
    timed_out: bool = False
    db_ms: float = 0.0


async def open_target(target: Target, schema: str) -> psycopg.AsyncConnection:
    """A connection to `target` with its own connect and statement timeout, schema checked."""
    from jobtui.db import aapply_prepared_mode, acheck_schema, aconnect

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
    import psycopg

    from jobtui.db import SchemaMissing, describe_error

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
        return Outcome(target, error=describe_error(exc), timed_out=timed_out, db_ms=ms)
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


def describe(target: Target) -> dict[str, Any]:
    """A target as JSON (never its DSN, which may hold a password)."""
    return {"label": target.title, "danger": target.danger}
