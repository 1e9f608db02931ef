"""Attacks on the kind screen's pipelined row read (kindinfo.load_then_rows, c14dec2): the
read cancelled, failing or torn down while its statements are in flight in pipeline mode. The
console's one connection must come out usable (no transaction left open on the server, no
"another command is already in progress"), and the screen must say what failed. Against the
real database: the row read is held in the server by a pg_sleep sent in its pipeline."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from test_tui_console import config, notifications, rendered, until
from test_tui_kind import history, open_kind
from topology import Bouncer

from jobtui import kindinfo
from jobtui.tui.app import JobtuiApp
from jobtui.tui.connection import APPLICATION_NAME
from jobtui.tui.screens import kind as kind_screen
from jobtui.tui.screens.kind import KindScreen
from jobtui.tui.widgets.keyed_table import KeyedTable


@pytest.fixture(autouse=True)
def nothing_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No warning or error logged by psycopg or the console during an attack."""
    caplog.set_level(logging.DEBUG)
    yield
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [(r.name, r.getMessage()) for r in loud]


BAD = ("pipeline", "another command", "InFailedSql", "in failed sql", "current transaction is")


def hold(monkeypatch: pytest.MonkeyPatch, seconds: float, *, rows: bool = True) -> dict[str, Any]:
    """Hold each row read (`rows`: its three statements) or each first read (else) `seconds`
    in the server, by a pg_sleep sent in its pipeline ahead of its statements (so, for the row
    read, the first figures are drawn meanwhile). Set the returned knob's "s" to 0 to let the
    reads go; "sent" counts the reads held."""
    real = kindinfo._send
    knob: dict[str, Any] = {"s": seconds, "sent": 0}

    async def send(conn: psycopg.AsyncConnection, statements: list[Any]) -> Any:
        if (len(statements) == 3) == rows and knob["s"]:
            await conn.execute("SELECT pg_sleep(%s)", (knob["s"],))
            knob["sent"] += 1
        return await real(conn, statements)

    monkeypatch.setattr(kindinfo, "_send", send)
    return knob


def another_kind(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'sms.send', '{}' FROM generate_series(1, 3)"
    )


def console_backends(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """The console's sessions in this test's database."""
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT state, query FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()"
            " AND query NOT LIKE 'SELECT pg_sleep(0.01)%%'",
            (APPLICATION_NAME,),
        )
    ]


def no_bad_words(app: JobtuiApp, screen: KindScreen) -> None:
    said = " ".join(notifications(app)) + rendered(screen.query_one("#kind-head"))
    assert not any(w.lower() in said.lower() for w in BAD), said


async def first_figures(app: JobtuiApp, pilot: Any) -> KindScreen:
    """Enter on export_crm; the screen once its first figures are shown (rows in flight)."""
    screen = await open_kind(app, pilot, complete=False)
    await until(pilot, lambda: screen._drawn is not None)
    return screen


async def no_transaction_left(conn: psycopg.Connection) -> None:
    """The console's sessions end up out of any transaction (within 5 s: a closed one may
    take a moment to go)."""
    for _ in range(50):
        if all(not s.startswith("idle in transaction") for s, _ in console_backends(conn)):
            return
        await asyncio.sleep(0.1)
    assert all(not s.startswith("idle in transaction") for s, _ in console_backends(conn))


async def still_usable(app: JobtuiApp, conn: psycopg.Connection) -> None:
    """The console's link runs a read and a write after the fault, and leaves no
    transaction open in the server."""

    assert await app.link.run(lambda c, s: _count(c)) > 0
    backends = console_backends(conn)
    assert backends and all(s == "idle" for s, _ in backends), backends


