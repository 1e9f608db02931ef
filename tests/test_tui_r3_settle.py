"""Issue 26 item 13 in Pilot: while live, rows coming and going (each moves every row below it:
a repaint of the whole table) are shown at most every SETTLE_S unless a key is pressed; in
between, rows that went are struck through and new ones are counted in the filter line."""

from __future__ import annotations

import psycopg
from test_tui_console import config, goto, until

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.keyed_table import KeyedTable


def _info(app: JobtuiApp) -> str:
    return app.query_one("#jobs-info").content.plain  # type: ignore[union-attr]


async def test_new_and_gone_rows_wait_for_a_key_or_the_settle_time(
    dsn: str, conn: psycopg.Connection
) -> None:
    enqueue_many(conn, [JobSpec("report", {"n": i}) for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "2")
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 5)
        await pilot.pause(0.6)
        enqueue_many(conn, [JobSpec("report", {"n": 98})])  # a first live change: at once
        await until(pilot, lambda: len(table.keys) == 6, timeout=5)
        bottom = table.keys[-1]  # the last to run: away from the cursor, on the top row
        assert table.current_key != bottom
        enqueue_many(conn, [JobSpec("report", {"n": 99})])  # another job arrives …
        conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (int(bottom),))
        # … within the settle time it waits, counted; the finished one is struck through.
        await until(pilot, lambda: table.waiting == 1, timeout=5)
        assert len(table.keys) == 5 and len(table.shown_keys) == 6
        assert "new rows" in _info(app) and "1 gone" in _info(app), _info(app)
        polls = app.polls
        await until(pilot, lambda: app.polls >= polls + 2)
        assert table.waiting == 1  # still held: no key pressed, settle time not over
        await pilot.press("k")  # any key in the table: the rows as they are, at once
        await until(pilot, lambda: len(table.keys) == 6 and table.waiting == 0, timeout=5)
        assert len(table.shown_keys) == 6 and "new rows" not in _info(app)


async def test_the_total_waits_with_the_rows_it_counts(dsn: str, conn: psycopg.Connection) -> None:
    """While new rows wait, the count line's "of N" waits with them ("new rows" says at once
    that there is more): a total that moved on every refresh redrew the line every 2 s under
    `jobtui demo`. A key shows the rows and the total together."""
    enqueue_many(conn, [JobSpec("report", {"n": i}) for i in range(5)])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "2")
        table = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(table.keys) == 5)
        await pilot.pause(0.6)
        enqueue_many(conn, [JobSpec("report", {"n": 98})])  # a first live change: at once
        await until(pilot, lambda: len(table.keys) == 6 and "6 shown of 6" in _info(app))
        for n in range(3):  # more arrive, one by one, over several refreshes
            enqueue_many(conn, [JobSpec("report", {"n": 100 + n})])
            polls = app.polls
            await until(pilot, lambda: app.polls >= polls + 2)  # noqa: B023
            assert table.waiting == n + 1, _info(app)
            assert "6 shown of 6" in _info(app) and "new rows" in _info(app), _info(app)
        await pilot.press("k")
        await until(pilot, lambda: "9 shown of 9" in _info(app), timeout=5)
