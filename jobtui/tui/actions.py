"""What each operator action does, which rows it can change, and how it is described.

Only `jobtui.ops` writes; this module names, for each action, the by-ids function, the
matching-filter function and the count used to tell the operator exactly how many rows a
"matching now" choice covers, and the job states it can change (`applicable`), so that a
screen offers only actions that would do something: cancelling a finished job or making a
due job "run now" changes nothing, and offering them reads as if it had.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from jobtui import browse, ops
from jobtui.models import PENDING_STATES, DeadFilter, JobFilter, JobRow

# Job states in which each by-ids action can change a row (dead letters: any row still there).
CANCEL_STATES = PENDING_STATES
RUN_NOW_STATES = ("scheduled", "retrying")  # and only while run_at is in the future
RERUN_STATES = ("succeeded", "cancelled")


@dataclass(frozen=True)
class ActionSpec:
    verb: str  # "Requeue"
    past: str  # "requeued"
    noun: str  # "dead letter"
    # The ops action name: jobtui.ops.applicable_ids keeps only the ids it can change
    # (None: no such check; the outcome says how many had gone).
    key: str | None
    by_ids: Callable[..., Awaitable[int]]
    matching: Callable[..., Awaitable[int]] | None
    count: Callable[..., Awaitable[int]] | None
    destructive: bool = False
    # Why a row the action cannot change is left alone (with `key`): "already finished …".
    inapplicable: str = "gone"
    effect: str = ""  # what the action does to a row, for the confirmation
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
    None,
    ops.requeue_dead,
    ops.requeue_dead_matching,
    browse.count_dead,
    effect="back to jobs with the same id and error history; attempts start again from 0",
)
DELETE = ActionSpec(
    "Delete",
    "deleted",
    "dead letter",
    None,
    ops.delete_dead,
    ops.delete_dead_matching,
    browse.count_dead,
    destructive=True,
    effect="removed for good, payload and error history with it",
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
    "cancel_jobs",
    ops.cancel_jobs,
    ops.cancel_jobs_matching,
    browse.count_jobs,
    destructive=True,
    inapplicable="finished, or already asked to stop",
    effect="a waiting job ends cancelled; a running one is asked to stop (its worker ends it)",
    scope=cancellable,
)
RUN_NOW = ActionSpec(
    "Run now",
    "made due",
    "job",
    "run_now",
    ops.run_now,
    None,
    None,
    result="Made {what} due now",
    inapplicable="not waiting for a future time (already due, running or finished)",
    effect="its run time becomes now, ahead of its schedule or back-off; workers are woken",
    scope=lambda flt: None,  # by ids only: the jobs pane's filter is not offered
)


def applicable(
    state: str, *, due: bool | None = None, cancel_requested: bool = False
) -> tuple[ActionSpec, ...]:
    """The by-ids job actions that can change a job in `state` (CANCEL, RUN_NOW).

    `due`: whether the job's run_at has come (run now changes only a job waiting for a future
    time; None when unknown: offered for scheduled and retrying jobs). A running job whose
    cancel was already requested cannot be cancelled again. Running a finished job again is
    `can_rerun`, a separate action that makes a new job.
    """
    out: list[ActionSpec] = []
    if state in CANCEL_STATES and not (state == "running" and cancel_requested):
        out.append(CANCEL)
    if state in RUN_NOW_STATES and due is not True:
        out.append(RUN_NOW)
    return tuple(out)


def job_actions(row: JobRow, now: datetime) -> tuple[ActionSpec, ...]:
    """`applicable` for a job row read at the server time `now`."""
    return applicable(row.state, due=row.run_at <= now, cancel_requested=row.cancel_requested)


def can_rerun(state: str) -> bool:
    """Whether a job in `state` can be run again as a new job (`jobtui.ops.rerun_job`)."""
    return state in RERUN_STATES


RERUN = ActionSpec(
    "Run again",
    "run again",
    "job",
    "rerun_job",
    ops.rerun_jobs,
    None,
    None,
    result="Ran {what} again as new jobs",
    inapplicable="not finished (only a succeeded or cancelled job can run again)",
    effect="a new job with the same kind, payload and unique key, linked to the original",
    scope=lambda flt: None,  # by ids only
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
