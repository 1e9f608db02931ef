"""Round 6: three rough edges of the console an operator meets.

1. While a modal screen is up, the footer shows the modal's keys, not the tab's.
2. At 60 columns an Overview kind row with three problems keeps its dead letters in view.
3. A job's detail screen shows recent ages to the second; the live tables keep 15 s steps.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from test_tui_console import SIZE, add_dead, config, goto, rendered, table, until
from test_tui_layout import screen_lines
from textual.widgets import Footer

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.detail import DetailScreen
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


async def test_detail_ages_count_seconds_tables_keep_their_steps(
    dsn: str, conn: psycopg.Connection
) -> None:
    row = conn.execute(
        "INSERT INTO jobs (kind, payload, attempts, created_at, run_at, locked_at, locked_by)"
        " VALUES ('mail', '{}', 1, now() - interval '38 s', now() - interval '38 s',"
        "         now() - interval '38 s', 'h:1:a') RETURNING id"
    ).fetchone()
    assert row is not None
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: "running" in rendered(jobs))
        assert "45s" in rendered(jobs)  # the table's age: in 15 s steps
        await pilot.press("enter")
        await until(
            pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.row is not None
        )
        detail = app.screen
        head = detail.query_one("#detail-head")
        first = re.findall(r"\((\d+)s ago\)", rendered(head))
        assert len(first) == 3 and {int(s) for s in first} <= set(range(38, 42)), rendered(head)
        assert re.search(r"attempt 1 running for (3[89]|4[01])s", rendered(head)), rendered(head)
        # The next reads move it on by the second (refresh every 0.5 s here).
        await until(pilot, lambda: re.findall(r"\((\d+)s ago\)", rendered(head))[0] != first[0])


def test_exact_age_counts_seconds_while_recent_then_steps_as_the_tables() -> None:
    from jobtui.tui.texts import EXACT_UNDER_S, coarse_age, exact_age

    assert [exact_age(s) for s in (0, 7, 38, 185)] == ["0s", "7s", "38s", "3m05s"]
    assert [coarse_age(s) for s in (7, 38)] == ["15s", "45s"]  # the tables' ages: unchanged
    assert exact_age(EXACT_UNDER_S) == coarse_age(EXACT_UNDER_S) == "10m"
    assert exact_age(None) == "–"


async def test_a_screen_of_its_own_shows_the_keys_of_its_modal(
    dsn: str, conn: psycopg.Connection
) -> None:
    """The detail screen has its own footer: a confirmation over it shows its keys there."""
    enqueue_many(conn, [JobSpec("email.send", {"n": 1})])
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        await until(pilot, lambda: len(table(app, "#jobs-table").keys) == 1)
        await pilot.press("enter")
        await until(
            pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.row is not None
        )
        footer = app.screen.query_one(ConsoleFooter)
        await until(pilot, lambda: "Cancel" in rendered(footer))
        await pilot.pause(0.2)
        own = rendered(footer)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot, lambda: rendered(footer) == "esc Back")
        await pilot.press("escape")
        await until(pilot, lambda: rendered(footer) == own)


async def test_the_footer_subscribes_once_to_its_screens_bindings(
    dsn: str, conn: psycopg.Connection
) -> None:
    """Textual runs Footer.on_mount itself (on_mount is dispatched along the MRO): the console's
    footer subscribed a second time by calling it, so each bindings signal recomposed twice."""
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        footer = base_footer(app)
        await until(pilot, lambda: bool(rendered(footer)))
        signal = app.screen_stack[0].bindings_updated_signal
        assert len(signal._subscriptions[footer]) == 1  # Footer's own, once
        assert len(app.screen_change_signal._subscriptions[footer]) == 1
