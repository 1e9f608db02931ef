"""`jobtui check`'s logic: one Nagios/Icinga status line and exit code from the alert rules.

The verdicts come from `jobtui.alerts.assess`, the one evaluation the console and Prometheus
use too; each problem in the line ends with its rule's name in brackets. The `--max-*` flags
are whole-queue rules: `--max-X` is the WARNING level, `--crit-X` the CRITICAL one (twice the
warning level when absent, so `--max-dead 0` makes any dead letter critical). A value equal to
a threshold is still fine. UNKNOWN (3) is for when the figures cannot be read at all.
"""

from __future__ import annotations

from jobtui.alerts import AlertRules, Threshold, Verdict, assess
from jobtui.cli.errors import CHECK_CRITICAL as CRITICAL
from jobtui.cli.errors import CHECK_OK as OK
from jobtui.cli.errors import CHECK_UNKNOWN as UNKNOWN
from jobtui.cli.errors import CHECK_WARNING as WARNING
from jobtui.config import format_duration
from jobtui.models import Snapshot

STATUS = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}

# `check`'s flags (the part after --max-/--crit-) and the whole-queue rule each one sets.
FLAG_RULES = {
    "oldest-age": "oldest_ready",
    "dead": "dead_letters",
    "ready": "ready",
    "replica-lag": "replica_lag",
}


def flag_threshold(warn: float | None, crit: float | None) -> Threshold | None:
    """A `--max-X`/`--crit-X` pair as a rule's levels (None: neither flag given)."""
    if warn is None and crit is None:
        return None
    return Threshold(warn, crit if crit is not None or warn is None else warn * 2)


def flag_rules(flags: dict[str, tuple[float | None, float | None]]) -> AlertRules | None:
    """The rules `check`'s flags ask for, by flag name (`FLAG_RULES`); None when no flag is
    given (then `check` judges the config file's rules, as the console does)."""
    queue = {
        FLAG_RULES[name]: th
        for name, (warn, crit) in flags.items()
        if (th := flag_threshold(warn, crit)) is not None
    }
    return AlertRules(kind_defaults={}, queue=queue) if queue else None


def _perf(name: str, value: float, th: Threshold | None, unit: str = "") -> str:
    th = th or Threshold()
    warn = "" if th.warn is None else _n(th.warn)
    crit = "" if th.crit is None else _n(th.crit)
    return f"{name}={_n(value)}{unit};{warn};{crit};0;"


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3f}"


def problem(v: Verdict) -> str:
    """How one firing rule reads in the status line: its text, then its rule's name."""
    return f"{v.text} [{v.rule}]"


def _healthy_summary(snap: Snapshot, rules: AlertRules) -> str:
    ready, dead = snap.totals.ready, snap.totals.dead
    summary = f"ready {ready}, oldest ready {format_duration(snap.oldest_ready_age_s)}, dead {dead}"
    if snap.totals.exhausted:
        summary += f", exhausted {snap.totals.exhausted}"
    lag = None if snap.replica is None else snap.replica.lag_s
    if snap.replica is not None:
        summary += f", replica lag {lag:.1f}s" if lag is not None else ", replica lag unknown"
    elif "replica_lag" in rules.queue:
        summary += ", primary (no replica lag)"
    return summary


def evaluate(snap: Snapshot, rules: AlertRules) -> tuple[int, str]:
    """(exit code, status line) for `snap` judged by `rules`."""
    firing = [v for v in assess(snap, rules) if v.firing]
    worst = max((int(v.level) for v in firing), default=OK)  # Level's numbers are Nagios's
    summary = "; ".join(problem(v) for v in firing) or _healthy_summary(snap, rules)
    queue = rules.queue
    perf_items = [
        _perf("oldest_ready_age", snap.oldest_ready_age_s or 0.0, queue.get("oldest_ready"), "s"),
        _perf("dead", snap.totals.dead, queue.get("dead_letters")),
        _perf("ready", snap.totals.ready, queue.get("ready")),
    ]
    if snap.replica is not None and snap.replica.lag_s is not None:
        perf_items.append(_perf("replica_lag", snap.replica.lag_s, queue.get("replica_lag"), "s"))
    perf = " ".join(perf_items)
    return worst, f"JOBTUI {STATUS[worst]} - {summary} | {perf}"


def unknown(message: str) -> tuple[int, str]:
    """The UNKNOWN line for a failure to read the figures."""
    return UNKNOWN, f"JOBTUI UNKNOWN - {message}"
