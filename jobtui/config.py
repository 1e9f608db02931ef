"""Connection settings resolved in one place: flags over environment over defaults.

The DSN comes from `--dsn`, else `JOBTUI_DSN`, else `DATABASE_URL`, else an empty string which
makes libpq use its own environment (`PGHOST`, `PGDATABASE`, …) exactly as psql would.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta

DEFAULT_SCHEMA = "public"
CONNECT_TIMEOUT_S = 5


def resolve_dsn(flag: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The DSN to use: the flag, then JOBTUI_DSN, then DATABASE_URL, then libpq's environment."""
    env = os.environ if env is None else env
    for value in (flag, env.get("JOBTUI_DSN"), env.get("DATABASE_URL")):
        if value:
            return value
    return ""


class InvalidSetting(ValueError):
    """An environment setting jobtui reads has a value it does not know (a user error)."""


def resolve_schema(flag: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The schema holding jobtui's tables: the flag, then JOBTUI_SCHEMA, then `public`.

    A JOBTUI_SCHEMA that is set but empty (or blank) is refused, as an empty JOBTUI_DSN is:
    it is nearly always `JOBTUI_SCHEMA=${QUEUE_SCHEMA}` of an unset variable, and taking it as
    `public` made migrate, the worker and the console act on another schema's tables."""
    env = os.environ if env is None else env
    if flag:
        return flag
    value = env.get("JOBTUI_SCHEMA")
    if value is None:
        return DEFAULT_SCHEMA
    if not value.strip():
        raise InvalidSetting(
            "JOBTUI_SCHEMA is set but empty: set it to the schema holding jobtui's tables, "
            "or unset it for public"
        )
    return value


def connect_kwargs(dsn: str = "") -> dict[str, object]:
    """Extra connection arguments: a bounded connect timeout unless the DSN or the environment
    sets one (an argument overrides the DSN's own: `?connect_timeout=30` became 5 s)."""
    from psycopg.conninfo import conninfo_to_dict  # here: only where a connection is made

    if os.environ.get("PGCONNECT_TIMEOUT") or "connect_timeout" in conninfo_to_dict(dsn):
        return {}
    return {"connect_timeout": CONNECT_TIMEOUT_S}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class InvalidDuration(ValueError):
    """A duration that is not a number followed by ms, s, m, h, d or w."""


def parse_duration(text: str) -> timedelta:
    """Parse `30s`, `5m`, `2h`, `7d` (a bare number means seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise InvalidDuration(
            f"invalid duration {text!r}: use a number with s, m, h or d, e.g. 30s, 5m, 2h, 7d"
        )
    value, unit = float(match.group(1)), match.group(2) or "s"
    try:
        return timedelta(seconds=value * _UNIT_S[unit])
    except OverflowError:
        raise InvalidDuration(
            f"invalid duration {text!r}: too large (at most 999999999d)"
        ) from None


def format_duration(seconds: float | None) -> str:
    """A short human age: `42s`, `3m05s`, `2h10m`, `3d4h`; `–` when there is none."""
    if seconds is None:
        return "–"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"
