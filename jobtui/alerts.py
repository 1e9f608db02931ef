"""Alert rules: one definition of "something is wrong", evaluated in one place for every surface.

The console's alarm list, `jobtui check` and `jobtui stats --prometheus` all call `assess` (or
`evaluate`, its firing part) on a metrics `Snapshot`, so for the same figures they cannot
disagree. A rule names a figure (`MEASURES`) and gives it a warning and/or critical level; a
value strictly above a level reaches it (equal is still fine, as `check` has always done).

Rules apply per kind (defaults for every kind, overridden for exact kind names such as
`sync[eu]`, or for glob patterns written with a `glob:` prefix such as `glob:export_*`) or to the
whole queue (kind `*`, the totals `check`'s flags have always read).
Where they come from (the config file's `[alerts]` table, or `check`'s flags) is decided by
the caller; this module parses the table but reads no file.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from jobtui.config import InvalidDuration, format_duration, parse_duration
from jobtui.models import KindFigures, Snapshot

NOT_DRAINING = "not draining"
QUEUE = "*"  # the `kind` of a whole-queue verdict (the worker's "every kind" spelling)


class Level(IntEnum):
    """How bad a verdict is; the numbers are the Nagios exit codes for the same states."""

    OK = 0
    WARN = 1
    CRIT = 2


class InvalidRule(ValueError):
    """An alert rule that cannot be used; the message is one line naming the rule."""


@dataclass(frozen=True)
class Threshold:
    """A rule's levels: a value above `warn` warns, above `crit` is critical (None: unchecked)."""

    warn: float | None = None
    crit: float | None = None

    def level(self, value: float) -> Level:
        if self.crit is not None and value > self.crit:
            return Level.CRIT
        if self.warn is not None and value > self.warn:
            return Level.WARN
        return Level.OK

    def limit(self, level: Level) -> float | None:
        """The level's threshold; for OK, the lowest one that could fire."""
        if level is Level.CRIT:
            return self.crit
        return self.warn if self.warn is not None else self.crit


@dataclass(frozen=True)
class Reading:
    """One figure as a rule sees it. `value` None: it cannot be read now (a warning)."""

    value: float | None
    shown: str


@dataclass(frozen=True)
class Measure:
    """A figure a rule may watch: how to read it for a kind and/or the whole queue."""

    name: str
    what: str  # how the status line names it: "oldest ready job"
    unit: str  # "duration", "count" or "ratio": how thresholds are written and shown
    of_kind: Callable[[KindFigures], Reading] | None = None
    of_queue: Callable[[Snapshot], Reading] | None = None
    # The words when "{what} {shown} > {limit}" reads badly: (shown, limit or None) -> text.
    phrase: Callable[[str, str | None], str] | None = None

    def says(self, shown: str, limit: str | None) -> str:
        if self.phrase is not None:
            return self.phrase(shown, limit)
        return f"{self.what} {shown}" + ("" if limit is None else f" > {limit}")

    def shown(self, value: float) -> str:
        if self.unit == "duration":
            return format_duration(value)
        if self.unit == "ratio":
            whole = math.isclose(value * 100, round(value * 100), abs_tol=1e-9)
            return f"{value:.0%}" if whole else f"{value:.1%}"
        return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _duration(seconds: float | None) -> Reading:
    value = seconds or 0.0
    return Reading(value, format_duration(value))


def _count(n: int) -> Reading:
    return Reading(float(n), str(n))


def _ratio(r: float) -> Reading:
    return Reading(r, MEASURES["failure_rate"].shown(r))


def _drain(k: KindFigures) -> Reading:
    if k.not_draining:
        return Reading(math.inf, NOT_DRAINING)
    return _duration(k.drain_s)


def _unhandled_ready(k: KindFigures) -> Reading:
    return _count(0 if k.handled else k.ready)


def _drain_phrase(shown: str, limit: str | None) -> str:
    if shown == NOT_DRAINING:
        return f"{NOT_DRAINING} (arrivals keep up with completions)"
    return f"drain time {shown}" + ("" if limit is None else f" > {limit}")


