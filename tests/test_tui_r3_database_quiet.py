"""Issue 26 item 13: the Database tab quiet while live. Tuple counts, connection counts and
ages change on every refresh under load; they are redrawn at most every few seconds (a key
draws them at once), so the tab no longer sends a redraw per refresh."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from test_dbhealth import churn
from test_tui_console import config, table, until
from test_tui_database import SMALL, open_database_tab

from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.pane import InfoLine

WHAT: list[tuple[int, str]] = []  # (poll, what was redrawn), for the failure message


def count_redraws(app: JobtuiApp) -> set[int]:
    """The polls at which a cell of the tab's tables or its status line was redrawn."""
    drawn: set[int] = set()
    WHAT.clear()
    for selector in ("#database-tables", "#database-workers"):
        t = table(app, selector)
        put = t._put

        def counted(*args: Any, _put: Any = put, _where: str = selector) -> None:
            drawn.add(app.polls)
            WHAT.append((app.polls, f"{_where} {str(args)[:80]}"))
            _put(*args)

        t._put = counted  # type: ignore[method-assign]
    status = app.query_one("#database-status", InfoLine)
    update = status.update

    def counted_update(*args: Any, **kwargs: Any) -> None:
        drawn.add(app.polls)
        WHAT.append((app.polls, f"status {str(args)[:80]}"))
        update(*args, **kwargs)

    status.update = counted_update  # type: ignore[method-assign]
    return drawn


def live_count(app: JobtuiApp) -> str:
    """The live tuples of `jobs` as the tab shows them."""
    return table(app, "#database-tables").get_row("t:jobs")[2].plain


async def test_live_figures_are_held_then_drawn_on_a_key(
    conn: psycopg.Connection, dsn: str
) -> None:
    # Autovacuum would change what is drawn at once (a table's first vacuum, a warning that
    # goes): on a loaded CI machine it ran inside the window. The held figures are the test.
    conn.execute(
        "DO $$ DECLARE t text; BEGIN FOR t IN SELECT relname FROM pg_class WHERE relkind = 'r'"
        " AND relnamespace = 'public'::regnamespace LOOP"
        " EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = off)', t); END LOOP; END $$"
    )
    churn(conn, 20)
    app = JobtuiApp(dsn, "public", config=config())  # a refresh every 0.5 s
    async with app.run_test(size=SMALL) as pilot:
        await open_database_tab(app, pilot)
        await until(pilot, lambda: live_count(app) == "20")
        await pilot.pause(1.0)
        drawn = count_redraws(app)
        first = app.polls
        started = time.monotonic()
        n = 20
        while time.monotonic() - started < 4.0:  # the jobs table changes on every refresh
            churn(conn, 5)
            n += 5
            await pilot.pause(0.3)
        polls = app.polls - first
        assert polls >= 4, polls  # refreshes that would each have redrawn
        # at most one redraw of the figures in 4 s (one every 10 s), not one per refresh
        assert len(drawn) <= 1, (sorted(drawn), polls, WHAT[:12])
        # a key draws the figures as they are with the next refresh
        await pilot.press("j")
        await until(pilot, lambda: live_count(app) == str(n), timeout=3.0)
