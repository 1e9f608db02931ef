"""The Workers tab quiets, resumes and stops a worker (issue 11), and opens a kind's screen.

The console drives a real worker running in this event loop against a real database: `Z`
asks (a confirmation), the row says "quiet asked" until the worker has seen the request and
"quiet" once it has, and the worker then really claims nothing; `Z` again resumes it, `X`
stops it and its `run()` returns. Read-only consoles offer neither key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from apps.helpers import fetchall, fetchval, settings, wait_until
from test_tui_console import config, goto, rendered, table, until
from test_tui_layout import screen_lines
from textual.widgets import Footer

from jobtui import enqueue
from jobtui.ops import Actor
from jobtui.registry import Registry
from jobtui.tui.app import JobtuiApp
from jobtui.tui.panes.workers import WorkersPane
from jobtui.tui.screens.confirm import ConfirmScreen
from jobtui.tui.screens.kind import KindScreen
from jobtui.worker import Worker

# No LISTEN (nothing listens on port 1) and a heartbeat every 4 s: the worker sees a request
# only at its next heartbeat, so the console can be seen saying "asked" before it does.
NO_LISTEN = "postgresql://root@127.0.0.1:1/none?connect_timeout=1"
BEAT_S = 4.0


def state(app: JobtuiApp, worker_id: str) -> str:
    return table(app, "#workers-table").get_cell(worker_id, "control").plain


def footer(app: JobtuiApp) -> str:
    return rendered(app.query_one(Footer))


async def after_a_heartbeat(aconn: psycopg.AsyncConnection, worker_id: str) -> None:
    """Return just after the worker's next heartbeat: the one after is BEAT_S away."""
    sql = "SELECT heartbeat_at FROM workers WHERE id = %s"
    before = await fetchval(aconn, sql, (worker_id,))

    async def beat() -> bool:
        return bool(await fetchval(aconn, sql, (worker_id,)) != before)

    await wait_until(beat, timeout=BEAT_S * 2, interval=0.01, what="a heartbeat")


async def confirm(app: JobtuiApp, pilot: Any, key: str, title: str) -> str:
    """Press `key`, check the confirmation's title, accept it; the dialog's body text."""
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
    dialog = app.screen
    body = str(dialog.query_one("#confirm-body").render())
    assert dialog._title == title  # type: ignore[attr-defined]
    await pilot.press("1")
    await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
    return body


