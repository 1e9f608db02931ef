"""`jobtui check`'s logic: a Nagios/Icinga plugin's output and exit code from the alert rules.

The output follows the plugin format: a short first line (the status, the counts of problems
per level and the worst problem, then `|` and the performance data), then one line per problem,
most severe first (Nagios's "long output"). Every piece of text is made inert and loses any `|`
(it would start the performance data), so a kind named `mail|ready=0;;;0;` cannot forge a
figure; performance labels are quoted as the format asks (`'` doubled, no `=`).

The verdicts come from `jobtui.alerts.assess`, the one evaluation the console and Prometheus
use too; each problem ends with its rule's name in brackets. The `--max-*` flags
are whole-queue rules: `--max-X` is the WARNING level, `--crit-X` the CRITICAL one (twice the
warning level when absent, so `--max-dead 0` makes any dead letter critical). A value equal to
a threshold is still fine. UNKNOWN (3) is for when the figures cannot be read at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobtui.alarm_order import ordered
from jobtui.alerts import AlertRules, Threshold, Verdict, assess
from jobtui.cli.errors import CHECK_CRITICAL as CRITICAL
from jobtui.cli.errors import CHECK_OK as OK
from jobtui.cli.errors import CHECK_UNKNOWN as UNKNOWN
from jobtui.cli.errors import CHECK_WARNING as WARNING
from jobtui.config import format_duration
from jobtui.inert import one_line
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


FIRST_LINE_PROBLEM = 120  # characters of the worst problem on the first line (NRPE cuts)
DETAIL_LINE = 300  # characters of each problem on the lines after it
MAX_DETAILS = 100  # problem lines at most (NRPE's buffer is 64 KiB at best); then a count


def text(value: object, width: int = DETAIL_LINE) -> str:
    """A piece of plugin output: inert, one line, cut, with `|` (the perfdata separator)
    replaced by `/`."""
    return one_line(value, width).replace("|", "/")


def perf_label(name: str) -> str:
    """A performance-data label: `=` (the value separator) replaced, and quoted with `'`
    doubled when it holds a space or a quote, as the plugin format asks."""
    label = text(name, 60).replace("=", "_")
    if any(c in label for c in " '"):
        return "'" + label.replace("'", "''") + "'"
    return label


def _perf(name: str, value: float, th: Threshold | None, unit: str = "") -> str:
    th = th or Threshold()
    warn = "" if th.warn is None else _n(th.warn)
    crit = "" if th.crit is None else _n(th.crit)
    return f"{perf_label(name)}={_n(value)}{unit};{warn};{crit};0;"


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.3f}"


def problem(v: Verdict, width: int = DETAIL_LINE) -> str:
    """How one firing rule reads: its text, then its rule's name (kept when the text is cut)."""
    rule = f" [{v.rule}]"
    return text(v.text, max(20, width - len(rule))) + rule


def counts(firing: list[Verdict]) -> str:
    """`3 critical, 69 warning`: the problems per level, worst first."""
    n_crit = sum(1 for v in firing if v.level >= CRITICAL)
    parts = [f"{n_crit} critical"] if n_crit else []
    if len(firing) - n_crit:
        parts.append(f"{len(firing) - n_crit} warning")
    return ", ".join(parts)


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


@dataclass(frozen=True)
class Report:
    """The parts of one database's plugin output: its worst level, the first line's summary,
    the performance data items and the problem lines (worst first)."""

    worst: int
    summary: str
    perf: list[str]
    details: list[str]

    def output(self) -> str:
        perf = " ".join(self.perf)
        return "\n".join([f"JOBTUI {STATUS[self.worst]} - {self.summary} | {perf}", *self.details])


def report(snap: Snapshot, rules: AlertRules) -> Report:
    """`snap` judged by `rules`: the problems in the console's alarm order (worst first, then
    what stops work), the summary and the performance data."""
    firing = ordered(v for v in assess(snap, rules) if v.firing)
    worst = max((int(v.level) for v in firing), default=OK)  # Level's numbers are Nagios's
    if firing:
        summary = f"{counts(firing)}: {problem(firing[0], FIRST_LINE_PROBLEM)}"
    else:
        summary = text(_healthy_summary(snap, rules))
    queue = rules.queue
    perf_items = [
        _perf("oldest_ready_age", snap.oldest_ready_age_s or 0.0, queue.get("oldest_ready"), "s"),
        _perf("dead", snap.totals.dead, queue.get("dead_letters")),
        _perf("ready", snap.totals.ready, queue.get("ready")),
    ]
    if snap.replica is not None and snap.replica.lag_s is not None:
        perf_items.append(_perf("replica_lag", snap.replica.lag_s, queue.get("replica_lag"), "s"))
    n_crit = sum(1 for v in firing if v.level >= CRITICAL)
    perf_items += [
        _perf("problems_critical", n_crit, None),
        _perf("problems_warning", len(firing) - n_crit, None),
    ]
    details = [f"{STATUS[int(v.level)]}: {problem(v)}" for v in firing[:MAX_DETAILS]]
    if len(firing) > MAX_DETAILS:
        details.append(f"… and {len(firing) - MAX_DETAILS} more (`jobtui stats` lists them all)")
    return Report(worst, summary, perf_items, details)


def evaluate(snap: Snapshot, rules: AlertRules) -> tuple[int, str]:
    """(exit code, plugin output) for `snap` judged by `rules`: the status line, then one
    line per problem."""
    r = report(snap, rules)
    return r.worst, r.output()


def unknown(message: str) -> tuple[int, str]:
    """The UNKNOWN line for a failure to read the figures."""
    return UNKNOWN, f"JOBTUI UNKNOWN - {text(message)}"
