"""The order alarms are read in: the worst first, then what stops work before what slows it.

An operator reads the first lines of an alarm list and maybe nothing else, so within one level
the alarms that mean jobs are not being done at all come first: a kind no live worker handles,
then a kind that is not draining (arrivals keep up with completions), then the oldest ready job
(oldest first), then every other rule in the rules' own order. The console's alarm list and
`jobtui check` use this one key, so both name the same alarm first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from jobtui.alerts import QUEUE, RULE_ORDER, Level, Verdict

# What stops work, in the order an operator should look at it; other rules come after.
STOPS_WORK = ("no_worker", "not_draining", "oldest_ready")


def _stop_rank(v: Verdict) -> int:
    if v.rule == "drain_time":
        name = "not_draining" if v.value is not None and math.isinf(v.value) else v.rule
    else:
        name = v.rule
    return STOPS_WORK.index(name) if name in STOPS_WORK else len(STOPS_WORK)


def alarm_key(v: Verdict) -> tuple[int, int, float, int, bool, str]:
    """Sort key: level (worst first), then what stops work (no worker, not draining, oldest
    age, oldest first), then the rule's order, the whole queue before its kinds, the kind."""
    age = -(v.value or 0.0) if v.rule == "oldest_ready" else 0.0
    return (-v.level, _stop_rank(v), age, RULE_ORDER[v.rule], v.kind != QUEUE, v.kind)


def ordered(verdicts: Iterable[Verdict]) -> list[Verdict]:
    """The firing verdicts of `verdicts`, in the order they should be read."""
    return sorted((v for v in verdicts if v.level > Level.OK), key=alarm_key)


def critical_count(verdicts: Iterable[Verdict]) -> int:
    """How many of `verdicts` are critical (the "… and N more (M critical)" line)."""
    return sum(1 for v in verdicts if v.level is Level.CRIT)
