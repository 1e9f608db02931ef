"""Issue 26 item 12: help reads well at 80x24 (a description is not squeezed into ~15 columns
beside the binding ids) and stays usable at 60x20 (the descriptions are there, not only ids)."""

from __future__ import annotations

import psycopg
import pytest
from test_tui_console import config, until
from test_tui_layout import screen_lines

from jobtui.tui.app import JobtuiApp
from jobtui.tui.keys import key_display
from jobtui.tui.screens.help import HelpScreen

# (description, the words that must be on its first line at each width)
ENTRIES = [
    ("cancel marked jobs or the one under the cursor (asks)", "cancel marked jobs"),
    ("requeue the marked rows or the cursor row (asks)", "requeue the marked rows"),
    ("every alarm firing, worst first", "every alarm firing"),
]


@pytest.mark.parametrize("size", [(80, 24), (60, 20)])
async def test_help_descriptions_have_room(
    dsn: str, conn: psycopg.Connection, size: tuple[int, int]
) -> None:
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.2)
        box = app.screen.query_one("#help-box")
        seen: list[str] = []
        for _ in range(60):  # scroll through the whole help, a page at a time
            seen += screen_lines(app)
            box.scroll_page_down(animate=False)  # type: ignore[attr-defined]
            await pilot.pause(0.05)
        text = "\n".join(seen)
        for _, words in ENTRIES:
            assert words in text, (words, text[-3000:])
        # At 80 columns an entry takes at most two lines: its first line holds most of it.
        if size[0] >= 80:
            line = next(x for x in seen if "cancel marked jobs" in x)
            assert "the cursor" in line, line


async def test_help_lists_only_keys_that_work_here_by_their_names(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A console of one database lists no targets' keys (`0` and `!` do nothing there; they
    read "exclamation_mark  Next in trouble", widening the keys column to 18), and the help key,
    remapped, closes help as `?` does."""
    app = JobtuiApp(dsn, "public", config=config(keymap={"help": "h"}))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls >= 1)
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.2)
        text = "\n".join(screen_lines(app))
        assert "exclamation_mark" not in text, text
        assert "Next in trouble" not in text and "targets.back" not in text, text
        await pilot.press("h")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
    # In a target's console, where it works, `!` is named as the footer names it.
    assert key_display("n,exclamation_mark") == "n !"
