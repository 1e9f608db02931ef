"""What each operator action does and how it is described in the confirmation and the result.

Only `jobtui.ops` writes; this module names, for each action, the by-ids function, the
matching-filter function and the count used to tell the operator exactly how many rows a
"matching now" choice covers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from jobtui import browse, ops
from jobtui.models import PENDING_STATES, DeadFilter, JobFilter


@dataclass(frozen=True)
class ActionSpec:
    verb: str  # "Requeue"
    past: str  # "requeued"
    noun: str  # "dead letter"
    by_ids: Callable[..., Awaitable[int]]
    matching: Callable[..., Awaitable[int]] | None
    count: Callable[..., Awaitable[int]] | None
    destructive: bool = False
    result: str = "{Past} {what}"  # the notification, e.g. "Requeued 3 dead letters"
    # The filter a "matching now" choice may act on, from the one in force (None: no such choice).
    scope: Callable[[Any], Any] = lambda flt: flt

    def outcome(self, n: int) -> str:
        return self.result.format(Past=self.past.capitalize(), what=self.nouns(n))

    def nouns(self, n: int) -> str:
        return f"{n:,} {self.noun}{'' if n == 1 else 's'}"


REQUEUE = ActionSpec(
    "Requeue",
    "requeued",
    "dead letter",
    ops.requeue_dead,
    ops.requeue_dead_matching,
    browse.count_dead,
)
DELETE = ActionSpec(
    "Delete",
    "deleted",
    "dead letter",
    ops.delete_dead,
    ops.delete_dead_matching,
    browse.count_dead,
    destructive=True,
)


def cancellable(flt: JobFilter | None) -> JobFilter | None:
    """The filter narrowed to unfinished states (the only ones a cancel can change), or None."""
    if flt is None:
        return None
    states = tuple(s for s in (flt.states or PENDING_STATES) if s in PENDING_STATES)
    if not states:
        return None
    return replace(flt, states=states)


CANCEL = ActionSpec(
    "Cancel",
    "cancelled",
    "job",
    ops.cancel_jobs,
    ops.cancel_jobs_matching,
    browse.count_jobs,
    destructive=True,
    scope=cancellable,
)
RUN_NOW = ActionSpec(
    "Run now",
    "made due",
    "job",
    ops.run_now,
    None,
    None,
    result="Made {what} due now",
    scope=lambda flt: None,  # by ids only: the jobs pane's filter is not offered
)


def describe_filter(flt: Any) -> str:
    """A short description of a filter for confirmations and audit-like notifications."""
    if isinstance(flt, JobFilter):
        parts = []
        if flt.states:
            parts.append("state " + ",".join(flt.states))
        if flt.kind:
            parts.append("kind " + flt.kind)
        if flt.unique_key:
            parts.append(f"key {flt.unique_key!r}")
        if flt.text:
            parts.append(f"text {flt.text!r}")
        return ", ".join(parts) or "no filter"
    if isinstance(flt, DeadFilter):
        parts = []
        if flt.kind:
            parts.append("kind " + flt.kind)
        if flt.unique_key:
            parts.append(f"key {flt.unique_key!r}")
        if flt.signature:
            parts.append(f"signature {flt.signature!r}")
        if flt.error:
            parts.append(f"error {flt.error!r}")
        if flt.text:
            parts.append(f"text {flt.text!r}")
        return ", ".join(parts) or "no filter"
    return ""
