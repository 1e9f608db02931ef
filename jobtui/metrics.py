"""The Overview's snapshot: queue depth, oldest waiting job, per-kind figures, history, workers.

Everything comes from a handful of small reads in one read-only transaction: jobs by kind and
state, their arrivals and departures per minute, and dead letters from the delta rows that
migrations 0016 and 0015 keep by statement triggers (exact for every producer and consumer,
whatever the visibility map: counting the rows themselves took 340-400 ms at 250,000 unfinished
jobs with a stale map, benchmarks/scale.py); each kind's oldest ready job from one index probe;
and the per-minute `kind_stats` and `queue_samples` rows the bundled worker writes, so
run-time percentiles and failure rates never scan finished jobs (and survive their pruning) but
count only what that worker finished.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobtui import stats
from jobtui.control_state import STOPS_CLAIMING
from jobtui.models import (
    HistoryPoint,
    KindFigures,
    ReplicaInfo,
    Snapshot,
    StateCounts,
    WorkerRow,
)
from jobtui.sql import queries

MAX_MINUTES = 7 * 24 * 60


class InvalidWindow(ValueError):
    """A window or timeout that cannot be used for a snapshot."""


def _minutes(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MINUTES:
        raise InvalidWindow(f"{name} must be a whole number of minutes from 1 to {MAX_MINUTES}")
    return value


@dataclass
class _KindAcc:
    """Per-kind figures being gathered from the separate reads."""

    counts: Counter[str] = field(default_factory=Counter)  # by StateCounts field name
    oldest: float | None = None
    done: int = 0
    failed: int = 0
    hist: list[int] = field(default_factory=list)
    arrived: int = 0
    departed: int = 0


def _failure_rate(done: int, failed: int) -> float:
    return failed / (done + failed) if done + failed else 0.0


def rate_text(rate: int | None, period_s: int) -> str | None:
    """A rate limit as the CLI takes it: "100/m" or "5/s"; None when there is none."""
    if rate is None:
        return None
    return f"{rate}/{'m' if period_s == 60 else 's'}"


def drain_estimate(
    backlog: int, arrived_per_min: float, departed_per_min: float
) -> tuple[float | None, bool]:
    """(seconds until `backlog` is gone, not draining) at the window's rates.

    backlog ÷ (departure rate − arrival rate); with no backlog there is nothing to drain, and
    when arrivals keep up with departures it never drains: (None, True).
    """
    if backlog <= 0:
        return None, False
    net = departed_per_min - arrived_per_min
    if net <= 0:
        return None, True
    return backlog / net * 60.0, False


def _handles(worker_kinds: list[str], kind: str) -> bool:
    return kind in worker_kinds or "*" in worker_kinds


async def snapshot(
    conn: psycopg.AsyncConnection,
    schema: str,
    *,
    window_minutes: int = 15,
    history_minutes: int = 60,
    heartbeat_timeout: float = 30.0,
) -> Snapshot:
    """Take the Overview's figures.

    Rates and percentiles cover the last `window_minutes` minutes (the current one included);
    `history` has exactly one point per minute for the last `history_minutes`, oldest first,
    with zeros (and None for the queue sample) where nothing was recorded. `kinds` lists the
    troubled ones first: most dead letters, then highest failure rate, then oldest waiting job.
    """
    window = _minutes("window_minutes", window_minutes)
    history_n = _minutes("history_minutes", history_minutes)
    if isinstance(heartbeat_timeout, bool) or not heartbeat_timeout > 0:
        raise InvalidWindow("heartbeat_timeout must be a positive number of seconds")
    q = queries(schema)
    statements: list[tuple[str, dict[str, Any] | None]] = [
        (q.metrics_clock, None),
        (q.metrics_replica, None),
        (q.metrics_state_counts, None),
        (q.metrics_dead_by_kind, None),
        (q.metrics_flow, {"back": window - 1}),
        (q.metrics_kind_window, {"back": window - 1}),
        (q.metrics_minute_totals, {"back": history_n - 1}),
        (q.metrics_queue_samples, {"back": history_n - 1}),
        (q.metrics_workers, None),
        (q.metrics_paused, None),
        (q.metrics_kind_limits, None),
    ]
    async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        # Sent at once (pipeline mode, as the kind screen's reads): one round trip instead of
        # one per statement, which on a busy machine is a wait for the scheduler each time.
        cursors = []
        async with conn.pipeline():
            await cur.execute(q.metrics_snapshot_transaction)
            # The reads are short; starting parallel workers for them costs more than it saves
            # (measured on 100k unfinished rows) and competes with the workers for CPU.
            await cur.execute(q.metrics_no_parallel_workers)
            await cur.execute(q.metrics_no_jit)
            for sql, params in statements:
                each = conn.cursor(row_factory=dict_row)
                await each.execute(sql, params)
                cursors.append(each)
        results = []
        for each in cursors:
            results.append(await each.fetchall())
            await each.close()
        waiting = [r["kind"] for r in results[2] if r["ready"] > 0]
        await cur.execute(q.metrics_oldest_ready, {"kinds": waiting})
        oldest = {r["kind"]: r["oldest_ready_age_s"] for r in await cur.fetchall()}
    (
        clock,
        replica_rows,
        pending,
        dead,
        flow,
        kwindow,
        totals,
        samples,
        workers_raw,
        paused_rows,
        limit_rows,
    ) = results
    now: datetime = clock[0]["now"]
    minute: datetime = clock[0]["minute"]
    history_since = minute - timedelta(minutes=history_n - 1)
    paused = frozenset(r["kind"] for r in paused_rows)

    acc: dict[str, _KindAcc] = defaultdict(_KindAcc)
    for r in pending:
        unfinished = {s: r[s] for s in ("ready", "scheduled", "running", "retrying", "exhausted")}
        if any(unfinished.values()):  # kinds with finished rows only are not listed
            a = acc[r["kind"]]
            a.counts.update(unfinished)
            a.oldest = oldest.get(r["kind"])
    for r in dead:
        acc[r["kind"]].counts["dead"] = r["dead"]

    for r in flow:
        if r["kind"] in acc or r["arrived"] or r["departed"]:
            acc[r["kind"]].arrived += int(r["arrived"])
            acc[r["kind"]].departed += int(r["departed"])
    for r in kwindow:
        a = acc[r["kind"]]
        a.done += r["done"]
        a.failed += r["failed"]
        stats.merge(a.hist, r["hist"] or [])
    by_minute = {r["minute"]: r for r in totals}
    for kind in paused:  # a paused kind is listed even when it has nothing else
        acc.setdefault(kind, _KindAcc())

    workers = [
        WorkerRow(
            id=r["id"],
            host=r["host"],
            pid=r["pid"],
            kinds=list(r["kinds"] or []),
            concurrency=r["concurrency"],
            running=r["running"],
            started_at=r["started_at"],
            heartbeat_age_s=float(r["heartbeat_age_s"]),
            # Judged by the worker's own timeout (issue 9); `heartbeat_timeout` is the
            # fallback for a row that has none.
            stale=float(r["heartbeat_age_s"])
            > float(r["heartbeat_timeout_s"] or heartbeat_timeout),
            abandoned=int(r["abandoned"] or 0),
            outcome_errors=int(r["outcome_errors"] or 0),
            last_outcome_error=r["last_outcome_error"],
            heartbeat_interval_s=float(r["heartbeat_interval_s"]),
            heartbeat_timeout_s=float(r["heartbeat_timeout_s"]),
            wakeup_mode=r["wakeup_mode"],
            wakeup_note=r["wakeup_note"],
            listen_connected=bool(r["listen_connected"]),
            last_wakeup_at=r["last_wakeup_at"],
            poll_interval_s=float(r["poll_interval_s"]),
            control=r["control"],
            control_applied=r["control_applied"],
        )
        for r in workers_raw
    ]
    # A worker an operator quieted or asked to stop claims nothing: it handles no kind.
    live_kinds = [w.kinds for w in workers if not w.stale and w.control not in STOPS_CLAIMING]
    limits = {r["kind"]: r for r in limit_rows}

    kinds = [
        KindFigures(
            kind=kind,
            **asdict(StateCounts(**a.counts)),
            arrived_per_min=a.arrived / window,
            **_drain(a, window),
            oldest_ready_age_s=a.oldest,
            done_per_min=a.done / window,
            failed_per_min=a.failed / window,
            failure_rate=_failure_rate(a.done, a.failed),
            p50_ms=stats.percentile(a.hist, 0.50),
            p95_ms=stats.percentile(a.hist, 0.95),
            paused=kind in paused,
            handled=any(_handles(k, kind) for k in live_kinds),
            concurrency_limit=limits[kind]["concurrency"] if kind in limits else None,
            per_worker_limit=limits[kind]["per_worker"] if kind in limits else None,
            rate_limit=(
                rate_text(limits[kind]["rate"], limits[kind]["period_s"])
                if kind in limits
                else None
            ),
        )
        for kind, a in acc.items()
    ]
    kinds.sort(key=lambda k: (-k.dead, -k.failure_rate, -(k.oldest_ready_age_s or 0.0), k.kind))

    by_sample = {r["minute"]: r for r in samples}
    history = []
    for i in range(history_n):
        m = history_since + timedelta(minutes=i)
        sample = by_sample.get(m)
        history.append(
            HistoryPoint(
                minute=m,
                ready=sample["ready"] if sample else None,
                oldest_ready_age_s=sample["oldest_ready_age_s"] if sample else None,
                done=int(by_minute[m]["done"]) if m in by_minute else 0,
                failed=int(by_minute[m]["failed"]) if m in by_minute else 0,
            )
        )

    done_total = sum(a.done for a in acc.values())
    failed_total = sum(a.failed for a in acc.values())
    ages = [a.oldest for a in acc.values() if a.oldest is not None]
    return Snapshot(
        taken_at=now,
        totals=StateCounts(**sum((a.counts for a in acc.values()), Counter())),
        oldest_ready_age_s=max(ages) if ages else None,
        done_per_min=done_total / window,
        failure_rate=_failure_rate(done_total, failed_total),
        kinds=kinds,
        history=history,
        workers=workers,
        paused=paused,
        replica=_replica(replica_rows[0]),
    )


def _drain(a: _KindAcc, window: int) -> dict[str, Any]:
    drain_s, not_draining = drain_estimate(
        a.counts["ready"], a.arrived / window, a.departed / window
    )
    return {"drain_s": drain_s, "not_draining": not_draining}


def _replica(row: dict[str, Any]) -> ReplicaInfo | None:
    if not row["replica"]:
        return None
    lag = row["lag_s"]
    return ReplicaInfo(lag_s=None if lag is None else float(lag), replay_lsn=row["replay_lsn"])
