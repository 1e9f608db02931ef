"""Issue 26 items 9 and 10: Tab never lands on an invisible stop (the tab bar), so `r` in Dead
letters always acts; a key on a struck-through row, or on a row it cannot act on, says why;
the count line counts the struck-through row it lists."""

from __future__ import annotations

import psycopg
import pytest
from test_tui_console import add_dead, config, goto, notifications, until

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.models import JobFilter
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.jobs import JobsPane
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.widgets.keyed_table import KeyedTable


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_tab_tab_r_in_dead_letters_asks(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    add_dead(conn, "export_crm", "OSError: refused", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await goto(app, pilot, "3")
        groups = app.query_one("#dead-groups", KeyedTable)
        await until(pilot, lambda: len(groups.keys) >= 1)
        for _ in range(2):
            await pilot.press("tab")
            await pilot.pause(0.1)
            assert isinstance(app.focused, KeyedTable), app.focused  # never the tab bar
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=5)


async def test_a_key_on_a_row_that_went_says_why(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec("report", {"n": i}) for i in range(2)])
    conn.execute("UPDATE jobs SET locked_at = now(), locked_by = 'h:1:a', attempts = 1")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "2")
        pane = app.query_one(JobsPane)
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 2)
        pane.set_filter(JobFilter(states=("running",)))
        info_line = app.query_one("#jobs-info")
        await until(pilot, lambda: "2 shown" in info_line.content.plain)  # type: ignore[union-attr]
        first = table.current_key
        assert first is not None
        conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (int(first),))
        await until(pilot, lambda: table.on_ghost, timeout=5)
        info = app.query_one("#jobs-info").content.plain  # type: ignore[union-attr]
        assert "1 shown" in info and "1 gone" in info, info  # two rows listed, both counted
        await pilot.press("c")
        await until(pilot, lambda: any("gone" in n for n in notifications(app)), timeout=3)
        assert not isinstance(app.screen, ConfirmScreen)