def _no_worker_phrase(shown: str, limit: str | None) -> str:
    over = "" if limit in (None, "0") else f" > {limit}"
    return f"no live worker handles it ({shown} ready{over})"


def _replica_lag(snap: Snapshot) -> Reading:
    if snap.replica is None:
        return Reading(0.0, "none (primary)")
    if snap.replica.lag_s is None:
        return Reading(None, "unknown (the standby has replayed nothing yet)")
    return Reading(snap.replica.lag_s, f"{snap.replica.lag_s:.1f}s")


MEASURES: dict[str, Measure] = {
    m.name: m
    for m in (
        Measure(
            "oldest_ready",
            "oldest ready job",
            "duration",
            lambda k: _duration(k.oldest_ready_age_s),
            lambda s: _duration(s.oldest_ready_age_s),
        ),
        Measure(
            "dead_letters",
            "dead letters",
            "count",
            lambda k: _count(k.dead),
            lambda s: _count(s.totals.dead),
        ),
        Measure(
            "ready",
            "ready jobs",
            "count",
            lambda k: _count(k.ready),
            lambda s: _count(s.totals.ready),
        ),
        Measure(
            "failure_rate",
            "failure rate",
            "ratio",
            lambda k: _ratio(k.failure_rate),
            lambda s: _ratio(s.failure_rate),
        ),
        Measure("drain_time", "drain time", "duration", of_kind=_drain, phrase=_drain_phrase),
        Measure(
            "no_worker",
            "ready jobs no live worker handles",
            "count",
            of_kind=_unhandled_ready,
            phrase=_no_worker_phrase,
        ),
        Measure("replica_lag", "replica lag", "duration", of_queue=_replica_lag),
    )
}
RULE_ORDER = {name: i for i, name in enumerate(MEASURES)}

# What the console showed before rules existed: oldest ready at 5m/30m, failing at 10% (and
# critical at 30%: a kind failing one attempt in three needs someone now), any
# dead letter, ready jobs of a kind no live worker handles. Drain time is off until asked for:
# a steady queue with a small backlog is "not draining" by design.
DEFAULT_KIND_RULES: dict[str, Threshold] = {
    "oldest_ready": Threshold(300.0, 1800.0),
    "dead_letters": Threshold(warn=0),
    "failure_rate": Threshold(warn=0.10, crit=0.30),
    "no_worker": Threshold(warn=0),
}


GLOB = "glob:"  # `[alerts.kinds."glob:export_*"]`: a pattern, not a name
NAME = "name:"  # `[alerts.kinds."name:odd*kind"]`: a name that holds `*` or `?`
LEGACY_GLOB = "*?"  # an unprefixed key with these was a pattern before `glob:`, and stays one


@dataclass(frozen=True)
class KindOverride:
    """Rules for one kind by its exact name, or for the kinds a `glob:` pattern matches;
    None switches a rule off. Without a prefix a key is a name (`sync[eu]` is the kind
    `sync[eu]`, never a character class), except that one holding `*` or `?` is still read as
    a pattern, as configs written before the prefix meant it; `name:` makes it a name."""

    pattern: str
    rules: Mapping[str, Threshold | None]

    @property
    def is_glob(self) -> bool:
        if self.pattern.startswith((GLOB, NAME)):
            return self.pattern.startswith(GLOB)
        return any(c in self.pattern for c in LEGACY_GLOB)

    @property
    def name(self) -> str:
        """The exact kind name, or the glob without its prefix."""
        for prefix in (GLOB, NAME):
            if self.pattern.startswith(prefix):
                return self.pattern[len(prefix) :]
        return self.pattern

    def matches(self, kind: str) -> bool:
        return fnmatch.fnmatchcase(kind, self.name) if self.is_glob else kind == self.name


