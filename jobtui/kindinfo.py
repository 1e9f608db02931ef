"""One kind, in depth, for the console's kind screen: its history, errors and settings.

`load(conn, schema, kind, span)` reads everything in one read-only repeatable-read transaction
(one instant), from the per-minute `kind_stats` rows the worker writes (done, failed, run-time
histograms merged into p50/p95 with jobtui.stats), its unfinished count by state now and how
that count changed minute by minute (the counts and flow rows the count triggers keep), which
gives its depth over the span, its dead letters by error signature, and its settings: the
handler's (as the last worker that declared it recorded them, migration 0018), the rows' own
max_attempts, the pause (who, when), the limits in force and the workers that handle it.

Two figures read the kind's unfinished rows themselves, so their cost grows with the kind's
backlog (no count table holds them, and an index on `jobs` for them would cost every job's
writes): the rows' own max_attempts and the errors of the jobs waiting to retry. The console
reads them after the rest (`load(..., rows=False)`, then `load_rows`, a second transaction:
`load_then_rows`), so the screen opens on the other figures at once and says "loading…" where
these will be (jobtui/tui/screens/kind.py); the second read is sent before the first one's
figures are drawn, so the server reads the rows while the console draws. What the screen says of
those rows (the retries' total above their groups) comes from that second read, never from the
first one's counts.

The span is the last hour (60 one-minute buckets) or the last day (72 buckets of 20 minutes):
both fit a chart at 80 columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobtui import metrics, stats
from jobtui.sql import queries

DRAIN_WINDOW_MIN = 15  # the snapshot's default rate window, so both screens agree

# span: (minutes back, minutes per bucket)
SPANS: dict[str, tuple[int, int]] = {"hour": (60, 1), "day": (24 * 60, 20)}
TOP_ERRORS = 5


class InvalidSpan(ValueError):
    """A span the kind screen does not offer."""


@dataclass(frozen=True)
class Bucket:
    """One stretch of the span: figures of the minutes from `start` (inclusive), `minutes` long.

    `depth` is the kind's unfinished count at the bucket's end; `done` and `failed` are per
    minute (averaged over the bucket); p50/p95 are of the run times finished in it (None: none).
    """

    start: datetime
    minutes: int
    depth: int
    done_per_min: float
    failed_per_min: float
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class ErrorGroup:
    """Rows of the kind sharing an error: a dead-letter signature or a retry's first line."""

    text: str
    count: int
    last_at: datetime | None


@dataclass(frozen=True)
class HandlerInfo:
    """What the handler declares (None: the row decides / no timeout), and who recorded it."""

    max_attempts: int | None
    timeout_s: float | None
    backoff_base_s: float
    backoff_cap_s: float
    declared_by: str
    declared_at: datetime


@dataclass(frozen=True)
class LimitInfo:
    concurrency: int | None
    per_worker: int | None
    rate: int | None
    period_s: int
    overridden_by: str | None  # None: declared on the handler


@dataclass(frozen=True)
class KindWorker:
    id: str
    host: str
    running: int
    concurrency: int
    stale: bool
    control: str | None  # what the worker applies of an operator's request: quiet, stop


@dataclass(frozen=True)
class RowFigures:
    """What only the kind's unfinished rows tell (`load_rows`)."""

    max_attempts: tuple[int, int] | None  # lowest and highest among unfinished rows
    retry_errors: list[ErrorGroup]  # the top TOP_ERRORS groups
    retry_jobs: int = 0  # the jobs of every group, read with them (not the counts' retrying)


@dataclass(frozen=True)
class KindInfo:
    kind: str
    span: str
    taken_at: datetime
    buckets: list[Bucket]
    unfinished: int
    ready: int
    running: int
    retrying: int
    exhausted: int
    dead: int
    row_max_attempts: tuple[int, int] | None  # lowest and highest among unfinished rows
    dead_errors: list[ErrorGroup]
    retry_errors: list[ErrorGroup]
    handler: HandlerInfo | None
    paused_by: str | None
    paused_at: datetime | None
    limits: LimitInfo | None
    workers: list[KindWorker]
    # The Overview's drain estimate for this kind, over the same window (metrics.drain_estimate).
    drain_s: float | None = None
    not_draining: bool = False
    # False: row_max_attempts and retry_errors are not read yet (load(..., rows=False)); they
    # are then None and [], which mean nothing. with_rows() fills them in.
    rows_read: bool = True
    # The jobs of retry_errors' groups (all of them, not only the top ones), of the same read as
    # the groups: `retrying` is of another transaction when the rows are read after the rest.
    retry_jobs: int = 0

    def with_rows(self, rows: RowFigures) -> KindInfo:
        return replace(
            self,
            row_max_attempts=rows.max_attempts,
            retry_errors=rows.retry_errors,
            retry_jobs=rows.retry_jobs,
            rows_read=True,
        )

    @property
    def live_workers(self) -> list[KindWorker]:
        return [w for w in self.workers if not w.stale]

    @property
    def failed(self) -> int:
        """Failed attempts over the span."""
        return round(sum(b.failed_per_min * b.minutes for b in self.buckets))


