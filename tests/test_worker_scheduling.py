"""Issue 13 with real worker processes: schedules ticking once per tick however many workers
run (one killed mid-run), missed ticks after downtime, per-kind concurrency and rate limits
checked from a ledger the handlers write, and other kinds draining while one is at its limit.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps.fleet import Procs, ledger_fixture, procs_fixture  # noqa: F401 - fixtures
from apps.helpers import fetchall, fetchval, running_worker, wait_until

from jobtui import enqueue_many
from jobtui.ops import Actor, set_kind_limits
from jobtui.registry import Registry

FULL_MINUTE = os.environ.get("JOBTUI_TEST_FULL_MINUTE") == "1"


async def _registered(aconn: psycopg.AsyncConnection, n: int, procs: Procs) -> None:
    async def up() -> bool:
        dead = [p.args for p in procs.procs if p.poll() is not None]
        assert not dead, f"a worker exited at start:\n{procs.logs()}"
        return bool(await fetchval(aconn, "SELECT count(*) = %s FROM workers", (n,)))

    await wait_until(up, timeout=30, what=f"{n} workers to register")


def _stop(procs: Procs) -> None:
    for p in procs.procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs.procs:
        p.wait(30)


def _max_overlap(spans: list[tuple[Any, Any]]) -> int:
    """The most intervals (start, end) open at one moment; an end before a start at the same
    instant (the next job starting as one ends)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


# ------------------------------------------------------------------ schedules


async def _ticks_across_three_workers(
    dsn: str, aconn: psycopg.AsyncConnection, procs: Procs, seconds: float
) -> None:
    for _ in range(3):
        procs.start(app="ticking", kinds=["tick"], heartbeat_timeout=2.0)
    await _registered(aconn, 3, procs)
    await asyncio.sleep(seconds / 2)
    # One worker dies without a word, perhaps in the middle of enqueueing a tick.
    procs.procs[0].send_signal(signal.SIGKILL)
    await asyncio.sleep(seconds / 2)
    _stop(procs)
    ticks = [
        r[0]
        for r in await fetchall(
            aconn,
            "SELECT t.tick FROM schedule_ticks t WHERE t.schedule = 'every_second' "
            "AND NOT t.manual ORDER BY t.tick",
        )
    ]
    jobs = await fetchval(aconn, "SELECT count(*) FROM jobs WHERE kind = 'tick'")
    # Each tick once: distinct, one job each, none missing between the first and the last.
    assert len(ticks) == len(set(ticks)) == jobs
    assert len(ticks) >= seconds - 3, ticks
    gaps = [b - a for a, b in itertools.pairwise(ticks) if b - a != timedelta(seconds=1)]
    assert gaps == [], gaps
    # Seen from the workers: the tick_enqueued lines of all of them add up to the ticks (which
    # worker wins each second is a matter of timing; the database decides, not the workers).
    logs = sorted(Path(procs.log_dir).glob("*.log"))
    per_worker = [p.read_text(errors="replace").count("event=tick_enqueued") for p in logs]
    assert sum(per_worker) == len(ticks), per_worker


@pytest.mark.slow
async def test_a_schedule_ticking_every_second_across_three_worker_processes_20s(
    dsn: str, aconn: psycopg.AsyncConnection, procs: Procs
) -> None:
    await _ticks_across_three_workers(dsn, aconn, procs, 20)


@pytest.mark.slow
@pytest.mark.skipif(not FULL_MINUTE, reason="the full minute: set JOBTUI_TEST_FULL_MINUTE=1")
async def test_a_schedule_ticking_every_second_across_three_worker_processes_a_minute(
    dsn: str, aconn: psycopg.AsyncConnection, procs: Procs
) -> None:
    await _ticks_across_three_workers(dsn, aconn, procs, 60)


