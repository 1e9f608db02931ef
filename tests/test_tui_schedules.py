"""Issue 13 in the console: the Schedules tab and its actions, kind limits set from the
Overview, and unique keys (shown in the detail, filtered with `key:`).

Driven through Textual's Pilot against a real PostgreSQL; each test asserts on the screen and
on the rows (schedules, kind_limits, jobs, audit_log).
"""

from __future__ import annotations

import psycopg
from test_tui_console import SIZE, config, goto, notifications, rendered, table, until
from textual.widgets import Input

from jobtui.enqueue import enqueue
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.screens.limits import LimitsScreen

ADD_SCHEDULE = (
    "INSERT INTO schedules (name, cron, timezone, kind, payload)"
    " VALUES (%s, %s, %s, %s, '{}'::jsonb)"
)


def audit(conn: psycopg.Connection) -> list[tuple[str, int]]:
    return [(r[0], r[1]) for r in conn.execute("SELECT action, count FROM audit_log ORDER BY id")]


async def test_schedules_tab_pause_resume_and_run_now(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(ADD_SCHEDULE, ("nightly.report", "0 3 * * *", "Europe/Berlin", "report"))
    conn.execute(ADD_SCHEDULE, ("every.minute", "* * * * *", "UTC", "tick"))
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "5")
        rows = table(app, "#schedules-table")
        await until(pilot, lambda: len(rows.keys) == 2)
        text = rendered(rows)
        assert "0 3 * * *" in text and "Europe/Berlin" in text and "report" in text
        assert rows.current_key == "every.minute"  # by name
        assert "in " in text  # the next run, counted on the server's clock
        detail = rendered(app.query_one("#schedule-detail"))
        assert "every.minute · * * * * * (UTC) · kind tick" in detail

        await pilot.press("P")  # pause: asks first
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Pause schedule every.minute" in rendered(app.screen.query_one("#confirm-body"))
        await pilot.press("1")
        await until(
            pilot,
            lambda: (
                conn.execute(
                    "SELECT paused_by IS NOT NULL FROM schedules WHERE name = 'every.minute'"
                ).fetchone()
                == (True,)
            ),
        )
        await until(pilot, lambda: "PAUSED" in rendered(rows))
        assert audit(conn) == [("pause_schedule", 1)]

        await pilot.press("P")  # resume, and cancel at the confirmation: nothing changes
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await pilot.pause(0.3)
        assert audit(conn) == [("pause_schedule", 1)]

        await pilot.press("r")  # run now, even while paused
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,))
        job = conn.execute("SELECT id, kind FROM jobs").fetchone()
        assert job is not None and job[1] == "tick"
        await until(pilot, lambda: any(f"enqueued job #{job[0]}" in m for m in notifications(app)))
        assert audit(conn) == [("pause_schedule", 1), ("run_schedule_now", 1)]
        await until(pilot, lambda: "ready" in rendered(rows))  # the last run's outcome

        await pilot.press("enter")  # the last job's detail
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        assert app.screen.row_id == job[0]


async def test_schedule_deleted_while_selected(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(ADD_SCHEDULE, ("doomed", "* * * * *", "UTC", "tick"))
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "5")
        rows = table(app, "#schedules-table")
        await until(pilot, lambda: rows.keys == ["doomed"])
        app.refresh_paused = True  # the row stays on screen after the schedule is gone
        conn.execute("DELETE FROM schedules")
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: any("no schedule named" in m for m in notifications(app)))
        assert audit(conn) == []
        app.refresh_paused = False
        app.refresh_now()
        await until(pilot, lambda: rows.keys == [])
        assert app.is_running


async def test_set_and_clear_kind_limits_from_the_overview(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue(conn, "mail.send", {})
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        kinds = table(app, "#kinds")
        await until(pilot, lambda: kinds.keys == ["mail.send"])
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LimitsScreen))
        screen = app.screen
        screen.query_one("#limits-rate", Input).value = "100/x"
        screen.query_one("#limits-concurrency", Input).value = "5"
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert "rate must look like" in rendered(screen.query_one("#limits-error"))
        screen.query_one("#limits-rate", Input).value = "100/m"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = rendered(app.screen.query_one("#confirm-body"))
        assert "concurrency 5" in body and "rate 100/m" in body
        await pilot.press("1")
        await until(
            pilot,
            lambda: (
                conn.execute(
                    "SELECT concurrency, rate, period_s FROM kind_limits WHERE kind = 'mail.send'"
                ).fetchone()
                == (5, 100, 60)
            ),
        )
        await until(pilot, lambda: "≤5 100/m" in rendered(kinds))
        assert audit(conn) == [("set_kind_limits", 1)]

        await pilot.press("L")  # the dialog shows what is in force; clear the override
        await until(pilot, lambda: isinstance(app.screen, LimitsScreen))
        assert app.screen.query_one("#limits-concurrency", Input).value == "5"
        await pilot.click("#limits-clear")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: len(audit(conn)) == 2)
        assert audit(conn)[1] == ("clear_kind_limits", 1)
        await until(pilot, lambda: "≤5" not in rendered(kinds))


async def test_unique_key_in_detail_and_key_filter(dsn: str, conn: psycopg.Connection) -> None:
    keyed = enqueue(conn, "invoice", {"n": 42}, unique_key="invoice:42")
    enqueue(conn, "invoice", {"n": 43}, unique_key="invoice:43")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 2)
        await pilot.press("slash")
        await pilot.press(*"key:invoice:42")
        await pilot.press("enter")
        await until(pilot, lambda: jobs.keys == [str(keyed)])
        assert "key:invoice:42" in rendered(app.query_one("#jobs-info"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        await until(
            pilot, lambda: "unique key invoice:42" in rendered(app.screen.query_one("#detail-head"))
        )


async def test_exhausted_rows_are_not_ready(dsn: str, conn: psycopg.Connection) -> None:
    """Rows a classic consumer gave up on (attempts used up, not locked, not finished)."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, max_attempts)"
        " SELECT 'legacy', '{}', 3, 3 FROM generate_series(1, 2)"
    )
    enqueue(conn, "legacy", {})
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        kinds = table(app, "#kinds")
        await until(pilot, lambda: kinds.keys == ["legacy"])
        row = rendered(kinds).splitlines()[1]
        assert row.split()[1] == "1"  # ready: only the runnable one
        assert "2 EXHAUSTED" in row
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 3)
        assert rendered(jobs).count("exhausted") == 2
        await pilot.press("slash")
        await pilot.press(*"state:exhausted")
        await pilot.press("enter")
        await until(pilot, lambda: len(jobs.keys) == 2)


async def test_schedule_no_worker_has_enqueued_shows_late(
    dsn: str, conn: psycopg.Connection
) -> None:
    conn.execute(ADD_SCHEDULE, ("forgotten", "*/5 * * * *", "UTC", "tick"))
    conn.execute("UPDATE schedules SET next_tick = now() - interval '10 min'")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "5")
        rows = table(app, "#schedules-table")
        await until(pilot, lambda: rows.keys == ["forgotten"])
        assert str(rows.get_cell("forgotten", "next")).startswith("late 10m")