def _groups(rows: list[dict[str, Any]]) -> list[ErrorGroup]:
    return [
        ErrorGroup(r["signature"] or "(no error text)", int(r["n"]), r["last_at"]) for r in rows
    ]


async def _send(
    conn: psycopg.AsyncConnection, statements: list[tuple[str, dict[str, Any]]]
) -> list[psycopg.AsyncCursor[dict[str, Any]]]:
    """The statements sent (in pipeline mode: not waited for), a cursor for each."""
    cursors = []
    for sql, args in statements:
        each = conn.cursor(row_factory=dict_row)
        await each.execute(sql, args)
        cursors.append(each)
    return cursors


async def _rows_of(
    cursors: list[psycopg.AsyncCursor[dict[str, Any]]],
) -> list[list[dict[str, Any]]]:
    results: list[list[dict[str, Any]]] = []
    for each in cursors:
        results.append(await each.fetchall())
        await each.close()
    return results


async def _snapshot_transaction(conn: psycopg.AsyncConnection, schema: str) -> None:
    """One instant, read only (as the Overview's snapshot). In pipeline mode the settings
    are sent with what follows, not each waited for."""
    q = queries(schema)
    await conn.execute(q.metrics_snapshot_transaction)
    await conn.execute(q.metrics_no_parallel_workers)  # its running rows: a few index entries
    await conn.execute(q.metrics_no_jit)


