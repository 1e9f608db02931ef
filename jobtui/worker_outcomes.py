"""How finished attempts wait for the flusher: buffered outcomes, written one statement per group.

The flusher takes everything buffered so far (group commit); a failed write puts it back to
be retried, which is safe because every statement re-checks the attempt it ends.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

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
    # (id, attempt, delay_s, error, traceback, handler max_attempts or None)
    retry: list[tuple[int, int, float, str, str | None, int | None]] = field(default_factory=list)
    # (id, attempt, error, traceback, handler max_attempts or None)
    bury: list[tuple[int, int, str, str | None, int | None]] = field(default_factory=list)

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