@dataclass(frozen=True)
class AlertRules:
    """Every rule in force: defaults for each kind, overrides by kind pattern, queue totals."""

    kind_defaults: Mapping[str, Threshold] = field(default_factory=lambda: DEFAULT_KIND_RULES)
    overrides: tuple[KindOverride, ...] = ()
    queue: Mapping[str, Threshold] = field(default_factory=dict)

    def for_kind(self, kind: str) -> dict[str, Threshold]:
        """The rules for `kind`: the defaults, then matching `glob:` patterns in the order
        written, then its exact name; each override replaces the whole rule it names (both
        levels)."""
        rules: dict[str, Threshold | None] = dict(self.kind_defaults)
        for override in sorted(self.overrides, key=lambda o: not o.is_glob):
            if override.matches(kind):
                rules.update(override.rules)
        return {name: th for name, th in rules.items() if th is not None}


@dataclass(frozen=True)
class Verdict:
    """One rule judged for one kind (`QUEUE` for the whole queue); `text` is one line."""

    rule: str
    kind: str
    level: Level
    value: float | None  # None: the figure could not be read (replica lag before any replay)
    threshold: float | None  # the level's threshold (for OK, the lowest one that could fire)
    text: str

    @property
    def firing(self) -> bool:
        return self.level > Level.OK


Firing = Verdict  # a verdict whose level is WARN or CRIT, as `evaluate` returns them


def _verdict(rule: str, kind: str, reading: Reading, th: Threshold, note: str) -> Verdict:
    measure = MEASURES[rule]
    who = "" if kind == QUEUE else f"{kind}: "
    level = Level.WARN if reading.value is None else th.level(reading.value)
    limit = th.limit(level)
    shown_limit = None if reading.value is None or not level or limit is None else limit
    text = measure.says(reading.shown, None if shown_limit is None else measure.shown(shown_limit))
    return Verdict(rule, kind, level, reading.value, limit, who + text + note)


def severity(v: Verdict) -> tuple[int, int, bool, str]:
    """Sort key: most severe first, then by rule, the whole queue before its kinds."""
    return (-v.level, RULE_ORDER[v.rule], v.kind != QUEUE, v.kind)


def assess(snap: Snapshot, rules: AlertRules) -> list[Verdict]:
    """Every rule × kind in force, firing or not, most severe first (Prometheus lists all)."""
    verdicts = []
    for name, th in rules.queue.items():
        of_queue = MEASURES[name].of_queue
        assert of_queue is not None, name
        verdicts.append(_verdict(name, QUEUE, of_queue(snap), th, ""))
    for k in snap.kinds:
        note = " (kind paused)" if k.paused else ""
        for name, th in rules.for_kind(k.kind).items():
            of_kind = MEASURES[name].of_kind
            assert of_kind is not None, name
            verdicts.append(_verdict(name, k.kind, of_kind(k), th, note))
    return sorted(verdicts, key=severity)


def evaluate(snap: Snapshot, rules: AlertRules) -> list[Firing]:
    """The rules that fire on `snap`, most severe first: what every surface shows."""
    return [v for v in assess(snap, rules) if v.firing]


def by_kind(firings: list[Firing]) -> dict[str, dict[str, Level]]:
    """{kind: {rule: level}} of what fires, so a table can mark a kind's cells by its rules
    (the Overview's age and failure columns) instead of thresholds of its own."""
    found: dict[str, dict[str, Level]] = {}
    for f in firings:
        if f.firing:
            found.setdefault(f.kind, {})[f.rule] = f.level
    return found


# --- the config file's [alerts] table -------------------------------------------------------


def _number(where: str, measure: Measure, value: object) -> float:
    if isinstance(value, bool):
        raise InvalidRule(f"{where}: expected {_expected(measure)}, not {value!r}")
    if measure.unit == "duration" and isinstance(value, str):
        try:
            return parse_duration(value).total_seconds()
        except InvalidDuration as exc:
            raise InvalidRule(f"{where}: {exc}") from None
    if measure.unit == "ratio" and isinstance(value, str) and value.strip().endswith("%"):
        try:
            number: float = float(value.strip()[:-1]) / 100
        except ValueError:
            raise InvalidRule(f'{where}: {value!r} is not a percentage such as "10%"') from None
    elif measure.unit == "count" and isinstance(value, int):
        number = value
    elif measure.unit != "count" and isinstance(value, int | float):
        number = float(value)
    else:
        raise InvalidRule(f"{where}: expected {_expected(measure)}, not {value!r}")
    if not math.isfinite(number):
        raise InvalidRule(f"{where}: expected a finite number, not {value!r}")
    if number < 0:
        raise InvalidRule(f"{where}: must not be negative")
    if measure.unit == "ratio" and number > 1:
        raise InvalidRule(f"{where}: a failure rate is at most 1 (100%)")
    return float(number)