async def test_another_kind_opened_while_the_row_read_is_in_flight(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Esc, then Enter on another kind while the first kind's row read is in the server:
    the new read cancels the old one mid-pipeline. The new kind's every figure comes, and the
    link is usable after."""
    history(conn)
    another_kind(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)
    knob = hold(monkeypatch, 1.5)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        await first_figures(app, pilot)  # rows in flight
        await pilot.pause(0.2)
        await pilot.press("escape")
        second = await open_kind(app, pilot, kind="sms.send", complete=False)
        await until(pilot, lambda: second.info is not None and second.info.kind == "sms.send")
        no_bad_words(app, second)
        assert "sms.send" in rendered(second.query_one("#kind-head"))
        await pilot.press("escape")
        await still_usable(app, conn)
        assert app.is_running
    assert knob["sent"] >= 2


@pytest.mark.parametrize("how", ["esc", "quit"])
async def test_leaving_or_quitting_while_the_row_read_is_in_flight(
    how: str, dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Esc while the row read is in the server, then the Overview refreshes and the same kind
    opens again with every figure; or the app quits then, and ends cleanly. Either way no
    session of the console is left in a transaction."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)
    hold(monkeypatch, 1.0)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        await first_figures(app, pilot)
        if how == "quit":
            app.exit()
        else:
            await pilot.press("escape")
            polls = app.polls
            await until(pilot, lambda: app.polls >= polls + 2)
            assert app.db_error is None, app.db_error
            await still_usable(app, conn)
            again = await open_kind(app, pilot)
            assert again.info is not None and again.info.rows_read
            no_bad_words(app, again)
    assert app.return_code in (0, None)
    await no_transaction_left(conn)


async def timed_out_then_lands(
    console_dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open the kind screen on `console_dsn` (1 s timeout) with its row read held 2.5 s in the
    server: the screen says it took too long; the read quick again, the next one lands, and no
    session of this database is left in a transaction."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    slow = hold(monkeypatch, 2.5)
    app = JobtuiApp(console_dsn, "public", config=config())
    app.link.statement_timeout_s = 1.0
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot, complete=False)
        head = lambda: rendered(screen.query_one("#kind-head"))  # noqa: E731
        await until(pilot, lambda: "took longer than 1 s" in head())
        no_bad_words(app, screen)
        slow["s"] = 0.0
        await until(pilot, lambda: complete(screen, "export_crm") and "took longer" not in head())
        no_bad_words(app, screen)
        assert await app.link.run(lambda c, s: _count(c)) > 0
    stuck = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state LIKE 'idle in transaction%'"
    ).fetchone()
    assert stuck == (0,), stuck


async def test_the_statement_timeout_inside_the_pipeline_is_said_and_the_next_read_lands(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's statement timeout cuts the row read mid-pipeline."""
    await timed_out_then_lands(dsn, conn, monkeypatch)


async def test_the_backend_terminated_mid_pipeline_is_said_and_the_console_reconnects(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's backend is terminated while the row read is in the server: the screen
    says the database is unreachable (or the read failed), and the console reconnects."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    slow = hold(monkeypatch, 3.0)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await first_figures(app, pilot)
        await pilot.pause(0.3)
        slow["s"] = 0.0
        assert app.link.conn is not None
        conn.execute("SELECT pg_terminate_backend(%s)", (app.link.conn.info.backend_pid,))
        problems: list[str] = []
        connects = app.link.connects

        def settled() -> bool:
            if screen._problem is not None:
                problems.append(screen._problem)
            return (
                app.link.connects > connects and screen._problem is None and screen.info is not None
            )

        await until(pilot, settled, timeout=20)
        assert problems, "the failed read was never said"
        assert not any(w.lower() in p.lower() for p in problems for w in BAD), problems
        assert app.is_running
        await still_usable(app, conn)


async def test_first_figures_raising_leaves_no_transaction_open(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drawing the first figures raises (inside the row read's pipeline): whatever the app
    does with the error, the console's backend is not left idle in a transaction."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)
    calls = {"n": 0}

    async def probe(c: psycopg.AsyncConnection, schema: str, kind: str) -> None:
        def first(info: kindinfo.KindInfo) -> None:
            calls["n"] += 1
            raise RuntimeError("drawing failed")

        with pytest.raises(RuntimeError):
            await kindinfo.load_then_rows(c, schema, kind, "hour", first)
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        cur = await c.execute("SELECT 1")
        assert await cur.fetchone() == (1,)

    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one("#overview-pane KeyedTable", KeyedTable)
        await until(pilot, lambda: "export_crm" in table.keys)
        await app.link.run(probe, "export_crm")
        assert calls["n"] == 1
        await still_usable(app, conn)


async def test_behind_pgbouncer_the_kind_screen_opens_with_every_figure_again_and_again(
    dsn: str,
    conn: psycopg.Connection,
    pgbouncer_transaction: Bouncer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Transaction pooling: the pipelined reads (BEGIN, SET LOCALs and statements sent at
    once) open the screen with every figure, kind after kind, and the console stays usable."""
    history(conn)
    another_kind(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 0.3)
    app = JobtuiApp(pgbouncer_transaction.to(dsn), "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        for kind in ("export_crm", "sms.send") * 3:
            screen = await open_kind(app, pilot, kind=kind, complete=False)
            await until(pilot, functools.partial(complete, screen, kind))
            await pilot.pause(0.7)  # a refresh or two on the screen
            assert screen._problem is None, screen._problem
            no_bad_words(app, screen)
            await pilot.press("escape")
        polls = app.polls
        await until(pilot, lambda: app.polls >= polls + 2)
        assert app.db_error is None, app.db_error
        assert await app.link.run(lambda c, s: _count(c)) > 0


def complete(screen: KindScreen, kind: str) -> bool:
    return screen.info is not None and screen.info.kind == kind and screen.info.rows_read


async def _count(c: psycopg.AsyncConnection) -> int:
    cur = await c.execute("SELECT count(*) FROM jobs")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_behind_pgbouncer_a_row_read_cut_on_the_client_mid_pipeline_then_lands(
    dsn: str,
    conn: psycopg.Connection,
    pgbouncer_transaction: Bouncer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind a pooler the read is bounded on the client only: the row read, held in the
    server past it, is cancelled mid-pipeline by the console."""
    await timed_out_then_lands(pgbouncer_transaction.to(dsn), conn, monkeypatch)


@pytest.mark.parametrize("how", ["another kind", "quit"])
async def test_the_first_read_cut_mid_pipeline(
    how: str, dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read (the clock fetched inside its pipeline, then its statements) is held in
    the server and cut: by Enter on another kind, or by quitting. The console's session is
    left in no transaction, and (another kind) that kind's every figure comes."""
    history(conn)
    another_kind(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)
    slow = hold(monkeypatch, 1.5, rows=False)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot, complete=False)
        await pilot.pause(0.4)
        assert screen._drawn is None  # the first read is in the server
        if how == "quit":
            app.exit()
        else:
            slow["s"] = 0.0
            await pilot.press("escape")
            second = await open_kind(app, pilot, kind="sms.send", complete=False)
            await until(pilot, lambda: second.info is not None and second.info.rows_read)
            assert second.info is not None and second.info.kind == "sms.send"
            no_bad_words(app, second)
            await still_usable(app, conn)
    await no_transaction_left(conn)


async def test_span_toggled_again_and_again_while_reads_are_in_flight(
    dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`t` pressed 12 times, 30-170 ms apart, each cancelling the read in flight at another
    point of its two pipelines: the last span's every figure comes, the link is usable."""
    history(conn)
    monkeypatch.setattr(kind_screen, "MIN_RELOAD_S", 60.0)
    hold(monkeypatch, 0.3)
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_kind(app, pilot, complete=False)
        for i in range(12):
            await pilot.press("t")
            await pilot.pause(0.03 + 0.014 * i)
        span = screen.span
        await until(
            pilot,
            lambda: screen.info is not None and screen.info.span == span and screen.info.rows_read,
        )
        no_bad_words(app, screen)
        await still_usable(app, conn)
