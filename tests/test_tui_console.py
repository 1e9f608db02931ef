"""The console driven through Textual's Pilot against a real PostgreSQL.

Each test asserts on what the operator sees (tables, banners, notifications, rendered text)
and on the rows in the database.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import conninfo
from psycopg.types.json import Jsonb
from rich.text import Text
from textual.app import App, ComposeResult
from textual.command import CommandPalette
from textual.content import Content
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Sparkline, Static, Tab
from textual.widgets._footer import FooterKey

from jobtui.console_config import ConsoleConfig
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.actions import REQUEUE
from jobtui.tui.app import JobtuiApp
from jobtui.tui.connection import APPLICATION_NAME
from jobtui.tui.host import WriteAsked
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.detail import DetailScreen
from jobtui.tui.screens.export_prompt import ExportPathScreen
from jobtui.tui.screens.filter_prompt import FilterScreen
from jobtui.tui.screens.help import HelpScreen
from jobtui.tui.screens.kind import KindScreen
from jobtui.tui.widgets.keyed_table import KeyedTable
from jobtui.tui.widgets.status import StatusBar

SIZE = (120, 40)

INSERT_DEAD = """
INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                          last_error, errors, reason)
VALUES (nextval(pg_get_serial_sequence('jobs', 'id')), %(kind)s, %(payload)s, 3, 3,
        now() - interval '1 hour', now() - interval '1 hour', %(error)s, %(errors)s, 'failed')