def _row_statements(schema: str, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """The reads of the kind's unfinished rows, last in their transaction (the planner
    settings of kind_rows_by_index hold until its end)."""
    q = queries(schema)
    params = {"kind": kind, "limit": TOP_ERRORS}
    return [
        (q.kind_retry_errors, params),
        (q.kind_rows_by_index, {}),
        (q.kind_row_max_attempts, params),
    ]


def _row_figures(results: list[list[dict[str, Any]]]) -> RowFigures:
    retry, _, row_max = results
    low, high = row_max[0]["low"], row_max[0]["high"]
    total = int(retry[0]["total"]) if retry else 0
    return RowFigures(None if low is None else (low, high), _groups(retry), total)


async def load_rows(
    conn: psycopg.AsyncConnection, schema: str, kind: str, sent: Callable[[], None] | None = None
) -> RowFigures:
    """The figures `load(..., rows=False)` leaves out, in a transaction of their own: what
    they count (their `retry_jobs` too) is of this one, not of `load`'s. Its settings and
    statements are sent at once (pipeline mode); `sent`, if given, is called then, before
    their rows are awaited."""
    async with conn.transaction():
        async with conn.pipeline():
            await _snapshot_transaction(conn, schema)
            cursors = await _send(conn, _row_statements(schema, kind))
            if sent is not None:
                sent()
        return _row_figures(await _rows_of(cursors))


async def load_then_rows(
    conn: psycopg.AsyncConnection,
    schema: str,
    kind: str,
    span: str,
    first: Callable[[KindInfo], None],
) -> KindInfo:
    """The console's read of the kind screen: `load(..., rows=False)`, then `load_rows`, two
    transactions one after the other on the one connection, with nothing between them.
    `first` is given the first one's figures as soon as the row statements are on their way,
    so the console draws them while the server reads the rows (drawn first, the screen kept
    the rows' statements waiting: they went out only after the drawing)."""
    info = await load(conn, schema, kind, span, False)
    rows = await load_rows(conn, schema, kind, lambda: first(info))
    return info.with_rows(rows)


async def load(
    conn: psycopg.AsyncConnection, schema: str, kind: str, span: str, rows: bool = True
) -> KindInfo:
    """Everything the kind screen shows about `kind` over `span` ("hour" or "day"); without
    the figures of `load_rows` when not `rows` (`rows_read` is then False)."""
    if span not in SPANS:
        raise InvalidSpan(f"unknown span {span!r}: use {', '.join(SPANS)}")
    back, width = SPANS[span]
    q = queries(schema)
    async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        # Sent at once (pipeline mode): the settings with the clock, then the statements, so
        # the server reads while the console draws the screen that asked.
        async with conn.pipeline():
            await _snapshot_transaction(conn, schema)
            await cur.execute(q.kind_clock)
            clock = await cur.fetchone()
            assert clock is not None
            since = clock["minute"] - timedelta(minutes=back - 1)
            params = {"kind": kind, "since": since, "limit": TOP_ERRORS}
            statements = [
                (sql, params)
                for sql in (
                    q.kind_minutes,
                    q.metrics_state_counts,  # every kind's, from 0016's counts; this one's kept
                    q.kind_dead_count,
                    q.kind_depth_changes,
                    q.kind_dead_signatures,
                    q.kind_handler,
                    q.kind_paused,
                    q.kind_limits,
                    q.kind_workers,
                )
            ]
            statements.append((q.metrics_flow, {"back": DRAIN_WINDOW_MIN - 1}))
            if rows:
                statements += _row_statements(schema, kind)
            cursors = await _send(conn, statements)
        results = await _rows_of(cursors)
    row_figures = _row_figures(results[-3:]) if rows else RowFigures(None, [])
    (
        minutes,
        pending,
        dead_count,
        changes,
        dead,
        handler,
        paused,
        limits,
        workers,
        flow_rows,
    ) = results[:10]
    flow = next((r for r in flow_rows if r["kind"] == kind), None)
    now_counts = next((r for r in pending if r["kind"] == kind), None) or dict.fromkeys(
        ("ready", "scheduled", "running", "exhausted", "retrying"), 0
    )
    unfinished = sum(int(now_counts[k]) for k in ("ready", "scheduled", "running", "exhausted"))
    buckets = _buckets(since, back, width, minutes, changes, unfinished)
    drain_s, not_draining = metrics.drain_estimate(
        int(now_counts["ready"]),
        int(flow["arrived"]) / DRAIN_WINDOW_MIN if flow else 0.0,
        int(flow["departed"]) / DRAIN_WINDOW_MIN if flow else 0.0,
    )
    return KindInfo(
        kind=kind,
        span=span,
        taken_at=clock["now"],
        buckets=buckets,
        unfinished=unfinished,
        ready=int(now_counts["ready"]),
        running=int(now_counts["running"]),
        retrying=int(now_counts["retrying"]),
        exhausted=int(now_counts["exhausted"]),
        dead=int(dead_count[0]["dead"]),
        row_max_attempts=row_figures.max_attempts,
        dead_errors=_groups(dead),
        retry_errors=row_figures.retry_errors,
        handler=HandlerInfo(**handler[0]) if handler else None,
        paused_by=paused[0]["paused_by"] if paused else None,
        paused_at=paused[0]["paused_at"] if paused else None,
        limits=(
            LimitInfo(
                limits[0]["concurrency"],
                limits[0]["per_worker"],
                limits[0]["rate"],
                limits[0]["period_s"],
                limits[0]["overridden_by"] if limits[0]["overridden"] else None,
            )
            if limits
            else None
        ),
        workers=[KindWorker(**w) for w in workers],
        drain_s=drain_s,
        not_draining=not_draining,
        rows_read=rows,
        retry_jobs=row_figures.retry_jobs,
    )


def _buckets(
    since: datetime,
    back: int,
    width: int,
    minutes: list[dict[str, Any]],
    changes: list[dict[str, Any]],
    unfinished_now: int,
) -> list[Bucket]:
    """Fold the per-minute rows into buckets of `width` minutes, oldest first; the depth at
    each bucket's end is the count now minus the changes after it."""
    n = back // width
    done = [0] * n
    failed = [0] * n
    hists: list[list[int]] = [[] for _ in range(n)]
    delta = [0] * n
    for r in minutes:
        i = _index(since, r["minute"], width, n)
        if i is not None:
            done[i] += r["done"]
            failed[i] += r["failed"]
            stats.merge(hists[i], r["hist"] or [])
    for r in changes:
        i = _index(since, r["minute"], width, n)
        if i is not None:
            delta[i] += int(r["delta"])
    depths = [0] * n
    after = 0  # the change in the buckets after this one
    for i in range(n - 1, -1, -1):
        depths[i] = max(unfinished_now - after, 0)
        after += delta[i]
    return [
        Bucket(
            start=since + timedelta(minutes=i * width),
            minutes=width,
            depth=depths[i],
            done_per_min=done[i] / width,
            failed_per_min=failed[i] / width,
            p50_ms=stats.percentile(hists[i], 0.50),
            p95_ms=stats.percentile(hists[i], 0.95),
        )
        for i in range(n)
    ]


def _index(since: datetime, minute: datetime, width: int, n: int) -> int | None:
    i = int((minute - since).total_seconds() // 60) // width
    return i if 0 <= i < n else None
