"""One job as a producer describes it, checked field by field before anything is sent.

Kept apart from jobtui.enqueue (which talks to the database) so that declarations made at
import time — a schedule's job in the registry — are checked by the same rules without
importing the enqueue machinery.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_MAX_ATTEMPTS = 5
MAX_KIND_CHARS = 200
MAX_UNIQUE_KEY_BYTES = 1000  # well inside a btree entry's limit (about 2 700 bytes)

# One encoder for every payload: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)


def _reusable_c_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """CPython's C encoder, built once with `_ENCODER`'s options.

    `JSONEncoder.encode` builds a new one on every call (about half the time of a small
    payload). This one keeps no cycle markers, so it holds no state between calls and threads
    may share it: a cycle ends in RecursionError, and any error is raised again by `_ENCODER`
    with its own words. None where the C accelerator is missing (other Pythons).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder: Callable[[Any, int], Sequence[str]] = make(
        None,  # markers: no cycle check (see above)
        _ENCODER.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
    return encoder


_C_ENCODER = _reusable_c_encoder()


def _encode(payload: Any) -> str:
    """`payload` as JSON text, as `_ENCODER.encode` writes it, through the C encoder if any."""
    if _C_ENCODER is not None:
        try:
            return "".join(_C_ENCODER(payload, 0))
        except Exception:  # noqa: BLE001 - the plain encoder below raises it with its own words
            pass
    return _ENCODER.encode(payload)


class InvalidJob(ValueError):
    """A job that cannot be enqueued as given (bad kind, payload or attempts)."""


def check_kind(kind: Any) -> None:
    """Refuse a kind that is not a non-empty string of at most MAX_KIND_CHARS characters.

    Apart from JobSpec so that `enqueue` of a job with no options can check it without building
    a spec (the other fields are then the defaults, which need no check).
    """
    if not isinstance(kind, str) or not kind.strip():
        raise InvalidJob("job kind must be a non-empty string")
    if len(kind) > MAX_KIND_CHARS:
        raise InvalidJob(f"job kind is longer than {MAX_KIND_CHARS} characters")


@dataclass(frozen=True)
class JobSpec:
    """One job to enqueue."""

    kind: str
    payload: Any = field(default_factory=dict)
    run_at: datetime | None = None
    delay: timedelta | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    priority: int = 0
    unique_key: str | None = None
    unique_window: timedelta | None = None

    def validated(self) -> JobSpec:
        """This job, after checking every field; raises InvalidJob."""
        self.validated_without_payload()
        self.payload_json()
        return self

    def validated_without_payload(self) -> None:
        check_kind(self.kind)
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidJob(f"max_attempts must be an integer, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise InvalidJob(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.max_attempts >= 2**31:
            raise InvalidJob(f"max_attempts must be at most {2**31 - 1}, not {self.max_attempts}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidJob(f"priority must be an integer, not {self.priority!r}")
        if not -(2**31) <= self.priority < 2**31:
            raise InvalidJob(
                f"priority must be from {-(2**31)} to {2**31 - 1}, not {self.priority}"
            )
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise InvalidJob("run_at must be timezone-aware")
        self._check_when()
        self._check_unique()

    def _check_unique(self) -> None:
        key, window = self.unique_key, self.unique_window
        if key is not None:
            if not isinstance(key, str) or not key:
                raise InvalidJob("unique_key must be a non-empty string")
            if "\x00" in key:
                raise InvalidJob("unique_key cannot contain a NUL character")
            try:
                size = len(key.encode("utf-8"))
            except UnicodeEncodeError:
                raise InvalidJob("unique_key is not valid Unicode (a lone surrogate)") from None
            if size > MAX_UNIQUE_KEY_BYTES:
                raise InvalidJob(f"unique_key is longer than {MAX_UNIQUE_KEY_BYTES} bytes")
        if window is not None:
            if key is None:
                raise InvalidJob("unique_window needs a unique_key")
            if not isinstance(window, timedelta) or window <= timedelta(0):
                raise InvalidJob(f"unique_window must be a positive timedelta, not {window!r}")

    def _check_when(self) -> None:
        """Refuse a time after 9999-12-31: PostgreSQL stores it, but no client can read it."""
        if not self.delay:
            return  # a datetime itself cannot lie past 9999; only adding a delay can
        start = self.run_at or datetime.now(UTC)
        try:
            start + (self.delay or timedelta(0))
        except OverflowError:
            raise InvalidJob(
                "run_at must be before the end of 9999-12-31 (later dates cannot be read back)"
            ) from None

    def payload_json(self) -> str:
        """The payload as JSON text, refusing what PostgreSQL's jsonb cannot store."""
        return payload_json(self.payload)


def payload_json(payload: Any) -> str:
    """`payload` as JSON text, refusing what PostgreSQL's jsonb cannot store."""
    try:
        text = _encode(payload)
    except RecursionError:
        raise InvalidJob("payload is nested too deeply to store") from None
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"payload is not JSON-serialisable: {exc}") from None
    if "\\u0000" in text:
        raise InvalidJob("payload contains a NUL character, which PostgreSQL jsonb cannot store")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJob(
                "payload contains a lone surrogate (text that is not valid Unicode)"
            ) from None
    return text
