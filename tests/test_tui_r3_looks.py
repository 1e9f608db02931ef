"""Issue 26 item 2: with 16 colours (TERM=xterm) WARN and CRIT differ in colour, not only in
the glyph; the footer's keys and the cursor row are not in the alarm colour.

The screen is read as the compositor sends it, each colour folded onto the 16 the terminal has
(as rich does for a `standard` colour system)."""

from __future__ import annotations

import psycopg
import pytest
from rich.color import ColorSystem
from rich.style import Style
from test_tui_console import config, until
from test_tui_layout import screen_lines
from test_tui_r3_alarms import _incident

from jobtui.tui.app import JobtuiApp
from jobtui.tui.widgets.alarms import AlarmList
from jobtui.tui.widgets.keyed_table import KeyedTable


def _fold(style: Style) -> tuple[int | None, int | None, bool]:
    """(foreground, background, reverse) as 16-colour numbers (None: the terminal's default)."""

    def num(c: object) -> int | None:
        if c is None or c.is_default:  # type: ignore[attr-defined]
            return None
        return c.downgrade(ColorSystem.STANDARD).number  # type: ignore[attr-defined]

    return num(style.color), num(style.bgcolor), bool(style.reverse)


def _styles_of(app: JobtuiApp, y: int, text: str) -> tuple[int | None, int | None, bool]:
    strip = app.screen._compositor.render_strips()[y]
    for seg in strip:
        if text in seg.text and seg.style is not None:
            return _fold(seg.style)
    raise AssertionError(f"{text!r} not on line {y}: {[s.text for s in strip]}")


RED = {1, 9}


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_sixteen_colours_tell_warn_from_crit(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("COLORTERM", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config())
    assert app.console.color_system == "standard"
    async with app.run_test(size=size) as pilot:
        alarms = app.query_one("#alarms", AlarmList)
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(alarms.firings) == 8 and len(kinds.keys) == 8)
        await pilot.pause(0.3)
        y = alarms.region.y
        crit = _styles_of(app, y, "CRIT")
        warn = _styles_of(app, y + 1, "WARN")
        assert crit[0] in RED, crit
        assert warn[0] != crit[0], (warn, crit)  # not the same red
        assert warn[0] not in RED, warn

        # The kinds table: the cursor row (slow, critical age) and a dead-letters warning.
        lines = screen_lines(app)
        cursor_y = next(i for i, line in enumerate(lines) if "slow" in line and i > y + 2)
        name = _styles_of(app, cursor_y, "slow")
        assert name[0] not in RED and name[1] not in RED | {6, 14}, name  # not red on cyan
        dead_y = next(i for i, line in enumerate(lines) if "DEAD" in line and i > y + 2)
        dead = _styles_of(app, dead_y, "DEAD")
        assert dead[0] != crit[0], (dead, crit)

        # The footer's key letters are not the alarm red either.
        footer_y = size[1] - 1
        key = _styles_of(app, footer_y, "q")
        assert key[0] not in RED, key


async def test_sixteen_colours_cursor_row_is_reverse_video(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The focused cursor row with 16 colours is the terminal's reverse video: each cell keeps
    its own colour, which becomes the background under dark text. On the theme's light-grey
    cursor a yellow (warning) or cyan (running) cell could not be read."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("COLORTERM", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 8 and kinds.has_focus)
        await pilot.pause(0.3)
        lines = screen_lines(app)
        cursor_y = kinds.region.y + 1 + kinds.cursor_row
        assert "slow" in lines[cursor_y], lines
        strip = app.screen._compositor.render_strips()[cursor_y]
        x, cells = 0, []
        for seg in strip:
            if kinds.region.x <= x < kinds.region.right - 1 and seg.text.strip():
                cells.append((seg.text, _fold(seg.style or Style())))
            x += seg.cell_length
        assert cells, strip
        for text, (fg, bg, reverse) in cells:
            assert reverse and bg is None, (text, fg, bg, cells)
        # The critical age keeps its red, now as its background.
        assert next(fg for text, (fg, _, _) in cells if "40m" in text) in RED, cells


async def test_sixteen_colours_keep_the_screen_behind_a_modal(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A modal's 60% background cannot be blended from the 16 ANSI colours: it blanked the whole
    screen behind the filter prompt, the alarms and help (header and table gone)."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("COLORTERM", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    _incident(conn)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 8)
        await pilot.press("2")
        await pilot.pause(0.5)
        await pilot.press("slash")
        await pilot.pause(0.5)
        lines = screen_lines(app)
        assert "jobtui" in lines[0] and "Overview" in lines[1], lines
