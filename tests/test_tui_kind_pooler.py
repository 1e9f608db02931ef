"""The kind screen behind a transaction pooler (attack, round 7): there the console sets no
session statement_timeout, so its reads are bounded only on the client, inside
`Link.refresh()`. The kind screen's reads ran outside it: one blocked by a lock on `jobs`
waited as long as the lock was held, and held the console's one link, so every other read
(the tabs behind the screen) queued behind it."""

from __future__ import annotations

import psycopg
import pytest
from targets_support import locked
from test_tui_console import config, until
from test_tui_kind import history, open_kind
from test_tui_kind_reads import head_text
from topology import Bouncer

from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens import kind as kind_screen


async def test_a_read_behind_a_pooler_is_bounded_on_the_client(
    dsn: str,
    conn: psycopg.Connection,
    pgbouncer_transaction: Bouncer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    app = JobtuiApp(pgbouncer_transaction.to(dsn), "public", config=config())
    app.link.statement_timeout_s = 1.0
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot)
        assert "5 unfinished" in head_text(screen)
        with locked(dsn):
            await until(pilot, lambda: "took longer than 1 s" in head_text(screen))
            assert app.is_running and app.screen is screen
        await until(pilot, lambda: "took longer" not in head_text(screen))
        assert "5 unfinished" in head_text(screen)