RETURNING id
"""


def add_dead(
    conn: psycopg.Connection, kind: str, error: str, payload: Any = None, n: int = 1
) -> list[int]:
    ids = []
    for i in range(n):
        entry = {
            "attempt": 3,
            "at": "2026-01-01T00:00:00+00:00",
            "error": error,
            "traceback": 'Traceback (most recent call last):\n  File "x.py", line 1\n' + error,
            "worker": "w:1:a",
        }
        row = conn.execute(
            INSERT_DEAD,
            {
                "kind": kind,
                "payload": Jsonb(payload if payload is not None else {"i": i}),
                "error": error,
                "errors": Jsonb([entry]),
            },
        ).fetchone()
        assert row is not None
        ids.append(row[0])
    return ids


def config(**changes: Any) -> ConsoleConfig:
    return ConsoleConfig(refresh_s=0.5).with_(**changes)


def _state(app: Any) -> str:
    return (
        f"polls={app.polls} db_error={app.db_error!r} screen={app.screen!r} "
        f"notes={notifications(app)}"
    )


async def until(pilot: Any, cond: Callable[[], bool], timeout: float = 15.0) -> None:
    """Let the app run until `cond()` holds; fail with a clear message after `timeout`."""
    steps = int(timeout / 0.05)
    for _ in range(steps):
        if cond():
            return
        await pilot.pause(0.05)
    assert cond(), f"condition not reached in time; app state: {_state(pilot.app)}"


async def fresh(app: JobtuiApp, pilot: Any) -> None:
    """Wait for a poll that started after now to complete."""
    target = app.polls + 2
    await until(pilot, lambda: app.polls >= target)


async def goto(app: JobtuiApp, pilot: Any, key: str) -> None:
    """Switch tab by its digit and wait until its main table has the focus."""
    name = {"1": "overview", "2": "jobs", "3": "dead", "4": "workers", "5": "schedules"}[key]
    await pilot.press(key)
    pane = app.query_one(f"#{name}-pane")
    main = pane.query_one(pane.main_table)  # type: ignore[attr-defined]
    await until(pilot, lambda: app.active_tab == name and app.focused is main)
    await pilot.pause()


def table(app: JobtuiApp, selector: str) -> KeyedTable:
    return app.query_one(selector, KeyedTable)


def rendered(widget: Widget) -> str:
    """The text a widget shows: table cells, static content, footer keys."""
    if isinstance(widget, DataTable):
        lines = [" ".join(str(c.label) for c in widget.columns.values())]
        for row in widget.ordered_rows:
            lines.append(
                " ".join(
                    c.plain if isinstance(c, Text) else str(c) for c in widget.get_row(row.key)
                )
            )
        return "\n".join(lines)
    if isinstance(widget, StatusBar):
        return widget.plain
    if isinstance(widget, Footer):
        keys = [k for k in widget.query(FooterKey) if k.display]  # not those kept hidden
        return " ".join(f"{k.key_display} {k.description}" for k in keys)
    if isinstance(widget, Static):
        content = widget.content
        if isinstance(content, Text):
            return content.plain
        if isinstance(content, (str, Content)):
            return str(content)
    region = Region(0, 0, widget.size.width, widget.size.height)
    return "\n".join(strip.text for strip in widget.render_lines(region))


def notifications(app: JobtuiApp) -> list[str]:
    return [n.message for n in app._notifications]


def dead_ids(conn: psycopg.Connection) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM dead_letters")}


def job_ids(conn: psycopg.Connection) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM jobs")}


async def test_requeue_one_dead_letter_by_keys(dsn: str, conn: psycopg.Connection) -> None:
    ids = add_dead(conn, "email.send", "SMTPError: 550 mailbox unavailable", n=3)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 3)
        await pilot.press("tab")
        assert app.focused is table(app, "#dead-rows")
        target = int(table(app, "#dead-rows").current_key or 0)
        assert target == max(ids)  # newest first
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")  # "this dead letter #id", not "all 3 matching"
        await until(pilot, lambda: target not in dead_ids(conn))
        await fresh(app, pilot)
        assert job_ids(conn) == {target}
        assert dead_ids(conn) == set(ids) - {target}
        assert str(target) not in table(app, "#dead-rows").keys
        assert "Requeued 1 dead letter." in notifications(app)
        audit = conn.execute("SELECT action, count FROM audit_log").fetchall()
        assert audit == [("requeue_dead", 1)]


async def test_group_requeue_counts_and_marked_delete(dsn: str, conn: psycopg.Connection) -> None:
    big = add_dead(conn, "webhook", "ConnectTimeout: host 'a.example' after 10s", n=4)
    small = add_dead(conn, "billing", "CardDeclined: card 1234 declined", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        groups = table(app, "#dead-groups")
        await until(pilot, lambda: len(groups.keys) == 3)  # (all) + two groups
        assert rendered(groups).count("ConnectTimeout: host ? after Ns") == 1
        await pilot.press("down")  # the biggest group comes first after (all)
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 4)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = rendered(app.screen.query_one("#confirm-body"))
        assert "4" in body
        await pilot.press("1", "4", "enter")  # a group is a bulk scope: its count is typed
        await until(pilot, lambda: dead_ids(conn) == set(small))
        assert job_ids(conn) == set(big)
        await until(pilot, lambda: "Requeued 4 dead letters." in notifications(app))

        # Now mark both remaining rows and delete exactly those.
        await until(pilot, lambda: len(groups.keys) == 2)
        await pilot.press("down", "tab")
        rows = table(app, "#dead-rows")
        await until(pilot, lambda: len(rows.keys) == 2)
        await pilot.press("space", "space")
        assert rows.marked == {str(i) for i in small}
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.has_class("-danger")
        await pilot.press("1")
        await until(pilot, lambda: dead_ids(conn) == set())
        assert job_ids(conn) == set(big)  # delete never touches jobs
        await until(pilot, lambda: "Deleted 2 dead letters." in notifications(app))


async def test_cancel_job(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(3)])
    first = min(job_ids(conn))  # due together: claim order puts the first enqueued on top
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 3)
        assert jobs.current_key == str(first)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: "Cancelled 1 job." in notifications(app))
        row = conn.execute(
            "SELECT cancelled_at, finished_at FROM jobs WHERE id = %s", (first,)
        ).fetchone()
        assert row is not None and row[0] is not None and row[1] is not None
        others = conn.execute("SELECT count(*) FROM jobs WHERE cancelled_at IS NULL").fetchone()
        assert others == (2,)
        # The Jobs tab shows unfinished jobs: the cancelled one stays under the cursor, struck
        # through, until the cursor moves; with every job shown (a) it reads "cancelled".
        await fresh(app, pilot)
        assert jobs.on_ghost and str(first) not in jobs.keys
        await pilot.press("a")
        await until(pilot, lambda: "cancelled" in rendered(jobs))

        # The detail view of another job (the top row: a ready one; the cancelled one went
        # below, with the finished rows): its facts, and cancel from there.
        await pilot.press("home", "enter")
        await until(
            pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.row is not None
        )
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        head = rendered(detail.query_one("#detail-head"))
        assert f"#{detail.row_id}" in head and "attempts 0 of 5" in head and "ready" in head
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: "cancelled" in rendered(detail.query_one("#detail-head")))
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)
        others = conn.execute("SELECT count(*) FROM jobs WHERE cancelled_at IS NULL").fetchone()
        assert others == (1,)


async def test_filter_jobs_by_kind_and_state(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("alpha", {"n": i}) for i in range(3)])
    enqueue_many(
        conn,
        [JobSpec("beta", {"needle": "xyzzy"}), JobSpec("beta", {"n": 1}, delay=timedelta(hours=1))],
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 5)
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        await pilot.press(*"state:bogus", "enter")
        assert isinstance(app.screen, FilterScreen)  # refused, stays open
        assert "unknown state" in rendered(app.screen.query_one("#filter-error"))
        app.screen.query_one("#filter-input").value = ""  # type: ignore[attr-defined]
        await pilot.press(*"kind:beta state:scheduled", "enter")
        await until(pilot, lambda: len(jobs.keys) == 1)
        assert "beta" in rendered(jobs) and "alpha" not in rendered(jobs)
        assert "kind:beta" in rendered(app.query_one("#jobs-info"))
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        app.screen.query_one("#filter-input").value = "xyzzy"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: len(jobs.keys) == 1 and "xyzzy" in rendered(jobs))


async def test_paging_marks_and_cursor_survive_refresh(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("bulk", {"n": i}) for i in range(12)])
    app = JobtuiApp(dsn, "public", config=config(page_size=5))
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 5)
        assert app.query_one("#jobs-pane").more  # type: ignore[attr-defined]
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: len(jobs.keys) == 10)
        await pilot.press("G")  # the cursor reaching the end loads the next page
        await until(pilot, lambda: len(jobs.keys) == 12)
        assert not app.query_one("#jobs-pane").more  # type: ignore[attr-defined]
        in_claim_order = conn.execute("SELECT id FROM jobs ORDER BY priority DESC, run_at, id")
        assert [int(k) for k in jobs.keys] == [r[0] for r in in_claim_order]

        # Refreshes never stack: a burst of requests while one runs becomes one more poll.
        pane = app.query_one("#jobs-pane")
        original = pane.load  # type: ignore[attr-defined]
        active, peak, calls = 0, 0, 0

        async def counting(link: Any) -> Any:
            nonlocal active, peak, calls
            active, calls = active + 1, calls + 1
            peak = max(peak, active)
            try:
                return await original(link)
            finally:
                active -= 1

        pane.load = counting  # type: ignore[attr-defined]
        for _ in range(20):
            app.refresh_now()
        await until(pilot, lambda: calls >= 2 and active == 0)
        assert peak == 1 and calls <= 3

        await pilot.press("home", "down", "space")
        marked = jobs.keys[1]
        cursor = jobs.current_key
        # A new row arrives at the top: it runs first (a higher priority).
        enqueue_many(conn, [JobSpec("bulk", {"new": True}, priority=1)])
        await until(pilot, lambda: len(jobs.keys) == 13)
        assert jobs.keys[0] == str(max(job_ids(conn)))
        assert jobs.marked == {marked}
        assert jobs.current_key == cursor


async def test_read_only_flag_refuses_and_writes_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    ids = add_dead(conn, "email.send", "SMTPError: boom", n=2)
    app = JobtuiApp(dsn, "public", config=config(read_only=True))
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 2)
        await pilot.press("tab", "r", "d")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
        footer = rendered(app.query_one("Footer"))
        assert "Requeue" not in footer and "Delete" not in footer and "Export" in footer
        assert "READ-ONLY" in rendered(app.query_one("#status"))
        assert not any("Requeue" in title for title, _, _ in app.palette_entries())
        app.writes.ask(WriteAsked(REQUEUE, ids, None))  # even when asked directly, it refuses
        await until(pilot, lambda: any("Read-only" in m for m in notifications(app)))
        assert dead_ids(conn) == set(ids)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)


async def test_select_only_role_turns_read_only(dsn: str, conn: psycopg.Connection) -> None:
    ids = add_dead(conn, "email.send", "SMTPError: boom", n=1)
    role = f"jobtui_ro_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{role}" LOGIN')
    conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        app = JobtuiApp(conninfo.make_conninfo(dsn, user=role), "public", config=config())
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.read_only)
            assert not app.config.read_only
            await until(pilot, lambda: any("Read-only" in m for m in notifications(app)))
            assert "READ-ONLY" in rendered(app.query_one("#status"))
            await goto(app, pilot, "3")
            await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 1)
            await pilot.press("tab", "r")
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
            assert dead_ids(conn) == set(ids)
            mode = rendered(app.query_one("#mode-banner"))
            assert "READ-ONLY: the database role cannot write" in mode
            conn.execute("INSERT INTO schedules (name, cron, kind) VALUES ('s', '* * * * *', 'k')")
            await goto(app, pilot, "5")
            await until(pilot, lambda: len(table(app, "#schedules-table").keys) == 1)
            await pilot.press("P", "r")
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
            footer = rendered(app.query_one("Footer"))
            assert "Run now" not in footer and "Pause/resume" not in footer
            await goto(app, pilot, "1")
            await pilot.press("L")
            await pilot.pause(0.3)
            assert len(app.screen_stack) == 1 and "Limits" not in rendered(app.query_one("Footer"))
            assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
    finally:
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')


async def test_hostile_payload_and_error_render_inert(dsn: str, conn: psycopg.Connection) -> None:
    hostile = "\x1b]52;c;aGk=\x07 [bold]pwn[/bold] \x9b31m"
    error = "ValueError: \x1b[31m[bold]red[/bold]\x1b[0m"
    ids = add_dead(conn, "mail", error, payload={"subject": hostile})
    enqueue_many(conn, [JobSpec("mail", {"subject": hostile})])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 1)
        shown = rendered(jobs)
        assert "\x1b" not in shown and "\x9b" not in shown
        assert "[bold]pwn" in shown  # markup shown as the characters it is
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 1)
        rows_text = rendered(table(app, "#dead-rows"))
        assert "\\x1b[31m[bold]red" in rows_text and "\x1b" not in rows_text
        await pilot.press("tab", "enter")
        await until(
            pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.row is not None
        )
        await pilot.pause(0.2)
        detail = app.screen
        payload = rendered(detail.query_one("#detail-payload"))
        errors = rendered(detail.query_one("#detail-errors"))
        assert "\\u001b]52;c;aGk=" in payload and "[bold]pwn[/bold]" in payload
        assert "\\x9b31m" in payload
        assert "\\x1b[31m[bold]red[/bold]" in errors
        for text in (payload, errors, app.export_screenshot()):
            assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
        assert f"#{ids[0]}" in rendered(detail.query_one("#detail-head"))


async def test_layout_at_80x24(dsn: str, conn: psycopg.Connection) -> None:
    add_dead(conn, "email.send", "SMTPError: boom", n=2)
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(30)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        screen = app.screen.region
        tiles = [w for w in app.query(".tile")]
        assert len(tiles) == 8 and all(t.region.width >= 9 for t in tiles)
        assert all(screen.contains_region(t.region) for t in tiles)
        assert "oldest" in app.export_screenshot()
        assert table(app, "#kinds").region.height >= 5
        tabs = list(app.query(Tab))
        assert [str(t.label) for t in tabs] == [
            "1 Overview",
            "2 Jobs",
            "3 Dead letters",
            "4 Workers",
            "5 Schedules",
            "6 Database",
        ]
        assert all(screen.contains_region(t.region) for t in tabs)
        await goto(app, pilot, "2")
        await until(pilot, lambda: len(table(app, "#jobs-table").keys) == 30)
        assert table(app, "#jobs-table").region.height >= 12
        assert "filter" in rendered(app.query_one("#jobs-info"))
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 2)
        assert table(app, "#dead-groups").region.height >= 4
        assert table(app, "#dead-rows").region.height >= 6
        await goto(app, pilot, "4")
        await until(pilot, lambda: app.polls >= 4)
        assert table(app, "#workers-table").region.height >= 4
        await goto(app, pilot, "5")
        await until(pilot, lambda: app.polls >= 5)
        assert table(app, "#schedules-table").region.height >= 12
        footer = app.query_one("Footer").region
        assert footer.bottom == 24 and footer.height == 1
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert screen.contains_region(app.screen.query_one("#help-box").region)


async def test_db_outage_banner_then_recovery(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("email.send", {})])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 2)
        banner = app.query_one("#banner", Static)
        assert not banner.display
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
        assert killed == [(True,)]
        await until(pilot, lambda: banner.display)
        assert "DATABASE UNREACHABLE" in rendered(banner)
        assert "DB DOWN" in rendered(app.query_one("#status"))
        assert app.query_one("#tabs").has_class("-stale")
        await until(pilot, lambda: not banner.display, timeout=10)
        assert app.db_error is None and not app.query_one("#tabs").has_class("-stale")
        assert app.link.connects == 2
        polls = app.polls
        await until(pilot, lambda: app.polls > polls)
        assert "Database reachable again." in notifications(app)


async def test_pause_refresh_help_palette_and_keymap(dsn: str, conn: psycopg.Connection) -> None:
    ids = add_dead(conn, "email.send", "SMTPError: boom", n=1)
    app = JobtuiApp(dsn, "public", config=config(keymap={"requeue": "y", "refresh.pause": "z"}))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.press("z")
        assert app.refresh_paused and app.query_one("#paused-banner").display
        assert "PAUSED" in rendered(app.query_one("#paused-banner"))
        polls = app.polls
        await pilot.pause(1.2)
        assert app.polls == polls  # no polling while paused
        await pilot.press("z")
        await until(pilot, lambda: app.polls > polls)
        assert not app.query_one("#paused-banner").display

        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = "\n".join(rendered(w) for w in app.screen.query(".help-table"))
        for needle in ("requeue", "refresh.pause", "ctrl+p", "quit", "mark", "filter"):
            assert needle in help_text
        assert "y " in help_text  # remapped key shown
        await pilot.press("escape")

        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 1)
        await pilot.press("tab")
        titles = [title for title, _, _ in app.palette_entries()]
        assert any(t.startswith(f"Requeue dead letter #{ids[0]}") for t in titles)
        await pilot.press("y")  # requeue, remapped
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert dead_ids(conn) == set(ids)  # cancelled: nothing written

        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"requeue dead")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: dead_ids(conn) == set())
        assert job_ids(conn) == set(ids)

        await pilot.press("minus")
        assert app.refresh_s == 1.0 and "⟳ 1s" in rendered(app.query_one("#status"))


@pytest.mark.parametrize("tab", ["overview", "workers"])
async def test_overview_and_workers_show_kinds(
    dsn: str, conn: psycopg.Connection, tab: str
) -> None:
    now = datetime.now(UTC)
    enqueue_many(
        conn,
        [JobSpec("slow.kind", {}, run_at=now - timedelta(minutes=40)), JobSpec("fast.kind", {})],
    )
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, '{fast.kind}', 4, now()),"
        "        ('h:2:b', 'h', 2, '{slow.kind}', 4, now() - interval '5 minutes')"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        if tab == "overview":
            kinds = table(app, "#kinds")
            await until(pilot, lambda: len(kinds.keys) == 2)
            assert kinds.keys[0] == "slow.kind"  # the troubled kind first
            text = rendered(kinds)
            assert "no worker, ✗ OLD" in text  # no worker first (issue 26 item 5)
            assert app.query_one("#t-oldest").has_class("-crit")
            assert "!!" in rendered(app.query_one("#t-oldest"))
            await pilot.press("P")  # pause the kind under the cursor: it asks first
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(
                pilot,
                lambda: (
                    conn.execute("SELECT kind FROM paused_kinds").fetchall() == [("slow.kind",)]
                ),
            )
            await until(pilot, lambda: "PAUSED" in rendered(kinds))
            await pilot.press("enter")  # the kind screen, then `j`: that kind's jobs
            await until(pilot, lambda: isinstance(app.screen, KindScreen))
            await pilot.press("j")
            jobs = table(app, "#jobs-table")
            await until(pilot, lambda: app.active_tab == "jobs" and len(jobs.keys) == 1)
            assert "slow.kind" in rendered(jobs) and "kind:slow.kind" in rendered(
                app.query_one("#jobs-info")
            )
        else:
            await goto(app, pilot, "4")
            workers = table(app, "#workers-table")
            await until(pilot, lambda: len(workers.keys) == 2)
            assert "STALE" in rendered(workers)
            await pilot.press("tab")
            kinds = table(app, "#worker-kinds")
            assert kinds.current_key == "fast.kind"
            await pilot.press("P")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(
                pilot,
                lambda: (
                    conn.execute("SELECT kind FROM paused_kinds").fetchall() == [("fast.kind",)]
                ),
            )
            await until(pilot, lambda: "PAUSED" in rendered(kinds))
            await pilot.press("P")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(
                pilot, lambda: conn.execute("SELECT count(*) FROM paused_kinds").fetchone() == (0,)
            )


async def test_export_marked_rows_and_run_now(
    dsn: str, conn: psycopg.Connection, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ids = add_dead(conn, "email.send", "SMTPError: boom", n=3)
    enqueue_many(conn, [JobSpec("later", {}, delay=timedelta(hours=2))])
    (later,) = job_ids(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        rows = table(app, "#dead-rows")
        await until(pilot, lambda: len(rows.keys) == 3)
        await pilot.press("tab", "space", "space", "e")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")  # the 2 marked rows, JSON lines
        await until(pilot, lambda: isinstance(app.screen, ExportPathScreen))  # asks where
        app.screen.query_one(Input).value = str(tmp_path / "dead.jsonl")
        await pilot.press("enter")
        await until(pilot, lambda: any(m.startswith("Exported 2") for m in notifications(app)))
        (path,) = tmp_path.glob("dead.jsonl")
        lines = path.read_text().splitlines()
        assert len(lines) == 2 and dead_ids(conn) == set(ids)  # export writes nothing

        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: jobs.keys == [str(later)])
        await pilot.press("r")  # run now: one row, and it asks first too
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: "Made 1 job due now." in notifications(app))
        row = conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (later,)).fetchone()
        assert row == (True,)


def live_widgets() -> int:
    """Widget objects alive in the process, attached to the DOM or not."""
    gc.collect()
    return sum(isinstance(o, Widget) for o in gc.get_objects())


async def test_switching_tabs_does_not_leak_widgets(dsn: str, conn: psycopg.Connection) -> None:
    """Tab switches rebuild the footer; the keys it replaces must be freed (textual#6666)."""
    add_dead(conn, "email.send", "SMTPError: boom", n=2)
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:

        async def switch_tabs(rounds: int) -> None:
            for _ in range(rounds):
                for key in "1234":
                    target = app.polls + 1
                    await goto(app, pilot, key)
                    await until(pilot, partial(lambda n: app.polls >= n, target))  # a refresh

        await switch_tabs(1)
        await pilot.pause(0.2)
        in_dom, alive = len(app.query("*")), live_widgets()
        await switch_tabs(3)
        await pilot.pause(0.2)
        assert len(app.query("*")) == in_dom
        # The old footer kept ~6 dead keys per rebuild, a few rebuilds per switch: +250 here.
        assert live_widgets() - alive <= 10


async def test_unchanged_refresh_redraws_nothing(dsn: str, conn: psycopg.Connection) -> None:
    """A refresh that brings the same figures leaves tiles, sparklines and info lines alone."""
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await fresh(app, pilot)
        tile = app.query_one("#t-ready", Static)
        assert "5" in rendered(tile)
        spark = app.query_one("#s-depth").query_one(Sparkline)
        head = app.query_one("#status-head", Static)
        shown = (tile.content, spark.data, head.content)
        await fresh(app, pilot)
        assert (tile.content, spark.data, head.content) == shown
        assert tile.content is shown[0] and spark.data is shown[1] and head.content is shown[2]
        await goto(app, pilot, "2")
        info = app.query_one("#jobs-info", Static)
        await until(pilot, lambda: "5 shown" in rendered(info))
        before = info.content
        await fresh(app, pilot)
        assert info.content is before
        enqueue_many(conn, [JobSpec("email.send", {"n": 5})])
        await until(pilot, lambda: "6 shown" in rendered(info))
        await goto(app, pilot, "1")
        await until(pilot, lambda: "6" in rendered(tile))  # a change is still shown


async def test_table_restyles_a_cell_whose_text_did_not_change() -> None:
    """A kind turning failing keeps its digits but turns red: the cell must be updated."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield KeyedTable(id="t")

    app = One()
    async with app.run_test(size=(40, 10)) as pilot:
        t = app.query_one("#t", KeyedTable)
        t.setup_columns(("n", "n", 5))
        t.sync([("k", [Text("5")])])
        await pilot.pause()
        t.sync([("k", [Text("5", style="red")])])
        assert str(t.get_cell("k", "n").style) == "red"
        t.sync([("k", [Text("6", style="red")])])
        assert t.get_cell("k", "n").plain == "6"


async def test_table_adds_a_next_page_below_the_rows_it_keeps() -> None:
    """A next page adds rows under the shown ones: those rows keep their DataTable rows (not
    cleared and added again), their changed cells are updated, and marks and cursor stay."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield KeyedTable(markable=True, id="t")

    app = One()
    async with app.run_test(size=(40, 10)) as pilot:
        t = app.query_one("#t", KeyedTable)
        t.setup_columns(("n", "n", 5))
        t.sync([(str(i), [Text(str(i))]) for i in (9, 8, 7)])
        await pilot.pause()
        t.focus()
        t.move_cursor(row=1)
        t.action_toggle_mark()  # marks 8, the cursor moves to 7
        kept = {key: t.rows[key] for key in t.rows}
        t.sync([(str(i), [Text(str(i) + ("!" if i == 9 else ""))]) for i in (9, 8, 7, 6, 5)])
        assert t.keys == ["9", "8", "7", "6", "5"]
        assert all(t.rows[key] is row for key, row in kept.items())
        assert t.get_cell("9", "n").plain == "9!" and t.get_cell("5", "n").plain == "5"
        assert t.marked == {"8"} and t.current_key == "7"
        assert [t.get_row_at(i)[1].plain for i in range(5)] == ["9!", "8", "7", "6", "5"]
        # Not a page added below: the rows are placed again, in the new order (the row under
        # the cursor, gone, stays struck through where it was).
        t.sync([(str(i), [Text(str(i))]) for i in (4, 9, 8)])
        assert t.keys == ["4", "9", "8"] and t.marked == {"8"} and t.ghost == "7"
        assert [t.get_row_at(i)[1].plain for i in range(4)] == ["4", "9", "7", "8"]
        assert t.current_key is None  # `c` and `r` do nothing on a row that is gone
        # The row comes back: a row like any other again, under the cursor.
        t.sync([(str(i), [Text(str(i))]) for i in (4, 9, 7, 8)])
        assert t.ghost is None and t.keys == ["4", "9", "7", "8"] and t.current_key == "7"
        assert t.get_cell("7", "n").style != "dim strike"


# --- issue 11: fast to the problem, safe to act ------------------------------------------


async def test_jobs_open_on_unfinished_sort_and_prefix_filter(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(3)])
    enqueue_many(conn, [JobSpec("sms.send", {"n": i}) for i in range(2)])
    enqueue_many(conn, [JobSpec("email.send", {"done": True})])
    done = [max(job_ids(conn))]
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)", (done,))
    conn.execute("UPDATE jobs SET run_at = now() - interval '1 hour' WHERE kind = 'sms.send'")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 5)  # the finished one is not shown
        assert str(done[0]) not in jobs.keys
        assert "unfinished jobs" in rendered(app.query_one("#jobs-info"))
        await pilot.press("a")  # all jobs
        await until(pilot, lambda: len(jobs.keys) == 6)
        await pilot.press("a")
        await until(pilot, lambda: len(jobs.keys) == 5)

        # Sort: s picks the first column (id ▲), again the next (kind); S reverses.
        await pilot.press("s")
        assert jobs.sort_column == "id" and "id▲" in rendered(jobs).splitlines()[0]
        assert jobs.keys == sorted(jobs.keys, key=int)
        jobs.move_cursor(row=1)
        under = jobs.current_key
        rows = {key: jobs.rows[key] for key in jobs.rows}
        await pilot.press("S")
        assert "id▼" in rendered(jobs).splitlines()[0]
        assert jobs.keys == sorted(jobs.keys, key=int, reverse=True)
        # Reordered where they are: the same rows, drawn in the new order, the cursor on its row.
        assert all(jobs.rows[key] is row for key, row in rows.items())
        await pilot.pause()
        drawn = [line.split()[0] for line in rendered(jobs).splitlines()[1:6]]
        assert drawn == jobs.keys and jobs.current_key == under
        await pilot.press("s")
        assert jobs.sort_column == "kind"
        await fresh(app, pilot)  # a refresh keeps the sort
        kinds = [jobs.get_cell(k, "kind").plain for k in jobs.keys]
        assert kinds == sorted(kinds)

        # o: the ready jobs, longest waiting first (the sms jobs waited an hour).
        await pilot.press("o")
        await until(pilot, lambda: len(jobs.keys) == 5 and jobs.sort_column == "when")
        assert {jobs.get_cell(k, "kind").plain for k in jobs.keys[:2]} == {"sms.send"}

        # kind:email is a prefix of email.send: it matches, and the filter shows the kind.
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        app.screen.query_one("#filter-input").value = "kind:email"  # type: ignore[attr-defined]
        await pilot.pause(0.2)
        assert "email.send" in rendered(app.screen.query_one("#filter-kinds"))
        await pilot.press("enter")
        await until(pilot, lambda: len(jobs.keys) == 4)  # every state: none was typed
        assert "kind:email.send" in rendered(app.query_one("#jobs-info"))
        # A prefix of two kinds is refused with their names, never a silent 0 rows.
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        app.screen.query_one("#filter-input").value = "kind:send"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, FilterScreen)
        error = rendered(app.screen.query_one("#filter-error"))
        assert "matches 2 kinds" in error and "sms.send" in error
        await pilot.press("escape")