def _expected(measure: Measure) -> str:
    return {
        "duration": 'a duration such as "5m" (or seconds)',
        "count": "a whole number",
        "ratio": 'a ratio from 0 to 1 or a percentage such as "10%"',
    }[measure.unit]


def _rule(where: str, name: str, value: object, scope: str) -> Threshold | None:
    measure = MEASURES.get(name)
    if measure is None:
        hint = ""
        if isinstance(value, Mapping) and set(value) & set(MEASURES):
            hint = f'; rules for one kind go under [alerts.kinds."{name}"]'
        raise InvalidRule(
            f"{where} {name}: unknown alert rule (rules: {', '.join(MEASURES)}){hint}"
        )
    if scope == "queue" and measure.of_queue is None:
        raise InvalidRule(f"{where} {name}: judged per kind, so not under [alerts.queue]")
    if scope != "queue" and measure.of_kind is None:
        raise InvalidRule(f"{where} {name}: a whole-queue rule, put it under [alerts.queue]")
    if value is False:
        return None
    if not isinstance(value, Mapping) or not value:
        raise InvalidRule(
            f"{where} {name}: expected {{ warn = …, crit = … }} (either or both) or false"
        )
    unknown = set(value) - {"warn", "crit"}
    if unknown:
        raise InvalidRule(
            f"{where} {name}: unknown level(s) {', '.join(sorted(unknown))} (use warn, crit)"
        )
    levels = {
        lv: _number(f"{where} {name}.{lv}", measure, value[lv])
        for lv in ("warn", "crit")
        if lv in value
    }
    th = Threshold(levels.get("warn"), levels.get("crit"))
    if th.warn is not None and th.crit is not None and th.crit < th.warn:
        raise InvalidRule(f"{where} {name}: crit must not be below warn")
    return th


def _rules(where: str, table: Mapping[str, Any], scope: str) -> dict[str, Threshold | None]:
    return {str(name): _rule(where, str(name), value, scope) for name, value in table.items()}


def _table(where: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRule(f"{where} must be a table")
    return value


def parse_rules(table: object, oldest_ready: Threshold | None = None) -> AlertRules:
    """AlertRules from the config file's `[alerts]` table (built-in defaults for the rules it
    does not name). `oldest_ready` is the older `[console] oldest_warn/oldest_crit` spelling."""
    alerts = _table("[alerts]", table)
    defaults: dict[str, Threshold | None] = dict(DEFAULT_KIND_RULES)
    if oldest_ready is not None:
        if "oldest_ready" in alerts:
            raise InvalidRule(
                "[alerts] oldest_ready is also set by [console] oldest_warn/oldest_crit; keep one"
            )
        defaults["oldest_ready"] = oldest_ready
    own = {k: v for k, v in alerts.items() if k not in {"kinds", "queue"}}
    defaults.update(_rules("[alerts]", own, "kind"))
    overrides = []
    for pattern, rules in _table("[alerts.kinds]", alerts.get("kinds", {})).items():
        here = f'[alerts.kinds."{pattern}"]'
        override = KindOverride(str(pattern), {})
        if not override.name.strip():
            raise InvalidRule(f"{here}: a kind name or pattern must not be empty")
        overrides.append(KindOverride(str(pattern), _rules(here, _table(here, rules), "kind")))
    queue = _rules("[alerts.queue]", _table("[alerts.queue]", alerts.get("queue", {})), "queue")
    return AlertRules(
        kind_defaults={n: th for n, th in defaults.items() if th is not None},
        overrides=tuple(overrides),
        queue={n: th for n, th in queue.items() if th is not None},
    )
