"""The producer API: put jobs in the queue, inside the caller's own transaction.

`enqueue(conn, kind, payload)` and `enqueue_many(conn, jobs)` take a psycopg connection (sync or
async) or a DSN. With a connection, the job commits or rolls back with the caller's work; with
an async connection the call returns an awaitable. Idle workers are woken by one NOTIFY per
call, delivered at commit.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, overload

import psycopg

from jobtui.config import resolve_schema
from jobtui.db import connect
from jobtui.sql import notify_channel, queries

DEFAULT_MAX_ATTEMPTS = 5
MAX_KIND_CHARS = 200


class InvalidJob(ValueError):
    """A job that cannot be enqueued as given (bad kind, payload or attempts)."""


@dataclass(frozen=True)
class JobSpec:
    """One job to enqueue."""

    kind: str
    payload: Any = field(default_factory=dict)
    run_at: datetime | None = None
    delay: timedelta | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    priority: int = 0

    def validated(self) -> JobSpec:
        """This job, after checking every field; raises InvalidJob."""
        self.validated_without_payload()
        self.payload_json()
        return self

    def validated_without_payload(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise InvalidJob("job kind must be a non-empty string")
        if len(self.kind) > MAX_KIND_CHARS:
            raise InvalidJob(f"job kind is longer than {MAX_KIND_CHARS} characters")
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidJob(f"max_attempts must be an integer, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise InvalidJob(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.max_attempts >= 2**31:
            raise InvalidJob(f"max_attempts {self.max_attempts} is out of range")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidJob(f"priority must be an integer, not {self.priority!r}")
        if not -(2**31) <= self.priority < 2**31:
            raise InvalidJob(f"priority {self.priority} is out of range")
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise InvalidJob("run_at must be timezone-aware")
        self._check_when()

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
        try:
            text = _ENCODER.encode(self.payload)
        except RecursionError:
            raise InvalidJob("payload is nested too deeply to store") from None
        except (TypeError, ValueError) as exc:
            raise InvalidJob(f"payload is not JSON-serialisable: {exc}") from None
        if "\\u0000" in text:
            raise InvalidJob(
                "payload contains a NUL character, which PostgreSQL jsonb cannot store"
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJob(
                "payload contains a lone surrogate (text that is not valid Unicode)"
            ) from None
        return text


Prepared = tuple[JobSpec, str]  # a validated job and its payload's JSON text


def _prepare(item: JobSpec | Mapping[str, Any]) -> Prepared:
    """Validate one job and encode its payload once (the JSON text is what gets sent)."""
    if isinstance(item, JobSpec):
        spec = item
    elif not isinstance(item, Mapping) or "kind" not in item:
        raise InvalidJob(f"each job needs a 'kind': {item!r:.80}")
    else:
        unknown = set(item) - _FIELDS
        if unknown:
            raise InvalidJob(f"unknown job field(s): {', '.join(sorted(unknown))}")
        spec = JobSpec(**item)
    text = spec.payload_json()
    spec.validated_without_payload()
    return spec, text


# One encoder for every payload: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)
_FIELDS = frozenset({"kind", "payload", "run_at", "delay", "max_attempts", "priority"})


def _params(prepared: Prepared, channel: str) -> dict[str, Any]:
    spec, text = prepared
    return {
        "kind": spec.kind,
        "payload": text,
        "run_at": spec.run_at,
        "delay": spec.delay or _ZERO,
        "max_attempts": spec.max_attempts,
        "priority": spec.priority,
        "channel": channel,
    }


_ZERO = timedelta(0)


Target = psycopg.Connection | psycopg.AsyncConnection | str


@overload
def enqueue(
    target: psycopg.AsyncConnection, kind: str, payload: Any = ..., **options: Any
) -> Awaitable[int]: ...
@overload
def enqueue(
    target: psycopg.Connection | str, kind: str, payload: Any = ..., **options: Any
) -> int: ...
def enqueue(target: Target, kind: str, payload: Any = None, **options: Any) -> Any:
    """Enqueue one job and return its id.

    Options: `run_at` (aware datetime), `delay` (timedelta), `max_attempts` (≥ 1),
    `priority` (higher runs first), `schema` (else JOBTUI_SCHEMA, else `public`).
    """
    schema = resolve_schema(options.pop("schema", None))
    prepared = _prepare({"kind": kind, "payload": {} if payload is None else payload, **options})
    sql, params = queries(schema).enqueue, _params(prepared, notify_channel(schema))
    if isinstance(target, psycopg.AsyncConnection):
        return _enqueue_async(target, sql, params)
    if isinstance(target, str):
        with connect(target, autocommit=False) as conn:
            return enqueue(conn, kind, payload, schema=schema, **options)
    row = target.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


async def _enqueue_async(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any]) -> int:
    row = await (await conn.execute(sql, params)).fetchone()
    assert row is not None
    return int(row[0])


Progress = Callable[[int], None]


@overload
def enqueue_many(
    target: psycopg.AsyncConnection,
    jobs: Iterable[JobSpec | Mapping[str, Any]],
    *,
    schema: str | None = ...,
    on_progress: Progress | None = ...,
) -> Awaitable[int]: ...
@overload
def enqueue_many(
    target: psycopg.Connection | str,
    jobs: Iterable[JobSpec | Mapping[str, Any]],
    *,
    schema: str | None = ...,
    on_progress: Progress | None = ...,
) -> int: ...
def enqueue_many(
    target: Target,
    jobs: Iterable[JobSpec | Mapping[str, Any]],
    *,
    schema: str | None = None,
    on_progress: Progress | None = None,
) -> Any:
    """Enqueue many jobs with one COPY and one NOTIFY; return how many were written.

    Every job is validated before the first row is sent, so a bad one writes nothing.
    `on_progress(n)` is called with the running count every 1 000 rows.
    """
    schema = resolve_schema(schema)
    specs = [_prepare(item) for item in jobs]
    if isinstance(target, psycopg.AsyncConnection):
        return _enqueue_many_async(target, specs, schema, on_progress)
    if isinstance(target, str):
        with connect(target, autocommit=False) as conn:
            return _enqueue_many_sync(conn, specs, schema, on_progress)
    return _enqueue_many_sync(target, specs, schema, on_progress)


def _enqueue_many_sync(
    conn: psycopg.Connection, specs: list[Prepared], schema: str, on_progress: Progress | None
) -> int:
    q = queries(schema)
    with conn.transaction():
        now_row = conn.execute(q.transaction_now).fetchone()
        assert now_row is not None
        with conn.cursor() as cur, cur.copy(q.enqueue_copy) as copy:
            for done, chunk in _copy_chunks(specs, now_row[0]):
                copy.write(chunk)
                if on_progress:
                    on_progress(done)
        if specs:
            conn.execute(q.notify, {"channel": notify_channel(schema), "message": "bulk"})
    if on_progress:
        on_progress(len(specs))
    return len(specs)


async def _enqueue_many_async(
    conn: psycopg.AsyncConnection, specs: list[Prepared], schema: str, on_progress: Progress | None
) -> int:
    q = queries(schema)
    async with conn.transaction():
        now_row = await (await conn.execute(q.transaction_now)).fetchone()
        assert now_row is not None
        async with conn.cursor() as cur, cur.copy(q.enqueue_copy) as copy:
            for done, chunk in _copy_chunks(specs, now_row[0]):
                await copy.write(chunk)
                if on_progress:
                    on_progress(done)
        if specs:
            await conn.execute(q.notify, {"channel": notify_channel(schema), "message": "bulk"})
    if on_progress:
        on_progress(len(specs))
    return len(specs)


COPY_CHUNK_ROWS = 1000


def _copy_text(value: str) -> str:
    """A value escaped for COPY's text format."""
    return (
        value.replace("\\", "\\\\")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )


