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
use; `jobtui.fleet.gather` reads them all at once. Free of textual and of any connection:
the config file's parser uses it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobtui.config import InvalidDuration, parse_duration
from jobtui.sql import SCHEMA_PATTERN

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,39}$")
COLOUR_PATTERN = re.compile(r"^(#[0-9A-Fa-f]{6}|#[0-9A-Fa-f]{3}|[a-z_]+[0-9]*)$")
DEFAULT_TIMEOUT_S = 5.0
MIN_CONNECT_TIMEOUT_S = 2  # libpq's floor for connect_timeout
KEYS = ("dsn", "schema", "label", "colour", "color", "danger", "timeout")


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
        twin = next(
            (t for t in out.values() if t.name != name and same_title(t, out[str(name)])), None
        )
        if twin is not None:  # a write's confirmation names the target by its title
            raise TargetError(
                f"{at}: shows as {out[str(name)].title!r} on screen, as [targets.{twin.name}] "
                "does: give each target a label of its own"
            )
    return out


def same_title(a: Target, b: Target) -> bool:
    return a.title.casefold() == b.title.casefold()


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
    from rich.color import Color, ColorParseError

    if value is None:
        return None
    bad = f'{at}: colour must be a colour name such as "magenta" or "#ff8800"'
    if not isinstance(value, str) or not COLOUR_PATTERN.match(value.strip().lower()):
        raise TargetError(bad)
    try:
        Color.parse(value.strip().lower())
    except ColorParseError:
        raise TargetError(bad) from None
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


_URI_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://[^/@:]*:([^/@]+)@")
_KV_PASSWORD = re.compile(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'?|\S+)")


def redact(text: str, dsn: str) -> str:
    """`text` (an error about `dsn`) without the DSN's password. libpq quotes a malformed
    connection string whole in its error ("... in URI: "postgresql://u:secret@[::1/db""), and
    a target's error is printed by `stats`, `check` and the targets overview."""
    for secret in sorted((s for s in passwords(dsn) if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def passwords(dsn: str) -> set[str]:
    """The password `dsn` holds, as written and unquoted; none when it is not a DSN."""
    secrets: set[str] = set()
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
        if isinstance(password, str):
            secrets.add(password)
    except Exception:  # noqa: BLE001 - a malformed DSN: the patterns below still find it
        pass
    for pattern in (_URI_PASSWORD, _KV_PASSWORD):
        secrets.update(m.group(1) for m in pattern.finditer(dsn))
    return secrets | {s.strip("'") for s in secrets}


def badge_style(colour: str | None) -> str:
    """The style of a target's name on screen: reversed, so it reads as a badge even with
    NO_COLOR; with a colour, that colour is the badge's background and the text black or
    white, whichever stands out from it (a dark colour such as "black" or "grey3" as the
    text's colour would vanish into a dark theme)."""
    if not colour:
        return "bold reverse"
    from rich.color import Color

    r, g, b = Color.parse(colour).get_truecolor()
    text = "black" if (0.299 * r + 0.587 * g + 0.114 * b) / 255 > 0.5 else "white"
    return f"bold reverse {colour} on {text}"  # reversed: {colour} is what fills the badge


def describe(target: Target) -> dict[str, Any]:
    """A target as JSON (never its DSN, which may hold a password)."""
    return {"label": target.title, "danger": target.danger}
