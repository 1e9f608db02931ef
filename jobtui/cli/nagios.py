"""`jobtui check`'s logic: one Nagios/Icinga status line and exit code from a metrics snapshot.

Each `--max-*` threshold is the WARNING level: a value above it warns. The CRITICAL level is
the matching `--crit-*` flag, or twice the warning level when that flag is absent (so
`--max-dead 0` makes any dead letter critical). A value equal to a threshold is still fine.
UNKNOWN (3) is for when the figures cannot be read at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobtui.cli.errors import CHECK_CRITICAL as CRITICAL
from jobtui.cli.errors import CHECK_OK as OK
from jobtui.cli.errors import CHECK_UNKNOWN as UNKNOWN
from jobtui.cli.errors import CHECK_WARNING as WARNING
from jobtui.config import format_duration
from jobtui.models import Snapshot

STATUS = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}


@dataclass(frozen=True)
class Threshold:
    """Warning and critical levels for one figure (None = not checked)."""

    warn: float | None = None
    crit: float | None = None

    def resolved_crit(self) -> float | None:
        if self.crit is not None:
            return self.crit
        return None if self.warn is None else self.warn * 2

    def level(self, value: float) -> int:
        crit = self.resolved_crit()
        if crit is not None and value > crit:
            return CRITICAL
        if self.warn is not None and value > self.warn:
            return WARNING
        return OK


@dataclass(frozen=True)
class CheckLimits:
    oldest_age_s: Threshold = Threshold()
    dead: Threshold = Threshold()
    ready: Threshold = Threshold()
    replica_lag_s: Threshold = Threshold()


def _perf(name: str, value: float, th: Threshold, unit: str = "") -> str:
    warn = "" if th.warn is None else _n(th.warn)
    crit_v = th.resolved_crit()
    crit = "" if crit_v is None else _n(crit_v)
    return f"{name}={_n(value)}{unit};{warn};{crit};0;"


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3f}"


def evaluate(snap: Snapshot, limits: CheckLimits) -> tuple[int, str]:
    """(exit code, status line) for `snap` against `limits`."""
    age = snap.oldest_ready_age_s or 0.0
    dead = snap.totals.dead
    ready = snap.totals.ready
    figures = [
        ("oldest ready job", age, limits.oldest_age_s, format_duration(age)),
        ("dead letters", float(dead), limits.dead, str(dead)),
        ("ready jobs", float(ready), limits.ready, str(ready)),
    ]
    replica = snap.replica
    lag = None if replica is None else replica.lag_s
    if lag is not None:
        figures.append(("replica lag", lag, limits.replica_lag_s, f"{lag:.1f}s"))
    worst = OK
    problems: list[str] = []
    if replica is not None and lag is None and limits.replica_lag_s.warn is not None:
        problems.append("replica lag unknown (the standby has replayed nothing yet)")
        worst = WARNING
    for label, value, th, shown in figures:
        level = th.level(value)
        if level != OK:
            limit = th.resolved_crit() if level == CRITICAL else th.warn
            assert limit is not None
            timed = th is limits.oldest_age_s or th is limits.replica_lag_s
            limit_shown = format_duration(limit) if timed else _n(limit)
            problems.append(f"{label} {shown} > {limit_shown}")
        worst = max(worst, level)
    summary = (
        "; ".join(problems)
        if problems
        else f"ready {ready}, oldest ready {format_duration(snap.oldest_ready_age_s)}, dead {dead}"
    )
    if not problems and snap.totals.exhausted:
        summary += f", exhausted {snap.totals.exhausted}"
    if not problems and replica is not None:
        summary += f", replica lag {lag:.1f}s" if lag is not None else ", replica lag unknown"
    elif not problems and limits.replica_lag_s.warn is not None:
        summary += ", primary (no replica lag)"
    perf_items = [
        _perf("oldest_ready_age", age, limits.oldest_age_s, "s"),
        _perf("dead", dead, limits.dead),
        _perf("ready", ready, limits.ready),
    ]
    if lag is not None:
        perf_items.append(_perf("replica_lag", lag, limits.replica_lag_s, "s"))
    perf = " ".join(perf_items)
    return worst, f"JOBTUI {STATUS[worst]} - {summary} | {perf}"


def unknown(message: str) -> tuple[int, str]:
    """The UNKNOWN line for a failure to read the figures."""
    return UNKNOWN, f"JOBTUI UNKNOWN - {message}"
