"""The kept kind screen opened on another kind: each region keeps the rows it takes on screen,
blank, until the new kind's figures come; a failed read or `t` meanwhile keeps the kind's name
and the heights (faults an attack found on the first version, which counted text lines)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from test_tui_console import config, rendered, until
from test_tui_kind import history_and_sms, open_kind, reopen_slowly

from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.kind import KindScreen
from jobtui.tui.widgets.keyed_table import KeyedTable

REGIONS = ("#kind-head", "#kind-charts", "#kind-errors", "#kind-settings")


async def test_a_failed_read_of_another_kind_still_names_it(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Opened on another kind whose read fails (a lock held on kind_stats, the refresh's
    statement timeout), the head still names the kind it is for and keeps its height. It said
    a bare "loading… / ✗ refresh dropped" over blank regions, and shrank from 3 rows to 2."""
    history_and_sms(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_kind(app, pilot)
        head_height = screen.query_one("#kind-head").size.height
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KindScreen))
        app.link.statement_timeout_s = 0.5
        with psycopg.connect(dsn) as locker:
            locker.execute("LOCK TABLE kind_stats IN ACCESS EXCLUSIVE MODE")
            table = app.query_one("#overview-pane KeyedTable", KeyedTable)
            table.focus()
            table.move_cursor(row=table.get_row_index("sms.send"))
            await pilot.press("enter")
            await until(pilot, lambda: app.screen is screen)
            await until(pilot, lambda: screen._problem is not None)
            await pilot.pause()
            head_text = rendered(screen.query_one("#kind-head"))
            locker.rollback()
        assert "refresh dropped" in head_text, head_text
        assert "sms.send" in head_text, head_text
        assert screen.query_one("#kind-head").size.height >= head_height, head_text


@pytest.mark.parametrize("size", [(40, 12), (100, 30)])
async def test_blanked_regions_keep_their_rendered_height_in_a_narrow_terminal(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch, size: Any
) -> None:
    """Each region blanked at the rows it takes on screen: counting the text's newlines, a
    line that wraps (the head at 40 columns, a long error signature at 80) made the blanked
    region shorter than the one it replaced, and it grew again when the figures came."""
    history_and_sms(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        screen = await open_kind(app, pilot)
        before = {r: screen.query_one(r).size.height for r in REGIONS}
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KindScreen))
        await reopen_slowly(app, pilot, monkeypatch, screen, "sms.send")
        assert screen.info is None
        blanked = {r: screen.query_one(r).size.height for r in REGIONS}
        assert blanked == before, (before, blanked)


async def test_t_while_another_kind_loads_keeps_the_blank_heights(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`t` while the blanked screen waits for another kind's first figures keeps the heights:
    its one-line head and "loading the last day…" dropped the head from 3 rows to 1 and the
    charts to 1 row (everything under them jumped up, then back down when the figures came)."""
    history_and_sms(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_kind(app, pilot)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KindScreen))
        await reopen_slowly(app, pilot, monkeypatch, screen, "sms.send")
        blanked = {r: screen.query_one(r).size.height for r in REGIONS[:2]}
        await pilot.press("t")
        await pilot.pause(0.05)
        assert screen.info is None
        after_t = {r: screen.query_one(r).size.height for r in REGIONS[:2]}
        assert after_t == blanked, (blanked, after_t)
