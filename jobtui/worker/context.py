"""What a running handler can know about its own job (`jobtui.worker.current_job()`).

Kept in a `contextvars.ContextVar`, so it is right inside async handlers (each job runs in its
own task) and inside plain handlers (their thread runs in a copy of the job's context).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any


class JobCancelled(Exception):
    """Raised by `JobContext.check_cancelled()` when the job should stop (cancel or shutdown)."""


class JobContext:
    """The job a handler is running: `id`, `kind`, `attempt`, `max_attempts`, `cancelled`.

    `cancelled` (a `threading.Event`) is set when an operator cancels the job, when the worker
    shuts down past its grace period, when the handler's timeout expires, or when the job was
    rescued from under this worker. Async handlers are also cancelled with `task.cancel()`;
    plain handlers (in threads) cannot be interrupted, so long ones should poll `cancelled` or
    call `check_cancelled()` and stop by raising.
    """

    __slots__ = ("_event", "attempt", "id", "kind", "max_attempts", "worker_id")

    def __init__(
        self, id: int, kind: str, attempt: int, max_attempts: int, worker_id: str = ""
    ) -> None:
        self.id = id
        self.kind = kind
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.worker_id = worker_id
        # Made on first use: most jobs never look at it, and an Event costs a lock and a
        # condition, which adds up at tens of thousands of jobs a second.
        self._event: threading.Event | None = None

    @property
    def cancelled(self) -> threading.Event:
        event = self._event
        if event is None:
            with _EVENT_LOCK:
                if self._event is None:
                    self._event = threading.Event()
                event = self._event
        return event

    @property
    def is_cancelled(self) -> bool:
        event = self._event
        return event is not None and event.is_set()

    def check_cancelled(self) -> None:
        """Raise JobCancelled if this job has been asked to stop."""
        if self.is_cancelled:
            raise JobCancelled(f"job {self.id} was cancelled")

    def __iter__(self) -> Iterator[Any]:
        """Unpacks as (id, kind, attempt, max_attempts, cancelled)."""
        return iter((self.id, self.kind, self.attempt, self.max_attempts, self.cancelled))

    def __repr__(self) -> str:
        return (
            f"JobContext(id={self.id}, kind={self.kind!r}, attempt={self.attempt}, "
            f"max_attempts={self.max_attempts}, cancelled={self.is_cancelled})"
        )


_EVENT_LOCK = threading.Lock()
_CURRENT: ContextVar[JobContext | None] = ContextVar("jobtui_current_job", default=None)


def current_job() -> JobContext:
    """The job the calling handler is running; RuntimeError outside a handler."""
    ctx = _CURRENT.get()
    if ctx is None:
        raise RuntimeError("current_job() was called outside a jobtui handler")
    return ctx


def set_current(ctx: JobContext) -> None:
    _CURRENT.set(ctx)
