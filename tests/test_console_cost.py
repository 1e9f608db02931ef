"""Issue 12 item 5: the console's link bounds every operation and records its database time."""

from __future__ import annotations

import time

import psycopg
import pytest

from jobtui.tui.connection import Link, RefreshDropped

S = "public"


async def sleep_in_db(conn: psycopg.AsyncConnection, schema: str, seconds: float) -> float:
    async with conn.transaction():
        await conn.execute("SELECT pg_sleep(%s)", (seconds,))
    return seconds


async def setting(conn: psycopg.AsyncConnection, schema: str, name: str) -> str:
    cur = await conn.execute("SELECT current_setting(%s)", (name,))
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def sleepers(aconn: psycopg.AsyncConnection) -> int:
    cur = await aconn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%%'"
        " AND state = 'active' AND pid <> pg_backend_pid()"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def assert_dropped_then_usable(link: Link, aconn: psycopg.AsyncConnection) -> None:
    t0 = time.monotonic()
    with pytest.raises(RefreshDropped, match=r"refresh dropped: took longer than 0\.4 s"):
        async with link.refresh():
            await link.run(sleep_in_db, 5.0)
    assert time.monotonic() - t0 < 2.5  # cut at the limit, not after the 5 s sleep
    assert link.dropped == 1 and link.last_db_ms is None  # a dropped refresh reports no time
    assert await sleepers(aconn) == 0  # cancelled in the server, not left running
    assert await link.run(sleep_in_db, 0.0) == 0.0  # the link still works


async def test_a_slow_operation_is_cancelled_dropped_and_said_so(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    link = Link(dsn, S, statement_timeout_s=0.4)
    try:
        # The console's own session carries the limit, so the server enforces it too.
        assert await link.run(setting, "statement_timeout") == "400ms"
        await assert_dropped_then_usable(link, aconn)
    finally:
        await link.close()


async def test_behind_a_transaction_pooler_the_client_cancels_it(
    tx_pooled_dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    link = Link(tx_pooled_dsn, S, statement_timeout_s=0.4)
    try:
        # No session SET through the pooler: it would stay on a server connection for others.
        assert await link.run(setting, "statement_timeout") == "0"
        await assert_dropped_then_usable(link, aconn)
    finally:
        await link.close()


async def sleep_in_batches(conn: psycopg.AsyncConnection, schema: str, n: int) -> int:
    """An operator action's shape: many short statements, each in its own transaction."""
    for _ in range(n):
        async with conn.transaction():
            await conn.execute("SELECT pg_sleep(0.2)")
    return n


async def test_an_action_of_many_short_statements_is_never_cut(tx_pooled_dsn: str) -> None:
    # Behind a pooler (the client's bound is the only one), outside a refresh: 1 s in all,
    # each statement well under the 0.4 s limit.
    link = Link(tx_pooled_dsn, S, statement_timeout_s=0.4)
    try:
        assert await link.run(sleep_in_batches, 5) == 5
        with pytest.raises(RefreshDropped):
            async with link.refresh():
                await link.run(sleep_in_batches, 5)
    finally:
        await link.close()


async def test_last_db_ms_is_the_database_time_of_the_last_refresh(dsn: str) -> None:
    link = Link(dsn, S)
    try:
        async with link.refresh():
            await link.run(sleep_in_db, 0.15)
            await link.run(sleep_in_db, 0.10)
        assert link.last_db_ms is not None and 250 <= link.last_db_ms < 1500
        async with link.refresh():
            await link.run(sleep_in_db, 0.0)
        assert link.last_db_ms is not None and link.last_db_ms < 200
    finally:
        await link.close()


def test_the_timeout_must_be_positive(dsn: str) -> None:
    with pytest.raises(ValueError, match="positive"):
        Link(dsn, S, statement_timeout_s=0)


async def test_the_console_says_a_refresh_was_dropped_and_shows_db_time(dsn: str) -> None:
    """The real app: a refresh held up by a lock another session holds is dropped at the
    link's limit and the status line says so; once the lock goes, it shows the database time."""
    from rich.text import Text

    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    def status(app: JobtuiApp) -> str:
        parts = app.screen.query("#status Static")
        return " ".join(
            p.content.plain if isinstance(p.content, Text) else str(p.content) for p in parts
        )

    async def until(pilot: object, check: object, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():  # type: ignore[operator]
            assert time.monotonic() < deadline, "timed out"
            await pilot.pause(0.05)  # type: ignore[attr-defined]

    blocker = await psycopg.AsyncConnection.connect(dsn)
    app = JobtuiApp(dsn, S, config=ConsoleConfig(refresh_s=0.5))
    app.link = Link(dsn, S, statement_timeout_s=0.6)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: "db " in status(app) and app.polls > 0)
            await blocker.execute(f"LOCK TABLE {S}.jobs IN ACCESS EXCLUSIVE MODE")
            await until(pilot, lambda: "refresh dropped: took longer than 0.6 s" in status(app))
            assert app.link.dropped >= 1
            await blocker.rollback()
            polls = app.polls
            await until(pilot, lambda: app.polls > polls and "dropped" not in status(app))
            assert "db " in status(app)
    finally:
        await blocker.close()
