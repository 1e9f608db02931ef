"""Plain records passed between the engine, the CLI and the console.

Read functions (browse, metrics) return these; the console and the CLI only render them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

# Derived states of a row in `jobs` (dead letters live in their own table).
# `exhausted`: unfinished, unlocked rows whose attempts reached max_attempts (a consumer gave up on
# them without moving them to dead_letters); they can never run, so they are not ready.
JOB_STATES = ("ready", "scheduled", "retrying", "running", "exhausted", "succeeded", "cancelled")
PENDING_STATES = ("ready", "scheduled", "retrying", "running", "exhausted")

T = TypeVar("T")


@dataclass(frozen=True)
class ErrorEntry:
    """One failed attempt, as stored in the `errors` JSON array of a job or dead letter."""

    attempt: int
    at: str  # ISO 8601 timestamp
    error: str  # "ExceptionType: message" (first line used for grouping)
    traceback: str | None = None
    worker: str | None = None
    started: str | None = None  # ISO 8601: when the attempt was claimed (entries since 2026-12)

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> ErrorEntry:
        started = item.get("started")
        return cls(
            attempt=int(item.get("attempt") or 0),
            at=str(item.get("at") or ""),
            error=str(item.get("error") or ""),
            traceback=item.get("traceback"),
            worker=item.get("worker"),
            started=str(started) if started else None,
        )


@dataclass(frozen=True)
class JobRow:
    id: int
    kind: str
    state: str  # one of JOB_STATES
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    locked_at: datetime | None
    locked_by: str | None
    finished_at: datetime | None
    cancelled_at: datetime | None
    cancel_requested: bool
    last_error: str | None
    errors: list[ErrorEntry] = field(default_factory=list)
    unique_key: str | None = None


@dataclass(frozen=True)
class DeadLetterRow:
    id: int
    kind: str
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    created_at: datetime
    run_at: datetime
    last_error: str | None
    errors: list[ErrorEntry]
    reason: str  # "failed", "worker_lost", "timeout", "exhausted"
    died_at: datetime
    error_signature: str
    unique_key: str | None = None


@dataclass(frozen=True)
class DeadGroup:
    """Dead letters of one kind sharing one error signature."""

    kind: str
    error_signature: str
    count: int
    first_seen: datetime
    last_seen: datetime
    sample_id: int


@dataclass(frozen=True)
class JobFilter:
    """What the Jobs browser shows. `text` matches an id exactly, payload text or error text."""

    states: tuple[str, ...] = ()
    kind: str | None = None
    text: str | None = None
    unique_key: str | None = None  # `key:` exact unique key


@dataclass(frozen=True)
class DeadFilter:
    """What the Dead letters browser shows; every field narrows (AND)."""

    kind: str | None = None
    error: str | None = None  # substring of the error text, case-insensitive
    signature: str | None = None  # exact error signature (one group)
    text: str | None = None  # id exactly, or substring of payload text
    unique_key: str | None = None  # `key:` exact unique key


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a keyset-paged listing, newest first; `next_before` continues it."""

    rows: list[T]
    next_before: int | None


@dataclass(frozen=True)
class CappedCount:
    """A count that stops at `cap`, so showing it never scans millions of rows (issue 12):
    `capped` says there are more than `n` (== cap) and `text` reads "10k+"."""

    n: int
    capped: bool

    @property
    def text(self) -> str:
        if not self.capped:
            return f"{self.n:,}"
        return f"{self.n // 1000}k+" if self.n >= 1000 and self.n % 1000 == 0 else f"{self.n:,}+"


@dataclass(frozen=True)
class WorkerRow:
    id: str
    host: str
    pid: int
    kinds: list[str]
    concurrency: int
    running: int
    started_at: datetime
    heartbeat_age_s: float
    stale: bool
    # Issue 9 (migration 0004): threads of plain handlers that overran and still hold a slot,
    # outcomes the worker could not write, and the settings others judge its liveness by.
    abandoned: int = 0
    outcome_errors: int = 0
    last_outcome_error: str | None = None
    heartbeat_interval_s: float = 5.0
    heartbeat_timeout_s: float = 30.0
    # Migration 0005: how it is woken ('listen' or 'polling', and why it polls).
    wakeup_mode: str = "listen"
    wakeup_note: str | None = None
    listen_connected: bool = True
    last_wakeup_at: datetime | None = None
    poll_interval_s: float = 1.0
    # Migration 0018: what an operator asked of it ('quiet', 'stop') and what it says it is
    # doing about that; they differ until the worker has seen the request.
    control: str | None = None
    control_applied: str | None = None


