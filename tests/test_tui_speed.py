"""What keeps a key cheap (issue 15 item 7): a tab key switches once, the footer's keys change
in place, and a table does not draw again the cells it has drawn.

benchmarks/console_scale.py times these keys at scale; here each behaviour that made them slow
is checked on its own, against a real PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from test_tui_console import SIZE, add_dead, config, fresh, goto, rendered, until
from textual.widgets import DataTable, TabbedContent

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.widgets.footer import ConsoleFooter, ConsoleKey, keys_in_effect


def footer_keys(app: JobtuiApp) -> dict[str, ConsoleKey]:
    keys = app.screen.query_one(ConsoleFooter).query(ConsoleKey)
    return {k.description: k for k in keys if k.display}


async def test_a_tab_key_switches_once(dsn: str, conn: psycopg.Connection) -> None:
    """The focused table of the tab left behind used to hand the focus to its sibling, in the
    hidden tab, and TabbedContent went back to that tab before coming forward again."""
    add_dead(conn, "email.send", "SMTPError: boom", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        await fresh(app, pilot)
        assert app.focused is app.query_one("#dead-groups")
        tabs = app.query_one("#tabs", TabbedContent)
        seen: list[str] = []
        app.watch(tabs, "active", lambda active: seen.append(active), init=False)
        await goto(app, pilot, "4")
        await fresh(app, pilot)
        assert seen == ["workers"]
        assert app.focused is app.query_one("#workers-table")


async def test_footer_keys_change_in_place(dsn: str, conn: psycopg.Connection) -> None:
    """A tab key changes the texts of the keys already there, greys and ungreys them as the
    row under the cursor allows, and a click on a key does what the key does now."""
    enqueue_many(conn, [JobSpec("email.send", {"n": 1})])
    later = datetime.now(UTC) + timedelta(hours=1)
    enqueue_many(conn, [JobSpec("email.send", {"n": 2}, run_at=later)])
    add_dead(conn, "email.send", "SMTPError: boom")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        await fresh(app, pilot)
        footer = app.query_one(ConsoleFooter)
        on_jobs = [k for k in footer.query(ConsoleKey) if k.display and k.shown.palette is False]
        await goto(app, pilot, "3")
        await until(pilot, lambda: "Requeue GROUP…" in footer_keys(app))
        on_dead = [k for k in footer.query(ConsoleKey) if k.display and k.shown.palette is False]
        # The same widgets, showing Dead letters' keys (as many as both tabs have in common).
        shared = min(len(on_jobs), len(on_dead))
        assert shared and on_dead[:shared] == on_jobs[:shared]
        shown = sorted((k.key, k.description) for k in footer.query(ConsoleKey) if k.display)
        assert shown == sorted((s.key, s.description) for s in keys_in_effect(app.screen))
        assert "Filter" in rendered(footer) and "Cancel" not in rendered(footer)

        await goto(app, pilot, "2")
        await until(pilot, lambda: "Cancel" in footer_keys(app))
        jobs = app.query_one("#jobs-table", DataTable)
        await until(pilot, lambda: jobs.row_count == 2)
        # The ready job first (claim order): run now does not apply; then the scheduled one:
        # it does; back on the ready one, greyed again, each time the same key.
        run_now = footer_keys(app)["Run now"]
        await until(pilot, lambda: run_now.has_class("-disabled"))
        await pilot.press("down")
        await until(pilot, lambda: not footer_keys(app)["Run now"].has_class("-disabled"))
        assert footer_keys(app)["Run now"] is run_now  # ungreyed in place
        await pilot.press("up")
        await until(pilot, lambda: footer_keys(app)["Run now"].has_class("-disabled"))
        assert footer_keys(app)["Run now"] is run_now  # greyed in place
        await pilot.click(run_now)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)  # a greyed key does nothing
        await pilot.click(footer_keys(app)["Cancel"])
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))


@pytest.fixture
def cells_drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every cell DataTable itself draws (KeyedTable asks it only for cells it has not
    drawn as they look now)."""
    drawn: list[Any] = []
    draw = DataTable._render_cell

    def counted(table: DataTable[Any], row: int, column: int, *args: Any, **kw: Any) -> Any:
        drawn.append((table.id, row, column))
        return draw(table, row, column, *args, **kw)

    monkeypatch.setattr(DataTable, "_render_cell", counted)
    yield drawn


async def test_a_table_shown_again_draws_no_cell_again(
    dsn: str, conn: psycopg.Connection, cells_drawn: list[Any]
) -> None:
    """Back on a tab whose rows did not change, with the focus on its table again, the cells
    are those drawn before (DataTable alone draws them all again after a focus change)."""
    # Ready for hours: their ages ("3h00m") stay as they are while the test runs.
    due = datetime.now(UTC) - timedelta(hours=3)
    enqueue_many(conn, [JobSpec("email.send", {"n": i}, run_at=due) for i in range(20)])
    app = JobtuiApp(dsn, "public", config=config(refresh_s=300.0))
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = app.query_one("#jobs-table", DataTable)
        await until(pilot, lambda: jobs.row_count == 20)
        await pilot.pause(0.2)
        assert any(t == "jobs-table" and r >= 0 for t, r, _ in cells_drawn)
        await goto(app, pilot, "1")
        await pilot.pause(0.2)
        polls = app.polls
        cells_drawn.clear()
        await goto(app, pilot, "2")
        await until(pilot, lambda: app.polls > polls)
        await pilot.pause(0.2)
        assert [c for c in cells_drawn if c[0] == "jobs-table" and c[1] >= 0] == []
        # A cell that changes is drawn again, and only that one.
        # Due together: claim order puts the first enqueued (lowest id) on the first row.
        conn.execute("UPDATE jobs SET kind = 'sms.send' WHERE id = (SELECT min(id) FROM jobs)")
        app.refresh_now()
        await until(pilot, lambda: "sms.send" in rendered(jobs))
        await pilot.pause(0.2)
        again = {(r, c) for t, r, c in cells_drawn if t == "jobs-table" and r >= 0}
        assert again == {(0, 2)}  # the first row's kind (after the mark column and the id)
