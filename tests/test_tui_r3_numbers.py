"""Issue 26 item 5 and "Numbers are never cut": ids past 10,000,000, counts of 100,000, a
"when" 30 days ahead are shown whole at 80x24 and 60x20; a kind name too long for its column
ends in `…`, and the Overview's status keeps its words."""

from __future__ import annotations

import re

import psycopg
import pytest
from test_tui_console import config, goto, until
from test_tui_layout import screen_lines

from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.keyed_table import KeyedTable

FIRST_ID = 10_000_001
LONG_KIND = "generate_invoice_pdf_monthly"
DEAD_N = 100_000


def _seed(conn: psycopg.Connection) -> None:
    conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s)", (FIRST_ID - 1,))
    conn.execute(
        """INSERT INTO jobs (kind, payload, run_at)
           SELECT %s, '{}', now() + interval '30 days 23 hours 30 minutes'
           FROM generate_series(1, 5)""",
        (LONG_KIND,),
    )
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, reason)
           SELECT nextval(pg_get_serial_sequence('jobs', 'id')), %s, '{}', 3, 3,
                  now(), now(), 'E: x', 'failed'
           FROM generate_series(1, %s)""",
        (LONG_KIND, DEAD_N),
    )
    conn.execute("ANALYZE")


def _ids_on(lines: list[str]) -> set[int]:
    return {int(m) for line in lines for m in re.findall(r"\b1\d{7}\b", line)}


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_ids_counts_and_when_whole(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    _seed(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        # Overview: the long name ends in an ellipsis; the status still says DEAD (at 60
        # columns the status gives up its words before the dead count drops: the count says
        # it, in its column).
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 1)
        await pilot.pause(0.2)
        screen = "\n".join(screen_lines(app))
        assert "generate_invoi…" in screen or "generate_invo…" in screen, screen
        if size[0] >= 80:
            assert "DEAD" in screen, screen
        else:
            row = next(line for line in screen.splitlines() if line.startswith(" generate_"))
            assert "dead" in kinds.shown_columns and "100.0k" in row, screen

        await goto(app, pilot, "2")
        jobs = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(jobs.keys) == 5)
        await pilot.pause(0.2)
        lines = screen_lines(app)
        shown = _ids_on(lines)
        assert shown == set(range(FIRST_ID, FIRST_ID + 5)), (shown, lines)
        screen = "\n".join(lines)
        if size[0] >= 80:
            assert "in 30d23h" in screen, screen
        else:  # dropped whole for the width (w shows it), never cut to "in 30d2"
            assert "in 30d23h" in screen or ("in 30d" not in screen and "→" in screen), screen
        assert "…" in screen and LONG_KIND not in screen, screen

        await goto(app, pilot, "3")
        groups = app.query_one("#dead-groups", KeyedTable)
        rows = app.query_one("#dead-rows", KeyedTable)
        await until(pilot, lambda: len(groups.keys) >= 1 and len(rows.keys) >= 1)
        await pilot.pause(0.3)
        screen = "\n".join(screen_lines(app))
        assert "100,000" in screen, screen
        first_dead = FIRST_ID + 5
        dead_ids = _ids_on(screen_lines(app))
        assert dead_ids and all(first_dead <= i < first_dead + DEAD_N for i in dead_ids), screen


async def test_overview_at_80_columns_keeps_the_four_figures(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Item 6: depth, oldest age, dead letters and run time fit beside a shorter status."""
    conn.execute(
        """INSERT INTO jobs (kind, payload)
           SELECT k, '{}' FROM unnest(ARRAY['send_email', 'generate_invoice', 'resize_image']) k,
                               generate_series(1, 3)"""
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 3)
        await pilot.pause(0.2)
        shown = kinds.shown_columns
        assert {"ready", "oldest", "dead", "p95", "fail"} <= set(shown), shown
        assert len(kinds.hidden_columns) <= 5, kinds.hidden_columns
        header = next(line for line in screen_lines(app) if " kind " in line)
        assert "fail%" in header and "p95" in header and "dead" in header, header