@dataclass(frozen=True)
class KindFigures:
    kind: str
    ready: int = 0
    scheduled: int = 0
    running: int = 0
    retrying: int = 0
    dead: int = 0
    exhausted: int = 0  # attempts >= max_attempts, unlocked, unfinished: will never run
    oldest_ready_age_s: float | None = None
    done_per_min: float = 0.0
    failed_per_min: float = 0.0
    failure_rate: float = 0.0  # failed / (done + failed) over the window, 0..1
    p50_ms: float | None = None
    p95_ms: float | None = None
    paused: bool = False
    handled: bool = True  # False when no live worker handles this kind
    concurrency_limit: int | None = None  # effective limits from kind_limits
    per_worker_limit: int | None = None
    rate_limit: str | None = None  # like "100/m" or "5/s"
    # Drain estimate (issue 12): backlog ÷ (completion rate − arrival rate) over the window.
    arrived_per_min: float = 0.0  # jobs of this kind created per minute over the window
    drain_s: float | None = None  # seconds until the backlog is gone; None: empty or not draining
    not_draining: bool = False  # a backlog exists and arrivals keep up with completions


@dataclass(frozen=True)
class StateCounts:
    ready: int = 0
    scheduled: int = 0
    running: int = 0
    retrying: int = 0
    dead: int = 0
    exhausted: int = 0


@dataclass(frozen=True)
class ReplicaInfo:
    """The snapshot was taken on a hot standby. `lag_s` is 0 when everything received has been
    replayed (an idle primary is not lag), None when the standby has replayed nothing yet."""

    lag_s: float | None
    replay_lsn: str | None


@dataclass(frozen=True)
class HistoryPoint:
    """One minute of history for the sparklines."""

    minute: datetime
    ready: int | None
    oldest_ready_age_s: float | None
    done: int
    failed: int


@dataclass(frozen=True)
class Snapshot:
    """Everything the Overview shows, taken in a handful of indexed queries."""

    taken_at: datetime
    totals: StateCounts
    oldest_ready_age_s: float | None
    done_per_min: float
    failure_rate: float
    kinds: list[KindFigures]
    history: list[HistoryPoint]
    workers: list[WorkerRow]
    paused: frozenset[str]
    replica: ReplicaInfo | None = None  # None on a primary


@dataclass(frozen=True)
class RequeueOutcome:
    """What a requeue of keyed dead letters did: requeued ids, and ids left in dead letters
    because an unfinished job holds their unique key."""

    requeued: list[int]
    skipped: list[int]


@dataclass(frozen=True)
class ScheduleRow:
    """One periodic job as the CLI and the console list it."""

    name: str
    cron: str
    timezone: str
    kind: str
    payload: Any
    missed: str  # "skip" or "latest"
    paused_at: datetime | None
    paused_by: str | None
    next_tick: datetime | None  # None while paused or before a worker first looked at it
    last_tick: datetime | None
    last_job_id: int | None
    last_enqueued_at: datetime | None
    last_state: str | None  # a JOB_STATES value, "dead", or None once that job was pruned


@dataclass(frozen=True)
class KindLimitRow:
    """One kind's limits as the CLI and the console show them: effective values, and where
    they came from (declared on the handler, or overridden by an operator: who and when)."""

    kind: str
    concurrency: int | None
    per_worker: int | None
    rate: int | None
    period_s: int  # 1 or 60
    limited: bool
    overridden: bool
    declared_concurrency: int | None
    declared_per_worker: int | None
    declared_rate: int | None
    declared_period_s: int
    declared_at: datetime | None
    override_concurrency: int | None
    override_per_worker: int | None
    override_rate: int | None
    override_period_s: int
    overridden_by: str | None
    overridden_at: datetime | None
