"""Two kinds whose names share their first 15 characters (`rebuild_search_index`,
`rebuild_search_cache`) read alike when cut at the end (`rebuild_search…` twice, on the
Overview, Jobs and Dead letters tabs at 80 columns). Cut, a name keeps its distinct end."""

from __future__ import annotations

import psycopg
from test_tui_console import add_dead, config, until
from test_tui_layout import screen_lines

from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.tui.app import JobtuiApp
from jobtui.tui.texts import kind_label

KINDS = ["rebuild_search_index_full", "rebuild_search_index_part"]  # alike for 20 characters


def test_kind_label() -> None:
    assert kind_label("send_email", KINDS, 15) == "send_email"
    # Alone with its beginning, a long name is cut at the end (by the table, with `…`).
    assert kind_label("generate_invoice_monthly", ["send_email"], 15) == "generate_invoice_monthly"
    a, b = (kind_label(k, KINDS, 15) for k in KINDS)
    assert len(a) == len(b) == 15 and a != b, (a, b)
    assert a.endswith("x_full") and b.endswith("x_part") and "…" in a, (a, b)


async def test_kinds_that_share_a_beginning_read_apart(dsn: str, conn: psycopg.Connection) -> None:
    enqueue_many(conn, [JobSpec(k, {"n": 1}) for k in KINDS])
    for k in KINDS:
        add_dead(conn, k, "E: boom")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        for tab in ("1", "2", "3", "4"):
            await pilot.press(tab)
            await until(pilot, lambda: "_full" in "\n".join(screen_lines(app)))
            await pilot.pause(0.2)
            shown = "\n".join(screen_lines(app))
            assert "_full" in shown and "_part" in shown, (tab, shown)
            assert "rebuild_search…" not in shown and "rebuild_search_in…" not in shown


async def test_one_group_is_one_group(dsn: str, conn: psycopg.Connection) -> None:
    add_dead(conn, "send_email", "E: boom")
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await until(pilot, lambda: "1 group" in "\n".join(screen_lines(app)))
        await pilot.pause(0.2)
        assert "1 groups" not in "\n".join(screen_lines(app))