async def test_quiet_resume_and_stop_a_running_worker_from_the_workers_tab(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    ran: list[int] = []

    @reg.handler("work")
    async def work(payload: Any) -> None:
        ran.append(payload["n"])

    worker = Worker(
        dsn,
        "public",
        reg,
        settings(heartbeat_interval=BEAT_S, heartbeat_timeout=60.0, listen_dsn=NO_LISTEN),
    )
    task = asyncio.create_task(worker.run())
    try:
        await enqueue(aconn, "work", {"n": 1})
        await wait_until(lambda: ran == [1], what="the worker to claim while nothing is asked")
        app = JobtuiApp(dsn, "public", config=config())
        async with app.run_test(size=(80, 24)) as pilot:
            await goto(app, pilot, "4")
            workers = table(app, "#workers-table")
            await until(pilot, lambda: workers.keys == [worker.id])
            assert state(app, worker.id) == ""
            assert "Quiet/resume" in footer(app) and "Stop worker" in footer(app)

            await after_a_heartbeat(aconn, worker.id)
            body = await confirm(app, pilot, "Z", "Quiet worker?")
            assert f"Quiet worker {worker.id}" in body and "stops claiming" in body
            await until(pilot, lambda: state(app, worker.id) == "quiet asked")
            cell = workers.get_cell(worker.id, "control")
            assert str(cell.style) == "bold"  # a word in bold, no colour
            assert "quiet asked" in "\n".join(screen_lines(app))  # on screen at 80×24
            await until(pilot, lambda: state(app, worker.id) == "quiet", timeout=BEAT_S * 3)
            assert "1 quiet" in rendered(app.query_one("#workers-info"))
            assert await fetchval(aconn, "SELECT control_applied FROM workers") == "quiet"

            second = await enqueue(aconn, "work", {"n": 2})
            await pilot.pause(1.0)  # ten poll intervals: a claiming worker would have run it
            assert ran == [1]
            row = await fetchall(
                aconn,
                "SELECT attempts, locked_by, finished_at FROM jobs WHERE id = %s",
                (second,),
            )
            assert row == [(0, None, None)]  # still ready

            await confirm(app, pilot, "Z", "Resume worker?")  # Z on a quiet worker resumes
            await wait_until(lambda: ran == [1, 2], timeout=BEAT_S * 3, what="a claim again")
            await until(pilot, lambda: state(app, worker.id) == "", timeout=BEAT_S * 3)

            body = await confirm(app, pilot, "X", "Stop worker?")
            assert f"Stop worker {worker.id}" in body and "exits" in body
            await asyncio.wait_for(asyncio.shield(task), BEAT_S * 4)  # run() returned
            await until(pilot, lambda: worker.id not in workers.keys)
        task.result()  # ended without an error
        assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
        audit = await fetchall(aconn, "SELECT os_user, action, filter, count FROM audit_log")
        me = Actor.current().os_user
        assert audit == [
            (me, "quiet_worker", {"worker": worker.id}, 1),
            (me, "resume_worker", {"worker": worker.id}, 1),
            (me, "stop_worker", {"worker": worker.id}, 1),
        ]
    finally:
        if not task.done():
            worker.request_stop()
            await asyncio.wait_for(task, 20)


async def test_each_request_and_what_the_worker_did_reads_in_words(
    dsn: str, conn: psycopg.Connection
) -> None:
    # Rows as jobtui.worker_control and the workers write them (migration 0018).
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at, control,"
        " control_applied) VALUES"
        " ('w:1:plain', 'h', 1, '{k}', 1, now(), NULL, NULL),"
        " ('w:2:qa', 'h', 2, '{k}', 1, now(), 'quiet', NULL),"
        " ('w:3:q', 'h', 3, '{k}', 1, now(), 'quiet', 'quiet'),"
        " ('w:4:ra', 'h', 4, '{k}', 1, now(), NULL, 'quiet'),"
        " ('w:5:sa', 'h', 5, '{k}', 1, now(), 'stop', 'quiet'),"
        " ('w:6:s', 'h', 6, '{k}', 1, now(), 'stop', 'stop')"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "4")
        workers = table(app, "#workers-table")
        await until(pilot, lambda: len(workers.keys) == 6)
        words = {key: state(app, key) for key in workers.keys}
        assert words == {
            "w:1:plain": "",
            "w:2:qa": "quiet asked",
            "w:3:q": "quiet",
            "w:4:ra": "resume asked",
            "w:5:sa": "stop asked",
            "w:6:s": "stopping",
        }
        screen = "\n".join(screen_lines(app))
        assert all(w in screen for w in words.values())
        assert all(len(line) <= 80 for line in screen_lines(app))
        info = rendered(app.query_one("#workers-info"))
        assert "1 quiet asked · 1 quiet · 1 resume asked · 1 stop asked · 1 stopping" in info
        pane = app.query_one(WorkersPane)
        offered = {}
        for row, key in enumerate(workers.keys):
            workers.move_cursor(row=row)
            await pilot.pause()
            offered[key] = (
                pane.check_action("quiet_worker", ()),
                pane.check_action("stop_worker", ()),
            )
        # Asked to stop: nothing more to offer (a stop cannot be undone); None is greyed out.
        assert offered == {
            "w:1:plain": (True, True),
            "w:2:qa": (True, True),
            "w:3:q": (True, True),
            "w:4:ra": (True, True),
            "w:5:sa": (None, None),
            "w:6:s": (None, None),
        }
        await pilot.press("Z", "X")  # on w:6:s
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)


async def test_read_only_console_offers_no_worker_keys(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('w:1:a', 'h', 1, '{k}', 1, now())"
    )
    app = JobtuiApp(dsn, "public", config=config(read_only=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "4")
        await until(pilot, lambda: table(app, "#workers-table").keys == ["w:1:a"])
        await pilot.pause(0.2)
        assert "Quiet/resume" not in footer(app) and "Stop worker" not in footer(app)
        await pilot.press("Z", "X")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
        palette = [title for title, _help, _run in app.palette_entries()]
        assert not any("worker" in title.lower() for title in palette)
    assert conn.execute("SELECT control FROM workers").fetchall() == [(None,)]
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)


async def test_enter_on_a_kind_opens_the_kind_screen(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('w:1:a', 'h', 1, '{email.send}', 1, now())"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await goto(app, pilot, "4")
        kinds = table(app, "#worker-kinds")
        await until(pilot, lambda: kinds.keys == ["email.send"])
        # Each table's keys while it has the focus: worker keys here, kind keys there.
        await pilot.pause(0.2)
        assert "Quiet/resume" in footer(app) and "Pause kind" not in footer(app)
        await pilot.press("enter")  # on a worker: nothing to open
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 1
        await pilot.press("tab")
        await until(pilot, lambda: app.focused is kinds)
        await pilot.pause(0.2)
        assert "Pause kind" in footer(app) and "Quiet/resume" not in footer(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, KindScreen))
        assert app.screen.kind == "email.send"  # type: ignore[attr-defined]
