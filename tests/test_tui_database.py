"""Issue 12 item 1 in the console: the Database tab at 80×24, driven by keys against real
sessions: a blocker terminated from the console, a role that may not, a worker whose LISTEN
connection was killed."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker
from psycopg import conninfo
from test_dbhealth import (
    audit_rows,
    churn,
    managed_db,  # noqa: F401 - the `managed` fixture
    open_blocker,
)
from test_tui_console import config, notifications, rendered, table, until
from test_tui_topology import seconds
from textual.app import App, ComposeResult
from topology import Owner, ReplicaDB, quick_registry

from jobtui import ops
from jobtui.enqueue import enqueue
from jobtui.tui.app import JobtuiApp
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.widgets.why import WhyView
from jobtui.why import explain

SMALL = (80, 24)


async def open_database_tab(app: JobtuiApp, pilot: Any) -> None:
    await pilot.press("6")
    tables = app.query_one("#database-tables")
    await until(pilot, lambda: app.active_tab == "database" and app.focused is tables)
    await until(pilot, lambda: len(table(app, "#database-tables").keys) > 0)


def blocker_text(app: JobtuiApp) -> str:
    return rendered(app.query_one("#database-blocker"))


def on_screen(app: JobtuiApp, selector: str) -> bool:
    region = app.query_one(selector).region
    return region.height > 0 and region.bottom <= SMALL[1] and region.right <= SMALL[0]


async def test_blocker_shown_then_terminated_from_the_console(
    dsn: str, conn: psycopg.Connection
) -> None:
    opened = time.monotonic()
    blocker = open_blocker(dsn)
    pid = blocker.info.backend_pid
    try:
        churn(conn, 120)
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: f"pid {pid}" in blocker_text(app))
            await pilot.pause(2.0)
            text = blocker_text(app)
            elapsed = time.monotonic() - opened
            lines = text.splitlines()
            match = re.fullmatch(
                rf"Holds back vacuum: pid {pid} · transaction (\S+) · idle in transaction",
                lines[0],
            )
            assert match, lines[0]
            # the age shown is the server's, at most a refresh (0.5 s) old, cut to whole seconds
            assert elapsed - 1.6 <= seconds(match.group(1)) <= elapsed, (match.group(1), elapsed)
            assert lines[1].endswith(" · C cancel · K terminate")
            # user · application · client (host:port over TCP, "local" over a socket) · query
            client = r"127\.0\.0\.1:\d+" if blocker.info.host.startswith("127.") else "local"
            assert re.fullmatch(
                rf"{re.escape(blocker.info.user)} · test-blocker · {client} · "
                r"query: SELECT txid_current\(\)",
                lines[2],
            ), lines[2]
            await until(
                pilot, lambda: "jobs: 120 dead tuples (50% of the table)" in blocker_text(app)
            )
            # the most important lines and both tables fit at 80×24
            for selector in ("#database-blocker", "#database-status", "#database-tables"):
                assert on_screen(app, selector), selector
            assert "jobs" in rendered(app.query_one("#database-tables"))
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("1")
            await until(pilot, lambda: f"terminated backend {pid}" in notifications(app))
            with pytest.raises(psycopg.OperationalError):
                blocker.execute("SELECT 1")
            rows = audit_rows(conn)
            assert len(rows) == 1 and rows[0][0] == "terminate_backend" and rows[0][1] == 1
            assert rows[0][2]["pid"] == pid and rows[0][2]["why"] == "holding back vacuum"
            await until(pilot, lambda: "Nothing holds back vacuum" in blocker_text(app))
    finally:
        blocker.close()


async def test_escape_at_the_confirmation_signals_nothing(
    dsn: str, conn: psycopg.Connection
) -> None:
    blocker = open_blocker(dsn)
    try:
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: "Holds back vacuum" in blocker_text(app))
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
            await pilot.pause(0.3)
        assert blocker.execute("SELECT 1").fetchone() == (1,)
        assert audit_rows(conn) == []
    finally:
        blocker.close()


async def test_a_role_that_may_not_is_told_so(managed: tuple[Owner, str]) -> None:
    owner, app_dsn = managed
    with psycopg.connect(owner.admin_dsn, autocommit=True) as admin:
        admin.execute(f'GRANT pg_read_all_stats TO "{owner.role}"')
    blocker = open_blocker(app_dsn, app="someone-else")
    pid = blocker.info.backend_pid
    try:
        app = JobtuiApp(owner.dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            await until(pilot, lambda: f"pid {pid}" in blocker_text(app))
            assert "C/K not allowed" in blocker_text(app)
            await pilot.press("K")
            await until(pilot, lambda: any("may not terminate" in n for n in notifications(app)))
            assert not isinstance(app.screen, ConfirmScreen)
            note = next(n for n in notifications(app) if "may not terminate" in n)
            assert note == (
                f"This role may not terminate pid {pid}: role {owner.role} is not superuser, "
                f"not a member of pg_signal_backend and not a member of role {owner.prefix}app, "
                "whose backend it is."
            )
        assert blocker.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(owner.dsn, autocommit=True) as conn:
            assert audit_rows(conn) == []
    finally:
        blocker.close()


async def test_a_worker_whose_listen_was_killed_shows_as_polling(
    dsn: str, conn: psycopg.Connection
) -> None:
    listener = f"jobtui_listen_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{listener}" LOGIN')
    try:
        listen_dsn = conninfo.make_conninfo(dsn, user=listener)
        async with running_worker(dsn, quick_registry(), listen_dsn=listen_dsn) as worker:
            app = JobtuiApp(dsn, "public", config=config())
            async with app.run_test(size=SMALL) as pilot:
                await open_database_tab(app, pilot)
                workers = table(app, "#database-workers")

                def row() -> str:
                    lines = rendered(workers).splitlines()
                    return next((line for line in lines if worker.id[:18] in line), "")

                await until(pilot, lambda: re.search(r"LISTEN\s+up", row()) is not None)
                conn.execute(f'ALTER ROLE "{listener}" NOLOGIN')
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    (listener,),
                )
                await until(pilot, lambda: "POLLING" in row() and "LOST" in row())
                assert "LISTEN connection lost" in row()
                warnings = rendered(app.query_one("#database-warnings"))
                assert "1 live worker(s) polling instead of LISTEN" in warnings
    finally:
        conn.execute(f'DROP ROLE IF EXISTS "{listener}"')


async def test_on_a_standby_replica_read_only_and_no_signals(replica_db: ReplicaDB) -> None:
    # A reader on the standby holding a snapshot open (no xid can be taken in recovery).
    reader = psycopg.connect(replica_db.standby_dsn, application_name="standby-reader")
    reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    reader.execute("SELECT count(*) FROM jobs")
    try:
        app = JobtuiApp(replica_db.standby_dsn, "public", config=config())
        async with app.run_test(size=SMALL) as pilot:
            await open_database_tab(app, pilot)
            status = app.query_one("#database-status")
            await until(pilot, lambda: "replica: read-only, lag " in rendered(status))
            await until(pilot, lambda: "standby-reader" in blocker_text(app))
            assert "read-only: no signals or drops" in blocker_text(app)
            footer = rendered(app.query_one("Footer"))
            assert "Terminate" not in footer and "Cancel query" not in footer
            await pilot.press("K")
            await pilot.pause(0.3)
            assert not isinstance(app.screen, ConfirmScreen)
        assert reader.execute("SELECT 1").fetchone() == (1,)
    finally:
        reader.close()


class WhyHost(App[None]):
    """The widget as the job detail mounts it."""

    def compose(self) -> ComposeResult:
        yield WhyView(id="why")


async def test_why_widget_renders_a_real_answer_inert(aconn: psycopg.AsyncConnection) -> None:
    kind = "evil\x1b[31m"
    job = await enqueue(aconn, kind, {})
    await ops.pause_kind(aconn, "public", kind, actor=ops.Actor("carol@ops"))
    answer = await explain(aconn, "public", job)
    assert answer is not None
    app = WhyHost()
    async with app.run_test(size=(100, 10)) as pilot:
        view = app.query_one(WhyView)
        view.show(answer)
        await pilot.pause()
        lines = rendered(view).splitlines()
        assert lines[0].strip() == "ready"
        assert lines[1].startswith("• its kind 'evil\\x1b[31m' is paused, by carol@ops since ")
        assert lines[2].strip() == "• no live worker handles kind 'evil\\x1b[31m'"
        assert lines[3].strip() == "• once that clears: number 1 in line for kind 'evil\\x1b[31m'"
        assert "\x1b" not in rendered(view)
        view.show(None)
        await pilot.pause()
        assert rendered(view).strip() == "no such job (it may have been pruned)"
