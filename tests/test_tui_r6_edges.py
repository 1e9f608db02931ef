"""Round 6: three rough edges of the console an operator meets.

1. While a modal screen is up, the footer shows the modal's keys, not the tab's.
2. At 60 columns an Overview kind row with three problems keeps its dead letters in view.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from test_tui_console import SIZE, add_dead, config, goto, rendered, table, until
from test_tui_layout import screen_lines
from textual.widgets import Footer

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.filter_prompt import FilterScreen
from jobtui.tui.screens.help import HelpScreen
from jobtui.tui.widgets.footer import ConsoleFooter, ConsoleKey
from jobtui.tui.widgets.keyed_table import KeyedTable


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


async def test_at_60_columns_a_kind_with_three_problems_keeps_its_dead_count(
    dsn: str, conn: psycopg.Connection
) -> None:
    """A 15-letter kind that fails, is paused and has no worker, with dead letters: the status
    gives up its words (`…`) before the dead count drops."""
    kind = "webhook.deliver"  # as long as the kind column gets (KIND_COLUMN_WIDTH)
    old = datetime.now(UTC) - timedelta(minutes=40)
    enqueue_many(conn, [JobSpec(kind, {"n": i}, run_at=old) for i in range(3)])
    conn.execute(
        "INSERT INTO kind_stats (minute, kind, done, failed)"
        " VALUES (date_trunc('minute', now()), %s, 1, 9)",
        (kind,),
    )
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES (%s, 'test')", (kind,))
    add_dead(conn, kind, "SMTPError: boom", n=7)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(60, 20)) as pilot:
        kinds = app.query_one("#kinds", KeyedTable)
        await until(pilot, lambda: len(kinds.keys) == 1)
        await pilot.pause(0.3)
        status = rendered(kinds).splitlines()[1]
        assert "FAIL" in status and "PAUSED" in status and "no worker" in status
        assert "dead" in kinds.shown_columns, kinds.shown_columns
        lines = screen_lines(app)
        header = next(line for line in lines if " status " in line)
        row = next(line for line in lines if line.startswith(f" {kind} "))
        at = header.index(" dead") + 1
        assert row[at : at + 5].strip() == "7", (header, row)  # the dead count, in its column
        assert "FAIL" in row  # the first problem still in words


def test_a_flex_column_may_shrink_past_half_when_it_says_so() -> None:
    from jobtui.tui.widgets.keyed_table import Column, fit_columns

    cols = [
        Column("status", "status", 20, priority=0, flex=True, shrink=14),
        Column("dead", "dead", 8, priority=1),
    ]
    # 22 + 10 = 32 cells wanted in 20: the status gives 12 (more than half), dead stays.
    assert fit_columns(cols, 20, 0) == (["status", "dead"], -12)
    halfway = [Column("status", "status", 20, priority=0, flex=True, shrink=5), cols[1]]
    shown, spare = fit_columns(halfway, 20, 0)  # giving 5 is not enough: dead drops
    assert shown == ["status"] and spare == -7  # 22 + "+1→" 5 = 27 in 20
