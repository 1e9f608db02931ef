"""Issue 26 item 8: the Schedules detail line (the row under the cursor) is spelled out in
full at 80 columns: it wraps instead of ending in "missed ti…"."""

from __future__ import annotations

import psycopg
import pytest
from test_tui_console import config, goto, until
from test_tui_layout import screen_lines

from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.keyed_table import KeyedTable


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_schedule_detail_line_whole(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    conn.execute(
        "INSERT INTO schedules (name, cron, timezone, kind, payload, missed)"
        " VALUES ('monthly report', '0 6 1 * *', 'Europe/Berlin', 'generate_report', '{}',"
        " 'latest')"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await goto(app, pilot, "5")
        table = app.query_one("#schedules-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 1)
        await pilot.pause(0.3)
        detail = app.query_one("#schedule-detail")
        lines = screen_lines(app)[detail.region.y : detail.region.bottom]
        text = " ".join(line.strip() for line in lines)
        assert "missed ticks: latest" in text, lines
        assert "…" not in text, lines
