"""What happens when an attempt ends, and how its outcome waits for the flusher.

## What happens when a job fails (every path, in one place)
The attempt limit is always the *effective* one, by one rule in one place, the SQL function
jobtui_max_attempts (migration 0023): the kind's handler declaration in `kind_handlers` (the
last worker started with a handler for the kind) when it declares one, else the row's. The
claim, the rescue, the sweep, `why` and the console all judge by it; the claim also writes
it into the row, and tells the handler. Attempts are counted at claim.

- The handler raises (or times out, or its payload cannot be decoded): `record_failure` below
  buffers a *retry* (back-off `spec.backoff(attempt)`) while `attempt < max_attempts`, else a
  *burial*. `worker_retry` / `worker_bury` write it, re-checking that this worker still holds
  this attempt; if a cancel was requested meanwhile the job ends *cancelled* instead.
- The worker dies or stops heartbeating past its own `heartbeat_timeout_s`: another worker's
  housekeeper rescues the job (`worker_rescue`): back to ready, to dead letters if it was the
  last attempt, or cancelled if a cancel was requested.
- The worker stops (shutdown past the grace): the job is *released* with the attempt given
  back (`worker_release`), or cancelled if a cancel was requested.
- The worker finds its own heartbeat overdue past its timeout (frozen, partitioned) while
  a handler ran: that attempt fails with `HeartbeatLost` (dispatcher.py), as a rescue would
  record it; a job it had claimed but not started is released.
- A row left unlocked with no attempt left (by an article-style consumer, or because a
  deploy lowered the handler's limit): the housekeeper's sweep buries it
  (`worker_bury_exhausted`), every prune interval.
- A plain handler's thread that overran its timeout: the failure is written when the thread
  ends (or when the worker stops); until then the job's row stays locked by this worker.
Burials, rescues to dead letters and the sweep all go through the one SQL function
`jobtui_move_to_dead` (migration 0004, 0023): a job is never in both tables and never in
neither, and the move is never refused (an id an older dead letter holds moves under a new id).

## Buffering
The flusher takes everything buffered so far (group commit); a failed write puts it back to
be retried, which is safe because every statement re-checks the attempt it ends.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from jobtui.registry import HandlerSpec

MAX_TRACEBACK_CHARS = 20_000
MAX_ERROR_CHARS = 2_000


def _clean(text: str, limit: int, *, keep_tail: bool) -> str:
    """Text PostgreSQL can store: no NUL (jsonb cannot hold it), no lone surrogates (from bytes
    decoded with `surrogateescape`, which UTF-8 cannot encode: one such error text would make
    every write of the batch fail, forever), at most `limit` characters: the tail of a
    traceback (where the error is), the head of a message (its type, which groups failures)."""
    if len(text) > 4 * limit:  # a handler may raise with megabytes of message: cut first
        text = text[-4 * limit :] if keep_tail else text[: 4 * limit]
    text = text.replace("\x00", "\\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > limit:
        text = "…" + text[-(limit - 1) :] if keep_tail else text[: limit - 1] + "…"
    return text


def describe_exception(exc: BaseException) -> str:
    """`ExcType: message` (just `ExcType` when the message is empty).

    Never raises: a handler's exception may have a `__str__` that fails or returns a non-str.
    """
    name = type(exc).__name__
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - whatever the handler's class does
        message = "<exception str() failed>"
    text = f"{name}: {message}" if message else name
    return _clean(text, MAX_ERROR_CHARS, keep_tail=False)


def format_traceback(exc: BaseException) -> str | None:
    """The traceback as Python prints it, without local variables (None if even that fails)."""
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:  # noqa: BLE001 - a hostile exception must not stop the worker
        return None
    return _clean(text, MAX_TRACEBACK_CHARS, keep_tail=True)


@dataclass
class Outcomes:
    """Attempts that ended and are not written yet, by what must be written."""

    done: list[tuple[int, int]] = field(default_factory=list)  # (id, attempt)
    cancelled: list[tuple[int, int]] = field(default_factory=list)
    released: list[tuple[int, int]] = field(default_factory=list)
    # (id, attempt, delay_s, error, traceback)
    retry: list[tuple[int, int, float, str, str | None]] = field(default_factory=list)
    # (id, attempt, error, traceback)
    bury: list[tuple[int, int, str, str | None]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.done or self.cancelled or self.released or self.retry or self.bury)

    def __len__(self) -> int:
        return (
            len(self.done)
            + len(self.cancelled)
            + len(self.released)
            + len(self.retry)
            + len(self.bury)
        )

    def take(self) -> Outcomes:
        """Everything buffered so far; this buffer starts empty again."""
        taken = Outcomes(self.done, self.cancelled, self.released, self.retry, self.bury)
        self.done, self.cancelled, self.released, self.retry, self.bury = [], [], [], [], []
        return taken

    def put_back(self, other: Outcomes) -> None:
        """Return outcomes whose write failed; they go first next time."""
        self.done[:0] = other.done
        self.cancelled[:0] = other.cancelled
        self.released[:0] = other.released
        self.retry[:0] = other.retry
        self.bury[:0] = other.bury

    def ids(self) -> list[int]:
        return (
            [i for i, _ in self.done]
            + [i for i, _ in self.cancelled]
            + [i for i, _ in self.released]
            + [r[0] for r in self.retry]
            + [b[0] for b in self.bury]
        )


def failure_text(spec: HandlerSpec, error: BaseException, timed_out: bool) -> str:
    """The error a failed attempt is recorded with."""
    if timed_out and isinstance(error, TimeoutError):
        return f"TimeoutError: handler exceeded its timeout of {spec.timeout:g}s"
    return describe_exception(error)


def record_failure(
    outcomes: Outcomes,
    spec: HandlerSpec,
    job_id: int,
    attempt: int,
    max_attempts: int,
    error: BaseException,
    *,
    timed_out: bool = False,
) -> str:
    """Buffer the outcome of a failed attempt: "failed" (to be retried) or "dead".

    `max_attempts` is the effective limit the claim wrote into the row.
    """
    text = failure_text(spec, error, timed_out)
    tb = format_traceback(error)
    if attempt >= max_attempts:
        outcomes.bury.append((job_id, attempt, text, tb))
        return "dead"
    outcomes.retry.append((job_id, attempt, spec.backoff(attempt), text, tb))
    return "failed"


def short_ids(ids: list[int]) -> str:
    """The first ids of a list, for a log line."""
    return ",".join(map(str, ids[:20])) + (",…" if len(ids) > 20 else "")