async def test_cursor_stays_on_a_requeued_group_and_a_second_r_does_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    first = add_dead(conn, "webhook", "ConnectTimeout: host 'a.example' after 10s", n=3)
    second = add_dead(conn, "billing", "CardDeclined: card 1234 declined", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        groups = table(app, "#dead-groups")
        await until(pilot, lambda: len(groups.keys) == 3)
        await pilot.press("down")  # the webhook group (the bigger one)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1", "3", "enter")  # a group is a bulk scope: its count is typed
        await until(pilot, lambda: dead_ids(conn) == set(second))
        await until(pilot, lambda: len(groups.keys) == 2)
        # The requeued group is still under the cursor (struck through), not the next group.
        assert groups.on_ghost and groups.current_key is None
        await pilot.press("r")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
        assert dead_ids(conn) == set(second)  # the second r requeued nothing
        assert job_ids(conn) == set(first)
        await pilot.press("down")  # moving on drops the gone row
        await fresh(app, pilot)
        assert not groups.on_ghost and len(groups.keys) == len(groups.ordered_rows) == 2


async def test_counts_follow_a_write_and_finished_jobs_offer_no_cancel(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue_many(conn, [JobSpec("email.send", {"n": i}) for i in range(14)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        info = app.query_one("#jobs-info")
        await until(pilot, lambda: "14 shown of 14" in rendered(info))
        await pilot.press("space", "space", "space", "c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("1")
        await until(pilot, lambda: "Cancelled 3 jobs." in notifications(app))
        await until(pilot, lambda: "11 shown of 11" in rendered(info), timeout=5)

        # All jobs: on a cancelled (finished) row, c and r are not offered and do nothing.
        await pilot.press("a")
        await until(pilot, lambda: len(jobs.keys) == 14)
        cancelled = {
            str(r[0]) for r in conn.execute("SELECT id FROM jobs WHERE cancelled_at IS NOT NULL")
        }
        jobs.move_cursor(row=next(i for i, k in enumerate(jobs.keys) if k in cancelled))
        await pilot.pause(0.2)
        pane = app.query_one("#jobs-pane")
        assert pane.check_action("cancel", ()) is None and pane.check_action("run_now", ()) is None
        await pilot.press("c")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)
        jobs.move_cursor(row=next(i for i, k in enumerate(jobs.keys) if k not in cancelled))
        await pilot.pause(0.2)
        assert pane.check_action("cancel", ()) is True
        assert pane.check_action("run_now", ()) is None  # ready: already due


async def test_footer_tells_scopes_and_the_two_pauses_apart(
    dsn: str, conn: psycopg.Connection
) -> None:
    add_dead(conn, "webhook", "ConnectTimeout", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        footer = app.query_one(Footer)
        await pilot.pause(0.3)
        assert "Pause kind" in rendered(footer)
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-groups").keys) == 2)
        await pilot.pause(0.3)
        text = rendered(footer)
        assert "Requeue GROUP" in text and "Delete GROUP" in text
        await pilot.press("tab")
        await pilot.pause(0.3)
        text = rendered(footer)
        assert "Requeue GROUP" not in text and "Requeue" in text