def _copy_chunks(specs: list[Prepared], now: datetime) -> Iterable[tuple[int, str]]:
    """COPY text-format data in chunks of rows, with the running row count.

    Rows are formatted here rather than by psycopg's per-row writer: the payload is already
    JSON text (which never holds a raw tab or newline, so only backslashes need escaping),
    and kinds and times repeat, so each is formatted once. run_at defaults to the
    transaction's now(), exactly as the column default would.
    """
    kinds: dict[str, str] = {}
    times: dict[tuple[datetime | None, timedelta | None], str] = {}
    lines: list[str] = []
    for done, (spec, text) in enumerate(specs, 1):
        kind = kinds.get(spec.kind)
        if kind is None:
            kind = kinds[spec.kind] = _copy_text(spec.kind)
        when = times.get((spec.run_at, spec.delay))
        if when is None:
            at = (spec.run_at or now) + (spec.delay or _ZERO)
            when = times[(spec.run_at, spec.delay)] = at.isoformat()
        if "\\" in text:
            text = text.replace("\\", "\\\\")
        lines.append(f"{kind}\t{text}\t{when}\t{spec.max_attempts}\t{spec.priority}\n")
        if len(lines) == COPY_CHUNK_ROWS or done == len(specs):
            yield done, "".join(lines)
            lines = []
