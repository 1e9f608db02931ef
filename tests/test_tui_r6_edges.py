"""Round 6: three rough edges of the console an operator meets.

1. While a modal screen is up, the footer shows the modal's keys, not the tab's.
"""

from __future__ import annotations

from typing import Any

import psycopg
from test_tui_console import SIZE, add_dead, config, goto, rendered, table, until
from textual.widgets import Footer

from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.filter_prompt import FilterScreen
from jobtui.tui.screens.help import HelpScreen
from jobtui.tui.widgets.footer import ConsoleFooter, ConsoleKey


def base_footer(app: JobtuiApp) -> ConsoleFooter:
    """The footer at the bottom: the base screen's (a modal has none of its own)."""
    return app.screen_stack[0].query_one(ConsoleFooter)


async def test_footer_shows_the_keys_of_the_modal_that_is_up(
    dsn: str, conn: psycopg.Connection
) -> None:
    add_dead(conn, "email.send", "SMTPError: boom", n=2)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        await until(pilot, lambda: len(table(app, "#dead-rows").keys) == 2)
        footer = base_footer(app)
        await pilot.press("tab")
        await until(pilot, lambda: "Requeue" in rendered(footer) and "Delete" in rendered(footer))
        await pilot.pause(0.2)
        tab_keys = rendered(footer)
        mounted = set(footer.query(ConsoleKey))

        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot, lambda: "Requeue" not in rendered(footer))
        assert rendered(footer) == "esc Back"  # the confirmation's key, nothing of the tab
        await pilot.press("escape")
        await until(pilot, lambda: rendered(footer) == tab_keys)

        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        await until(pilot, lambda: rendered(footer) == "esc Cancel")
        await pilot.press("escape")
        await until(pilot, lambda: rendered(footer) == tab_keys)

        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await until(pilot, lambda: rendered(footer) == "esc Close")
        await pilot.press("escape")
        await until(pilot, lambda: rendered(footer) == tab_keys)
        # Changed in place: the keys of the tab took the modals' texts and back, none mounted
        # again (the palette's key, which a modal has not, was hidden, not removed).
        assert set(footer.query(ConsoleKey)) == mounted
        assert isinstance(footer, Footer)


async def test_footer_is_quiet_while_a_modal_is_up(dsn: str, conn: psycopg.Connection) -> None:
    """A signal that changes no key redraws none: the focus moving inside the modal, or the
    tab's screen saying its bindings may have changed (its keys are not the ones shown)."""
    add_dead(conn, "email.send", "SMTPError: boom")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "3")
        footer = base_footer(app)
        await until(pilot, lambda: "Requeue" in rendered(footer))
        await pilot.press("tab", "r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot, lambda: rendered(footer) == "esc Back")
        await pilot.pause(0.2)
        redrawn: list[ConsoleKey] = []
        for key in footer.query(ConsoleKey):

            def counted(*args: Any, _key: ConsoleKey = key, **kw: Any) -> Any:
                redrawn.append(_key)
                return type(_key).refresh(_key, *args, **kw)

            key.refresh = counted  # type: ignore[method-assign]
        focused = app.focused
        await pilot.press("tab")  # the next button of the confirmation
        await until(pilot, lambda: app.focused is not focused)
        app.screen_stack[0].refresh_bindings()
        await pilot.pause(0.3)
        assert redrawn == []
        assert rendered(footer) == "esc Back"
