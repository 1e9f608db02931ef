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
from psycopg.types.json import Jsonb

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
        self._check_payload()
        return self

    def _check_when(self) -> None:
        """Refuse a time after 9999-12-31: PostgreSQL stores it, but no client can read it."""
        start = self.run_at or datetime.now(UTC)
        try:
            start + (self.delay or timedelta(0))
        except OverflowError:
            raise InvalidJob(
                "run_at must be before the end of 9999-12-31 (later dates cannot be read back)"
            ) from None

    def _check_payload(self) -> None:
        try:
            text = json.dumps(self.payload, allow_nan=False, ensure_ascii=False)
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


def _spec(item: JobSpec | Mapping[str, Any]) -> JobSpec:
    if isinstance(item, JobSpec):
        return item.validated()
    if not isinstance(item, Mapping) or "kind" not in item:
        raise InvalidJob(f"each job needs a 'kind': {item!r:.80}")
    unknown = set(item) - {"kind", "payload", "run_at", "delay", "max_attempts", "priority"}
    if unknown:
        raise InvalidJob(f"unknown job field(s): {', '.join(sorted(unknown))}")
    return JobSpec(**item).validated()


def _params(spec: JobSpec, channel: str) -> dict[str, Any]:
    return {
        "kind": spec.kind,
        "payload": Jsonb(spec.payload),
        "run_at": spec.run_at,
        "delay": spec.delay or timedelta(0),
        "max_attempts": spec.max_attempts,
        "priority": spec.priority,
        "channel": channel,
    }


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
    spec = _spec({"kind": kind, "payload": {} if payload is None else payload, **options})
    sql, params = queries(schema).enqueue, _params(spec, notify_channel(schema))
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
    specs = [_spec(item) for item in jobs]
    if isinstance(target, psycopg.AsyncConnection):
        return _enqueue_many_async(target, specs, schema, on_progress)
    if isinstance(target, str):
        with connect(target, autocommit=False) as conn:
            return enqueue_many(conn, specs, schema=schema, on_progress=on_progress)
    q = queries(schema)
    with target.transaction():
        now_row = target.execute(q.transaction_now).fetchone()
        assert now_row is not None
        with target.cursor() as cur, cur.copy(q.enqueue_copy) as copy:
            for i, row in enumerate(_copy_rows(specs, now_row[0]), 1):
                copy.write_row(row)
                if on_progress and i % 1000 == 0:
                    on_progress(i)
        if specs:
            target.execute(q.notify, {"channel": notify_channel(schema), "message": "bulk"})
    if on_progress:
        on_progress(len(specs))
    return len(specs)


async def _enqueue_many_async(
    conn: psycopg.AsyncConnection, specs: list[JobSpec], schema: str, on_progress: Progress | None
) -> int:
    q = queries(schema)
    async with conn.transaction():
        now_row = await (await conn.execute(q.transaction_now)).fetchone()
        assert now_row is not None
        async with conn.cursor() as cur, cur.copy(q.enqueue_copy) as copy:
            for i, row in enumerate(_copy_rows(specs, now_row[0]), 1):
                await copy.write_row(row)
                if on_progress and i % 1000 == 0:
                    on_progress(i)
        if specs:
            await conn.execute(q.notify, {"channel": notify_channel(schema), "message": "bulk"})
    if on_progress:
        on_progress(len(specs))
    return len(specs)


def _copy_rows(specs: list[JobSpec], now: datetime) -> Iterable[tuple[Any, ...]]:
    """COPY rows; run_at defaults to the transaction's now(), exactly as the column default."""
    for s in specs:
        run_at = (s.run_at or now) + (s.delay or timedelta(0))
        yield (s.kind, Jsonb(s.payload), run_at, s.max_attempts, s.priority)
