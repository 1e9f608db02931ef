"""80×24 first, usable at 60×20: what says something is wrong is on screen at every size.

Each test opens the real console against a real database with a failing kind, a paused kind,
a kind no worker handles and dead letters whose long signatures differ only near their end,
and asserts on the characters the screen shows (the compositor's lines, as a terminal gets
them), not on what the widgets hold.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from rich.style import Style
from test_tui_console import add_dead, config, goto, until
from textual.geometry import Region

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.keyed_table import KeyedTable
from jobtui.tui.widgets.tiles import Tile

LONG = "ConnectTimeout: host api.partner.example.com did not answer within 30 s while posting "
ENDINGS = ("/orders", "/refunds", "/customers")  # signatures show digits as N
SIGNATURES = [LONG + tail for tail in ENDINGS]


def seed(conn: psycopg.Connection) -> None:
    old = datetime.now(UTC) - timedelta(minutes=40)
    kinds = ("billing.charge", "export.csv", "webhook.deliver", "email.send")
    enqueue_many(
        conn,
        [
            JobSpec(k, {"n": i}, run_at=None if k == "email.send" else old)
            for k in kinds
            for i in range(3)
        ],
    )
    # billing.charge fails 9 times in 10; export.csv is paused; email.send has a worker and
    # fresh jobs (no rule fires for it: its status reads "ok").
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed)"
        " VALUES (date_trunc('minute', now()), 'billing.charge', 1, 9),"
        "        (date_trunc('minute', now()), 'email.send', 10, 0)"
    )
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('export.csv', 'test')")
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('h:1:a', 'h', 1, '{email.send}', 4, now())"
    )
    for signature in SIGNATURES:
        add_dead(conn, "webhook.deliver", signature, n=2)


def screen_lines(app: JobtuiApp) -> list[str]:
    """The screen as the terminal shows it, one string per row."""
    strips = app.screen._compositor.render_strips()
    return ["".join(seg.text for seg in strip) for strip in strips]


def text_in(app: JobtuiApp, region: Region) -> str:
    lines = screen_lines(app)[region.y : region.bottom]
    return "\n".join(line[region.x : region.right] for line in lines)


def assert_on_screen(app: JobtuiApp, *words: str) -> None:
    screen = "\n".join(screen_lines(app))
    missing = [w for w in words if w not in screen]
    assert not missing, f"not on screen: {missing}\n{screen}"


SIZES = [(80, 24), (60, 20)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_overview_problems_and_every_tile_number_on_screen(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    seed(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 4)
        await pilot.pause(0.2)
        assert_on_screen(app, "FAIL", "PAUSED", "no worker", "oldest")
        assert "status" in kinds.shown_columns
        # Columns that did not fit are announced, not silently cut.
        assert kinds.hidden_columns
        assert_on_screen(app, f"+{len(kinds.hidden_columns)}→")
        # Every tile's number is on screen, inside its tile (at 60 columns: on its label's line).
        for tile in app.query(Tile):
            assert tile.value and tile.value != "–"
            assert app.screen.region.contains_region(tile.region)
            shown = text_in(app, tile.region)
            assert tile.value in shown, (tile.label, tile.value, shown)
        # The troubled kinds sort first: the failing one above the one that is fine.
        assert kinds.keys.index("billing.charge") < kinds.keys.index("email.send")


@pytest.mark.parametrize("size", [*SIZES, (100, 30)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_jobs_and_dead_letters_keep_the_problem_columns(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    seed(conn)
    conn.execute(
        "UPDATE jobs SET attempts = 1, run_at = now() + interval '5 min',"
        " last_error = 'KeyError: customer_id' WHERE kind = 'billing.charge'"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await goto(app, pilot, "2")
        jobs = app.query_one("#jobs-table", KeyedTable)
        await until(pilot, lambda: len(jobs.keys) == 12)
        await pilot.pause(0.2)
        for column in ("id", "kind", "state", "error"):
            assert column in jobs.shown_columns
        assert_on_screen(app, "retrying", "KeyError" if size[0] < 80 else "KeyError: customer_id")
        assert_on_screen(app, "last error")

        await goto(app, pilot, "3")
        groups = app.query_one("#dead-groups", KeyedTable)
        await until(pilot, lambda: len(groups.keys) == 4)
        await pilot.pause(0.3)
        # Signatures that share a long beginning each show the part that differs.
        assert_on_screen(app, *ENDINGS)
        if size[0] >= 100:
            assert "first" in groups.shown_columns
            assert_on_screen(app, "first")


async def test_wide_shows_every_column_and_home_goes_back_left(
    dsn: str, conn: psycopg.Connection
) -> None:
    seed(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 4)
        hidden = kinds.hidden_columns
        assert "p50" in hidden
        await pilot.press("w")
        await pilot.pause(0.2)
        assert kinds.hidden_columns == [] and "p50" in kinds.shown_columns
        await pilot.press(*["right"] * 12)
        await until(pilot, lambda: kinds.scroll_x > 0)
        await pilot.pause(0.1)
        # The problem columns stay while the rest scroll; the header says columns are hidden.
        assert_on_screen(app, "olde ←", "status", "billing.charge", "FAIL")
        await pilot.press("g")
        await until(pilot, lambda: kinds.scroll_x == 0)
        await pilot.pause(0.1)
        assert "←" not in "\n".join(screen_lines(app))
        await pilot.press("w")
        await pilot.pause(0.2)
        assert kinds.hidden_columns == hidden


def _segment_style(app: JobtuiApp, row_has: str, text: str) -> Style:
    """The style the screen draws `text` with, on the line that shows `row_has`."""
    for strip in app.screen._compositor.render_strips():
        if row_has in "".join(seg.text for seg in strip):
            for seg in strip:
                if text in seg.text and seg.style is not None:
                    return seg.style
    raise AssertionError(f"{text!r} not on the line of {row_has!r}")


def _style_at(app: JobtuiApp, x: int, y: int) -> Style:
    """The style of the screen cell at (x, y)."""
    strip = app.screen._compositor.render_strips()[y]
    at = 0
    for seg in strip:
        at += seg.cell_length
        if at > x:
            return seg.style or Style()
    raise AssertionError(f"no cell at {x},{y}")


def _stands_out(style: Style) -> bool:
    return bool(style.bold or style.reverse) and not style.dim


async def test_no_color_severity_shows_in_style_not_only_colour(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    seed(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.no_color
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 4)
        await pilot.pause(0.2)
        # The failing kind is first, under the cursor: its severity shows through the cursor.
        assert kinds.current_key == "billing.charge"
        failing = _segment_style(app, "billing.charge", "FAIL")
        assert _stands_out(failing), failing
        assert_on_screen(app, "✗ FAIL", "⏸ PAUSED")
        kinds.move_cursor(row=kinds.keys.index("export.csv"))
        await pilot.pause(0.2)
        failing = _segment_style(app, "billing.charge", "FAIL")
        healthy = _segment_style(app, "email.send", "ok")
        assert _stands_out(failing) and not _stands_out(healthy), (failing, healthy)
        # The dead tile (critical) is drawn in reverse video with a glyph, not dimmer.
        dead = app.query_one("#t-dead", Tile)
        assert dead.value.endswith("✗")
        value = _style_at(app, dead.region.x + 2, dead.region.bottom - 1)
        calm = _style_at(app, app.query_one("#t-scheduled").region.x + 2, dead.region.bottom - 1)
        assert value.reverse and not value.dim, value
        assert not calm.reverse, calm
