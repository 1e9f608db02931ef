"""Issue 26 item 1: alarms in the order that matters (severity, then what stops work), a key
that shows every one, and a count line that says how many hidden alarms are critical."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from test_tui_console import add_dead, config, until
from test_tui_layout import screen_lines

from jobtui.alarm_order import alarm_key, ordered
from jobtui.alerts import Level, Verdict
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.alarms import AlarmsScreen
from jobtui.tui.widgets.alarms import AlarmList

DEAD_KINDS = [f"a_dead_{i}" for i in range(6)]  # sort before the orphan by name and by rule


def _incident(conn: psycopg.Connection) -> None:
    """One critical (a 40-minute-old ready job), six kinds with dead letters, and a kind whose
    ready jobs no live worker handles: the warning that stops work."""
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, %s, 4, now())",
        (["slow", *DEAD_KINDS],),
    )
    old = datetime.now(UTC) - timedelta(minutes=40)
    enqueue_many(conn, [JobSpec("slow", {"n": 1}, run_at=old)])
    enqueue_many(conn, [JobSpec("zz_orphan", {"n": i}) for i in range(3)])
    for kind in DEAD_KINDS:
        add_dead(conn, kind, "E: boom")


def _v(rule: str, kind: str, level: Level, value: float | None) -> Verdict:
    return Verdict(rule, kind, level, value, 0.0, f"{kind}: {rule}")


def test_order_is_severity_then_what_stops_work() -> None:
    found = [
        _v("dead_letters", "a", Level.WARN, 1),
        _v("oldest_ready", "b", Level.WARN, 400),
        _v("oldest_ready", "c", Level.WARN, 900),
        _v("drain_time", "d", Level.WARN, math.inf),
        _v("drain_time", "e", Level.WARN, 500),
        _v("no_worker", "f", Level.WARN, 3),
        _v("dead_letters", "g", Level.CRIT, 2),
        _v("ready", "h", Level.OK, 0),
    ]
    names = [(v.rule, v.kind) for v in ordered(found)]
    assert names == [
        ("dead_letters", "g"),  # critical first, whatever the rule
        ("no_worker", "f"),  # then no worker
        ("drain_time", "d"),  # not draining
        ("oldest_ready", "c"),  # the oldest age, oldest first
        ("oldest_ready", "b"),
        ("dead_letters", "a"),  # the rest in the rules' order
        ("drain_time", "e"),
    ]
    assert sorted(found[:7], key=alarm_key) == ordered(found)


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_no_worker_shown_before_dead_letters_and_a_shows_all(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        await until(pilot, lambda: len(alarms.firings) == 8)
        await pilot.pause(0.2)
        top = screen_lines(app)[alarms.region.y : alarms.region.y + 3]
        assert "CRIT slow: oldest ready job" in top[0], top
        # The warning that means no job of the kind runs at all, before six dead letters.
        assert "WARN zz_orphan: no live worker" in top[1], top
        # The count line says how many of the hidden ones are critical (none here) and the key.
        assert "… and 6 more alarms (0 critical)" in top[2], top
        if size[0] >= 80:
            assert "A all" in top[2], top

        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, AlarmsScreen))
        await pilot.pause(0.1)
        shown = "\n".join(screen_lines(app))
        assert "8 alarms, 1 critical" in shown, shown
        for kind in ["slow", "zz_orphan", *DEAD_KINDS]:
            assert f"{kind}: " in shown, (kind, shown)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AlarmsScreen))


async def test_the_count_line_names_hidden_criticals(dsn: str, conn: psycopg.Connection) -> None:
    _incident(conn)
    for kind in ("slow2", "slow3"):
        conn.execute("UPDATE workers SET kinds = kinds || %s::text", (kind,))
        old = datetime.now(UTC) - timedelta(minutes=50)
        enqueue_many(conn, [JobSpec(kind, {"n": 1}, run_at=old)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        await until(pilot, lambda: len(alarms.firings) == 10)
        await pilot.pause(0.2)
        top = screen_lines(app)[alarms.region.y : alarms.region.y + 3]
        assert "… and 8 more alarms (1 critical)" in top[2], top


async def test_the_count_line_names_the_remapped_alarm_key(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Issue 26 item 5 (round four): with `overview.alarms` bound to another key, the count line
    names that key, not the default `A`, and that key opens every alarm."""
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config(keymap={"overview.alarms": "v"}))
    async with app.run_test(size=(80, 24)) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        await until(pilot, lambda: len(alarms.firings) == 8)
        await pilot.pause(0.2)
        top = screen_lines(app)[alarms.region.y : alarms.region.y + 3]
        assert "· v all" in top[2], top
        assert "A all" not in top[2], top
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, AlarmsScreen))


async def test_the_remapped_alarm_key_also_closes_the_alarms(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The key that opens every alarm closes them again, as `A` does, also when remapped."""
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config(keymap={"overview.alarms": "v"}))
    async with app.run_test(size=(80, 24)) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        await until(pilot, lambda: len(alarms.firings) == 8)
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, AlarmsScreen))
        await pilot.pause(0.1)
        await pilot.press("v")
        await until(pilot, lambda: not isinstance(app.screen, AlarmsScreen))
