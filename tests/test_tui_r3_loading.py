"""Issue 26, "waiting is always visible": the filter line says the rows are loading until the
rows of the new filter are shown; a text search whose newest rows hold no match goes on to
older rows by itself instead of showing 0."""

from __future__ import annotations

import psycopg
import pytest
from test_browse import add_dead
from test_tui_console import config, goto, until

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.models import DeadFilter, JobFilter
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.dead import DeadPane
from jobtui.tui.panes.jobs import JobsPane
from jobtui.tui.widgets.keyed_table import KeyedTable


def _info(app: JobtuiApp) -> str:
    return app.query_one("#jobs-info").content.plain  # type: ignore[union-attr]


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_filter_line_says_loading_until_the_rows_come(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    enqueue_many(conn, [JobSpec(k, {"n": i}) for k in ("kind_01", "kind_03") for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await goto(app, pilot, "2")
        pane = app.query_one(JobsPane)
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 10)
        pane.set_filter(JobFilter(states=("ready",), kind="kind_03"))
        line = _info(app)  # drawn at once, before any row of kind_03 was read
        assert "kind:kind_03" in line and "loading" in line and "shown" not in line, line
        await until(pilot, lambda: "5 shown" in _info(app))
        assert "loading" not in _info(app)


async def test_dead_letters_filter_line_says_loading_until_the_rows_come(
    dsn: str, conn: psycopg.Connection
) -> None:
    for kind in ("mail", "billing"):
        for _ in range(3):
            add_dead(conn, kind, f"{kind} failed")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "3")
        pane = app.query_one(DeadPane)
        rows = app.query_one("#dead-rows", KeyedTable)
        await until(pilot, lambda: len(rows.keys) == 6)
        assert "6 rows shown" in _dead_info(app) and "loading" not in _dead_info(app)
        pane.set_filter(DeadFilter(kind="billing"))
        line = _dead_info(app)  # drawn at once, before any row of billing was read
        assert "kind:billing" in line and "loading" in line and "shown" not in line, line
        await until(pilot, lambda: "3 rows shown" in _dead_info(app))
        assert "loading" not in _dead_info(app)


def _dead_info(app: JobtuiApp) -> str:
    return app.query_one("#dead-info").content.plain  # type: ignore[union-attr]


async def test_text_search_goes_on_to_older_rows(dsn: str, conn: psycopg.Connection) -> None:
    # 50 old jobs mention cust-42; 45,000 newer ones do not (more than one search call's scope).
    enqueue_many(conn, [JobSpec("billing", {"customer": "cust-42", "n": i}) for i in range(50)])
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'mail', jsonb_build_object('n', g)"
        " FROM generate_series(1, 45000) g"
    )
    conn.execute("ANALYZE jobs")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "2")
        pane = app.query_one(JobsPane)
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) > 0)
        pane.set_filter(JobFilter(states=pane.flt.states, text="cust-42"))
        # No `]` pressed: the search reaches the older rows by itself.
        await until(pilot, lambda: len(table.keys) == 50, timeout=20)
        assert "50 shown" in _info(app), _info(app)


async def test_a_search_going_on_shows_its_older_matches_at_once(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A search going on by itself through 150,000 jobs: its older matches are more of the
    same answer, shown as they come, not held back for 20 s behind "new rows (any key shows
    them)" (which read false: no job had arrived)."""
    conn.execute("SELECT setval('jobs_id_seq', 12345670)")
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'invoice', jsonb_build_object('n', g)"
        " FROM generate_series(1, 150000) g"
    )
    conn.execute("ANALYZE jobs")
    app = JobtuiApp(dsn, "public", config=config(refresh_s=2.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "2")
        pane = app.query_one(JobsPane)
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) > 0)
        pane.set_filter(JobFilter(text="4242"))
        # It goes on by itself (12, then 32, then 35 matches): every match found is shown.
        await until(pilot, lambda: "searching" not in _info(app) and pane.flt.text == "4242")
        await until(pilot, lambda: app.polls > 8)
        assert "new rows" not in _info(app), _info(app)
        assert table.waiting == 0, _info(app)
