"""The kind screen switched to another kind while a read of the first one waits on a lock
(attack, round 7): the first kind's figures are never shown under the second's name, and the
console's link still reads once the lock goes."""

from __future__ import annotations

import psycopg
import pytest
from targets_support import locked
from test_tui_console import config, until
from test_tui_kind import history, open_kind
from test_tui_kind_reads import head_text

from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens import kind as kind_screen


async def test_switching_kinds_while_a_read_waits(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    history(conn)
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'second', '{}' FROM generate_series(1, 3)"
    )
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    app = JobtuiApp(dsn, "public", config=config())
    app.link.statement_timeout_s = 3.0
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot)
        assert "5 unfinished" in head_text(screen)
        with locked(dsn):
            await pilot.pause(0.8)  # a tick's read now waits on the lock
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is not screen)
            second = await open_kind(app, pilot, "second", complete=False)
            assert second is screen
            await pilot.pause(0.5)
            text = head_text(screen)
            assert "export_crm" not in text and "5 unfinished" not in text, text
        await until(pilot, lambda: "3 unfinished" in head_text(screen), timeout=10)
        text = head_text(screen)
        assert "second" in text and "export_crm" not in text, text
        assert app.is_running