async def test_missed_ticks_after_downtime_skip_or_run_the_latest_once(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Every worker was down for three hours: an hourly schedule with missed='skip' enqueues
    nothing for those hours, one with missed='latest' enqueues the latest missed tick once."""
    now = await fetchval(aconn, "SELECT now()")
    minute = (now.minute + 30) % 60  # a tick half an hour away: never within the grace
    cron_expr = f"{minute} * * * *"
    reg = Registry()

    @reg.periodic(cron_expr, name="hourly_skip", missed="skip")
    @reg.periodic(cron_expr, name="hourly_latest", missed="latest")
    @reg.handler("report")
    async def report(payload: Any) -> None:
        return None

    # The schedules as a worker left them three hours ago.
    for name, missed in (("hourly_skip", "skip"), ("hourly_latest", "latest")):
        await aconn.execute(
            "INSERT INTO schedules (name, cron, kind, missed, checked_until) "
            "VALUES (%s, %s, 'report', %s, now() - interval '3 hours')",
            (name, cron_expr, missed),
        )
    async with running_worker(dsn, reg):

        async def looked_at() -> bool:
            return bool(
                await fetchval(
                    aconn,
                    "SELECT bool_and(checked_until > now() - interval '1 min') FROM schedules",
                )
            )

        await wait_until(looked_at, what="both schedules checked")
        await asyncio.sleep(1.5)  # more housekeeping rounds: nothing more may come
    rows = await fetchall(
        aconn, "SELECT schedule, tick FROM schedule_ticks ORDER BY schedule, tick"
    )
    assert [r[0] for r in rows] == ["hourly_latest"], rows
    latest = rows[0][1]
    assert latest.minute == minute and now - timedelta(hours=1) <= latest <= now, (latest, now)
    assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE kind = 'report'") == 1


# ------------------------------------------------------------------ limits


async def _spans(aconn: psycopg.AsyncConnection, kind: str) -> list[tuple[Any, Any]]:
    return [
        (r[0], r[1])
        for r in await fetchall(
            aconn,
            "SELECT l.started_at, l.ended_at FROM ledger l JOIN jobs j ON j.id = l.job_id "
            "WHERE j.kind = %s ORDER BY l.started_at",
            (kind,),
        )
    ]


async def _drained(aconn: psycopg.AsyncConnection, kind: str) -> bool:
    return bool(
        await fetchval(
            aconn,
            "SELECT count(*) = 0 FROM jobs WHERE kind = %s AND finished_at IS NULL",
            (kind,),
        )
    )


@pytest.mark.slow
async def test_concurrency_limit_of_three_is_never_exceeded_across_two_worker_processes(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    enqueue_many(conn, [{"kind": "capped", "payload": {"sleep": 0.1}} for _ in range(60)])
    for _ in range(2):
        procs.start(app="limited", kinds=["capped", "free"], concurrency=10)
    await _registered(aconn, 2, procs)
    await wait_until(lambda: _drained(aconn, "capped"), timeout=60, what="capped drained")
    spans = await _spans(aconn, "capped")
    _stop(procs)
    assert len(spans) == 60 and all(e is not None for _, e in spans)
    assert _max_overlap(spans) == 3, "the limit is 3: never more, and it is used"
    workers = {r[0] for r in await fetchall(aconn, "SELECT DISTINCT worker FROM ledger")}
    assert len(workers) == 2, "both worker processes ran capped jobs"


@pytest.mark.slow
async def test_a_lower_limit_set_mid_run_holds_from_then_on(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    enqueue_many(conn, [{"kind": "capped", "payload": {"sleep": 0.1}} for _ in range(60)])
    for _ in range(2):
        procs.start(app="limited", kinds=["capped", "free"], concurrency=10)
    await _registered(aconn, 2, procs)
    await wait_until(
        lambda: fetchval(aconn, "SELECT count(*) >= 10 FROM ledger WHERE ended_at IS NOT NULL"),
        what="some capped jobs done",
    )
    await set_kind_limits(aconn, "public", "capped", concurrency=1, actor=Actor("test@here"))
    changed = await fetchval(aconn, "SELECT clock_timestamp()")
    await wait_until(lambda: _drained(aconn, "capped"), timeout=60, what="capped drained")
    _stop(procs)
    spans = await _spans(aconn, "capped")
    # Jobs started before the change may still run (at most 3); every later start is alone.
    last_old_end = max(e for s, e in spans if s <= changed)
    later = [(s, e) for s, e in spans if s > last_old_end]
    assert len(later) > 10
    assert _max_overlap(later) == 1


@pytest.mark.slow
async def test_a_rate_limit_of_60_a_minute_holds_over_a_minute(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    """Token bucket: a burst of up to 60 (the bucket starts full), then one a second. Over any
    interval of T seconds there are at most 60 + T starts; measured over a whole minute."""
    enqueue_many(conn, [{"kind": "metered"} for _ in range(400)])
    for _ in range(2):
        procs.start(app="limited", kinds=["metered"], concurrency=20)
    await _registered(aconn, 2, procs)
    await asyncio.sleep(62)
    _stop(procs)
    starts = [s for s, _ in await _spans(aconn, "metered")]
    t0 = starts[0]
    within = [(s - t0).total_seconds() for s in starts if (s - t0).total_seconds() <= 60]
    assert 60 + 60 - 4 <= len(within) <= 60 + 60 + 1, len(within)
    # After the burst, the steady rate: about 10 in every 10 seconds, all minute long.
    for a in (5, 15, 25, 35, 45):
        n = sum(1 for x in within if a <= x < a + 10)
        assert 8 <= n <= 11, (a, n)


@pytest.mark.slow
async def test_other_kinds_drain_at_full_speed_while_one_kind_is_at_its_limit(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    for _ in range(2):
        procs.start(app="limited", kinds=["capped", "free"], concurrency=50)
    await _registered(aconn, 2, procs)

    async def drain_free() -> float:
        enqueue_many(conn, [{"kind": "free"} for _ in range(3000)])
        t0 = time.monotonic()
        await wait_until(lambda: _drained(aconn, "free"), timeout=60, interval=0.01)
        return time.monotonic() - t0

    alone = await drain_free()
    # A backlog of capped jobs, each long enough to keep the kind at its limit throughout.
    enqueue_many(conn, [{"kind": "capped", "payload": {"sleep": 2.0}} for _ in range(100)])
    await wait_until(
        lambda: fetchval(aconn, "SELECT count(*) = 3 FROM ledger WHERE ended_at IS NULL"),
        what="capped at its limit",
    )
    beside = await drain_free()
    at_limit = await fetchval(aconn, "SELECT count(*) FROM ledger WHERE ended_at IS NULL")
    _stop(procs)
    print(f"3000 free jobs: {alone:.2f}s alone, {beside:.2f}s beside capped at its limit")
    assert at_limit == 3
    assert beside < alone * 2 + 0.5, (alone, beside)
