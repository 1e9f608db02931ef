"""Periodic jobs against a real database: ticks once each, missed ticks, DST, operator actions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobtui import cron, enqueue
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.ops import Actor, InvalidAction, pause_schedule, resume_schedule, run_schedule_now
from jobtui.schedules import (
    InvalidSchedule,
    Schedule,
    enqueue_due_ticks,
    list_schedules,
    sync_schedules,
)
from jobtui.schema import migrate

S = "public"
T0 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


async def _declare(aconn: psycopg.AsyncConnection, *schedules: Schedule, at: datetime = T0) -> None:
    await sync_schedules(aconn, S, schedules)
    await aconn.execute("UPDATE schedules SET checked_until = %s", (at,))


def _ticks(conn: psycopg.Connection, name: str) -> list[datetime]:
    rows = conn.execute(
        "SELECT t.tick FROM schedule_ticks t JOIN jobs j ON j.id = t.job_id"
        " WHERE t.schedule = %s AND NOT t.manual ORDER BY t.tick",
        (name,),
    )
    return [r[0] for r in rows]


async def test_every_tick_once_with_three_concurrent_callers(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await _declare(aconn, Schedule("beat", "* * * * * *", "beat"))
    callers = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(3)]
    try:
        for second in range(1, 61):
            now = T0 + timedelta(seconds=second)
            await asyncio.gather(*(enqueue_due_ticks(c, S, ["beat"], now) for c in callers))
    finally:
        for c in callers:
            await c.close()
    assert _ticks(conn, "beat") == [T0 + timedelta(seconds=s) for s in range(1, 61)]
    assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'beat'").fetchone() == (60,)


async def test_a_recorded_tick_is_never_enqueued_again_even_after_jobs_are_pruned(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await _declare(aconn, Schedule("m", "* * * * *", "m"))
    await enqueue_due_ticks(aconn, S, ["m"], T0 + timedelta(minutes=1, seconds=5))
    conn.execute("DELETE FROM jobs")  # pruned
    conn.execute("UPDATE schedules SET checked_until = %s, next_tick = NULL", (T0,))  # replayed
    again = await enqueue_due_ticks(aconn, S, ["m"], T0 + timedelta(minutes=1, seconds=6))
    assert again == [] and conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


@pytest.mark.parametrize(
    ("policy", "expected"), [("skip", []), ("latest", [T0 + timedelta(hours=5)])]
)
async def test_missed_ticks_after_downtime(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, policy: str, expected: list
) -> None:
    await _declare(aconn, Schedule("hourly", "0 * * * *", "h", missed=policy))
    # Every worker was down from 12:00 to 17:20: ticks 13:00 … 17:00 were missed.
    done = await enqueue_due_ticks(aconn, S, ["hourly"], T0 + timedelta(hours=5, minutes=20))
    assert [d.tick for d in done] == expected == _ticks(conn, "hourly")
    # The next on-time tick is enqueued whatever the policy, and only once.
    for now in (T0 + timedelta(hours=6, seconds=1), T0 + timedelta(hours=6, seconds=2)):
        await enqueue_due_ticks(aconn, S, ["hourly"], now)
    assert _ticks(conn, "hourly") == [*expected, T0 + timedelta(hours=6)]
    row = conn.execute("SELECT next_tick, last_tick FROM schedules").fetchone()
    assert row == (T0 + timedelta(hours=7), T0 + timedelta(hours=6))


async def test_ticks_within_the_grace_are_all_enqueued(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await _declare(aconn, Schedule("s", "*/10 * * * * *", "s", missed="skip"))
    await enqueue_due_ticks(aconn, S, ["s"], T0 + timedelta(seconds=45))  # housekeeper was slow
    assert _ticks(conn, "s") == [T0 + timedelta(seconds=s) for s in (10, 20, 30, 40)]


def _run_through(start: datetime, hours: int, step: timedelta) -> list[datetime]:
    return [start + step * i for i in range(1, int(timedelta(hours=hours) / step) + 1)]


@pytest.mark.parametrize(
    ("expr", "night", "expected_local"),
    [
        # Spring forward in Berlin: 2030-03-31, 02:00 CET becomes 03:00 CEST.
        (
            "0 * * * *",
            "2030-03-30T23:30:00+00:00",
            ["01:00+01:00", "03:00+02:00", "04:00+02:00", "05:00+02:00"],
        ),
        ("30 2 * * *", "2030-03-30T23:30:00+00:00", ["03:00+02:00"]),
        # Fall back: 2030-10-27, 03:00 CEST becomes 02:00 CET; 02:xx happens twice.
        (
            "0 * * * *",
            "2030-10-26T23:30:00+00:00",
            ["02:00+02:00", "02:00+01:00", "03:00+01:00", "04:00+01:00"],
        ),
        ("30 2 * * *", "2030-10-26T23:30:00+00:00", ["02:30+02:00"]),
    ],
)
async def test_dst_transitions_in_berlin(
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    expr: str,
    night: str,
    expected_local: list[str],
) -> None:
    start = datetime.fromisoformat(night)
    await _declare(aconn, Schedule("dst", expr, "dst", timezone="Europe/Berlin"), at=start)
    for now in _run_through(start, 4, timedelta(minutes=10)):
        await enqueue_due_ticks(aconn, S, ["dst"], now)
    day = "2030-03-31" if start.month == 3 else "2030-10-27"
    expected = [datetime.fromisoformat(f"{day}T{t}").astimezone(UTC) for t in expected_local]
    assert _ticks(conn, "dst") == expected


def test_periodic_declaration_is_named_after_its_kind() -> None:
    schedule = Schedule.periodic("digest", "*/5 * * * *", timezone="Europe/Berlin")
    assert (schedule.name, schedule.kind, schedule.payload) == ("digest", "digest", {})


def test_cron_wrapper_refuses_bad_input() -> None:
    with pytest.raises(cron.InvalidCron, match="invalid cron"):
        cron.check("61 * * * *")
    with pytest.raises(cron.InvalidCron, match="unknown time zone"):
        cron.check("* * * * *", "Mars/Olympus")
    with pytest.raises(InvalidSchedule, match="missed"):
        Schedule("x", "* * * * *", "k", missed="all")
    with pytest.raises(InvalidSchedule, match="JSON"):
        Schedule("x", "* * * * *", "k", payload={"a": object()})


async def test_pause_resume_and_run_now_are_audited(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await _declare(aconn, Schedule("rep", "* * * * *", "report", payload={"p": 1}))
    actor = Actor("op@host")
    assert await pause_schedule(aconn, S, "rep", actor=actor) == 1
    assert await pause_schedule(aconn, S, "rep", actor=actor) == 0
    assert await enqueue_due_ticks(aconn, S, ["rep"], T0 + timedelta(minutes=3)) == []
    job_id = await run_schedule_now(aconn, S, "rep", actor=actor)  # allowed while paused
    assert conn.execute("SELECT kind, payload FROM jobs WHERE id = %s", (job_id,)).fetchone() == (
        "report",
        {"p": 1},
    )
    assert await resume_schedule(aconn, S, "rep", actor=actor) == 1
    # Ticks that fell while paused are not run on resume (resuming counts from the real now).
    assert _ticks(conn, "rep") == []
    with pytest.raises(InvalidAction, match="no schedule"):
        await pause_schedule(aconn, S, "nope", actor=actor)
    audit = conn.execute("SELECT action, count, filter->>'schedule' FROM audit_log ORDER BY id")
    assert audit.fetchall() == [
        ("pause_schedule", 1, "rep"),
        ("pause_schedule", 0, "rep"),
        ("run_schedule_now", 1, "rep"),
        ("resume_schedule", 1, "rep"),
    ]
    [listed] = await list_schedules(aconn, S)
    assert listed.last_job_id == job_id and listed.last_state == "ready"
    assert listed.paused_at is None and listed.next_tick is not None


async def test_sync_keeps_state_and_restarts_the_clock_when_cron_changes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    past = datetime(2020, 1, 1, tzinfo=UTC)
    await _declare(aconn, Schedule("c", "* * * * *", "k"), at=past)
    await pause_schedule(aconn, S, "c", actor=Actor("op@host"))
    assert await sync_schedules(aconn, S, [Schedule("c", "* * * * *", "k")]) == []  # unchanged
    assert await sync_schedules(aconn, S, [Schedule("c", "*/5 * * * *", "k")]) == ["c"]
    row = conn.execute(
        "SELECT cron, paused_at IS NOT NULL, checked_until > %s FROM schedules", (past,)
    ).fetchone()
    assert row == ("*/5 * * * *", True, True)


async def test_all_three_features_work_in_another_schema(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    migrate(conn, "alt")
    first = enqueue(conn, "k", {}, unique_key="u", schema="alt")
    assert not enqueue(conn, "k", {}, unique_key="u", schema="alt").created
    await sync_schedules(aconn, "alt", [Schedule("s", "* * * * *", "k")])
    await aconn.execute("UPDATE alt.schedules SET checked_until = %s", (T0,))
    [tick] = await enqueue_due_ticks(aconn, "alt", ["s"], T0 + timedelta(seconds=61))
    await sync_kind_limits(aconn, "alt", [KindLimit("k", concurrency=1)])
    rows = await claim_limited(aconn, "alt", "w", ["k"], 5)
    assert len(rows) == 1 and rows[0][0] in (first, tick.job_id)
    assert conn.execute("SELECT count(*) FROM alt.jobs").fetchone() == (2,)
    assert conn.execute("SELECT count(*) FROM public.jobs").fetchone() == (0,)
