"""Cron expressions evaluated in a time zone: the one module that uses the cron library.

The library is cronsim (PyPI `cronsim`). Compared with the other maintained choices:
- cronsim: small, pure Python, no dependencies, typed; maintained by the author of
  Healthchecks.io, where it evaluates every check's schedule; its DST behaviour is modelled on
  Debian's cron and covered by its own tests; accepts an optional seconds field (6 fields).
- croniter: widely used, but its maintenance lapsed in 2024 before it moved to a new home, and
  its DST handling has a long history of reported bugs; it would also bring python-dateutil.
- python-crontab: edits crontab files; for schedules it defers to croniter.
- APScheduler's CronTrigger: a whole scheduler framework (and tzlocal) for one parser.

DST rules (what `ticks_between` returns, tested in tests/test_schedules.py):
- Five-field expressions with a fixed minute and hour (`30 2 * * *`, `0 9-17 * * 1-5`) follow
  the wall clock, as Debian's cron does: a time that falls in the spring-forward gap runs once,
  at the first minute after the gap (02:30 → 03:00); a time in the autumn repeat runs once, at
  its first occurrence (02:30 summer time), not again an hour later.
- Expressions with `*` (or a step on `*`) in the minute or hour field (`*/5 * * * *`,
  `0 * * * *`), and every six-field (seconds) expression, follow elapsed time: ticks are the
  wall-clock matches as the clock really shows them, so `0 * * * *` fires at 01:00 and 03:00
  on the spring day (02:00 does not exist) and twice at 02:00 on the autumn day (once in summer
  time, once in winter time), one hour apart each time.
Ticks are returned in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

# A fixed-time expression can step back behind its start once around the autumn repeat (the
# library iterates the wall clock); a few skipped results are expected, never many.
_MAX_BEHIND = 100
_SECOND = timedelta(seconds=1)


class InvalidCron(ValueError):
    """A cron expression or time zone that cannot be evaluated; str() names which."""


def zone(timezone: str) -> ZoneInfo:
    """The IANA time zone `timezone` (e.g. "Europe/Berlin"); raises InvalidCron."""
    if not isinstance(timezone, str) or not timezone or "\x00" in timezone:
        raise InvalidCron(f"invalid time zone {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidCron(f"unknown time zone {timezone!r}") from None


def check(expr: str, timezone: str = "UTC") -> None:
    """Raise InvalidCron unless `expr` is a 5- or 6-field cron expression with a next time."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidCron("cron expression must be a non-empty string")
    tz = zone(timezone)
    try:
        next(CronSim(expr, datetime.now(tz)))
    except CronSimError as exc:
        raise InvalidCron(f"invalid cron expression {expr!r}: {exc}") from None
    except StopIteration:
        raise InvalidCron(f"cron expression {expr!r} never matches") from None


def _ticks(
    expr: str, timezone: str, start: datetime, *, reverse: bool = False
) -> Iterator[datetime]:
    """The library's ticks from `start` on (or back), in UTC; raises InvalidCron."""
    tz = zone(timezone)
    try:
        for local in CronSim(expr, start.astimezone(tz), reverse=reverse):
            yield local.astimezone(UTC)
    except CronSimError as exc:
        raise InvalidCron(f"invalid cron expression {expr!r}: {exc}") from None


def ticks_between(
    expr: str, timezone: str, after: datetime, until: datetime, *, limit: int = 1000
) -> list[datetime]:
    """Ticks t with after < t <= until, oldest first, in UTC; at most `limit` of them."""
    found: list[datetime] = []
    behind = 0
    for tick in _ticks(expr, timezone, after):
        if tick <= after:
            behind += 1
            if behind > _MAX_BEHIND:
                break
            continue
        if tick > until or len(found) >= limit:
            break
        found.append(tick)
    return found


def next_tick(expr: str, timezone: str, after: datetime) -> datetime | None:
    """The first tick after `after` (UTC), None when the expression never matches again."""
    for behind, tick in enumerate(_ticks(expr, timezone, after)):
        if tick > after:
            return tick
        if behind > _MAX_BEHIND:
            break
    return None


def latest_tick(expr: str, timezone: str, until: datetime) -> datetime | None:
    """The last tick at or before `until` (UTC), None when there is none within 50 years."""
    # Reverse iteration starts one second before its start: start one second late.
    for ahead, tick in enumerate(_ticks(expr, timezone, until + _SECOND, reverse=True)):
        if tick <= until:
            return tick
        if ahead > _MAX_BEHIND:
            break
    return None
