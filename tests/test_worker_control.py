"""Quiet, resume and stop a worker through the database (issue 11): the request reaches the
worker by NOTIFY, or at its next heartbeat without LISTEN; every request is one audit row."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from apps.fleet import Procs, ledger_fixture, procs_fixture  # noqa: F401 - fixtures
from apps.helpers import fetchall, fetchval, running_worker, settings, wait_until
from test_deep_links import jobtui

from jobtui import enqueue
from jobtui.ops import Actor, InvalidAction
from jobtui.registry import Registry
from jobtui.worker import Worker
from jobtui.worker_control import control_worker

ACTOR = Actor("ops@test")


def gated() -> tuple[Registry, asyncio.Event, list[int]]:
    """A registry whose `slow` jobs wait for the returned event; `ran` lists started ids."""
    reg = Registry()
    release = asyncio.Event()
    ran: list[int] = []

    @reg.handler("slow")
    async def slow(payload: Any) -> None:
        ran.append(payload["n"])
        await release.wait()

    return reg, release, ran


async def applied(aconn: psycopg.AsyncConnection, worker_id: str) -> Any:
    return await fetchval(aconn, "SELECT control_applied FROM workers WHERE id = %s", (worker_id,))


async def finished(aconn: psycopg.AsyncConnection, job_id: int) -> bool:
    return bool(
        await fetchval(aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,))
    )


async def quiet_then_resume(
    dsn: str, aconn: psycopg.AsyncConnection, *, beats: bool, **settings: Any
) -> None:
    """Quiet: the running job finishes, a new one is not claimed; resume: it is."""
    reg, release, ran = gated()
    first = await enqueue(aconn, "slow", {"n": 1})
    async with running_worker(dsn, reg, **settings) as worker:
        await wait_until(lambda: ran == [1], what="the first job to start")
        outcome = await control_worker(aconn, "public", worker.id, "quiet", actor=ACTOR)
        assert outcome.changed and not outcome.stale
        await wait_until(
            lambda: applied(aconn, worker.id), timeout=5, what="the worker to say it is quiet"
        )
        assert await applied(aconn, worker.id) == "quiet"
        second = await enqueue(aconn, "slow", {"n": 2})
        release.set()
        await wait_until(lambda: finished(aconn, first), what="the running job to finish")
        await asyncio.sleep(1.0)  # ten poll intervals: a claiming worker would have taken it
        assert ran == [1]
        assert await fetchval(aconn, "SELECT attempts FROM jobs WHERE id = %s", (second,)) == 0
        if beats:  # still alive and heartbeating while quiet
            beat = "SELECT heartbeat_at FROM workers WHERE id = %s"
            before = await fetchval(aconn, beat, (worker.id,))
            await asyncio.sleep(0.5)
            assert await fetchval(aconn, beat, (worker.id,)) > before
        outcome = await control_worker(aconn, "public", worker.id, "resume", actor=ACTOR)
        assert outcome.changed
        await wait_until(lambda: finished(aconn, second), timeout=5, what="a claim after resume")
        assert ran == [1, 2]
        assert await applied(aconn, worker.id) is None
        worker_id = worker.id
    audit = await fetchall(
        aconn, "SELECT os_user, action, filter, count FROM audit_log ORDER BY id"
    )
    assert audit == [
        ("ops@test", "quiet_worker", {"worker": worker_id}, 1),
        ("ops@test", "resume_worker", {"worker": worker_id}, 1),
    ]


async def test_quiet_by_notify_stops_claiming_and_resume_claims_again(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    # A heartbeat every 30 s: only the NOTIFY can deliver the request within the waits above.
    await quiet_then_resume(
        dsn, aconn, beats=False, heartbeat_interval=30.0, heartbeat_timeout=90.0
    )


async def test_quiet_without_listen_is_seen_at_the_next_heartbeat(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    # LISTEN cannot connect (nothing listens on port 1): the worker polls, hears no NOTIFY.
    await quiet_then_resume(
        dsn, aconn, beats=True, listen_dsn="postgresql://root@127.0.0.1:1/none?connect_timeout=1"
    )


async def test_bad_requests_are_refused_and_change_nothing(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency) VALUES ('h:1:a', 'h', 1, '{k}', 1)"
    )
    with pytest.raises(InvalidAction, match="no worker with id 'nope'"):
        await control_worker(aconn, "public", "nope", "quiet", actor=ACTOR)
    with pytest.raises(InvalidAction, match="unknown worker action"):
        await control_worker(aconn, "public", "h:1:a", "pause", actor=ACTOR)
    assert (await control_worker(aconn, "public", "h:1:a", "stop", actor=ACTOR)).changed
    with pytest.raises(InvalidAction, match="a stop cannot be resumed"):
        await control_worker(aconn, "public", "h:1:a", "resume", actor=ACTOR)
    again = await control_worker(aconn, "public", "h:1:a", "stop", actor=ACTOR)
    assert not again.changed and "already" in again.text()
    rows = await fetchall(aconn, "SELECT control, control_by FROM workers")
    assert rows == [("stop", "ops@test")]
    audit = await fetchall(aconn, "SELECT action, count FROM audit_log ORDER BY id")
    assert audit == [("stop_worker", 1), ("stop_worker", 0)]


@pytest.mark.slow
async def test_stop_from_the_cli_drains_and_ends_the_worker_process(
    dsn: str, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    job = await enqueue(aconn, "sleepy", {"sleeps": [1.0]})
    proc = procs.start(shutdown_grace=10.0)
    await wait_until(
        lambda: fetchval(aconn, "SELECT 1 FROM ledger WHERE job_id = %s", (job,)),
        timeout=15,
        what="the job to start",
    )
    worker_id = await fetchval(aconn, "SELECT id FROM workers")
    done = await asyncio.to_thread(jobtui, dsn, "workers", "stop", worker_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"worker {worker_id} asked to stop"
    assert await asyncio.to_thread(proc.wait, 15) == 0, procs.logs()
    assert await finished(aconn, job)  # the running job finished within the grace
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
    logs = procs.logs()
    assert "event=stop_asked" in logs and "event=stopped" in logs
    audit = await fetchall(aconn, "SELECT action, filter, count FROM audit_log")
    assert audit == [("stop_worker", {"worker": worker_id}, 1)]


def test_cli_unknown_worker_is_one_line_and_non_zero(dsn: str) -> None:
    done = jobtui(dsn, "workers", "quiet", "no-such-worker")
    assert done.returncode != 0
    assert done.stderr.strip() == (
        "jobtui: error: no worker with id 'no-such-worker' (see `jobtui workers list`)"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""


async def test_console_asks_then_quiets_the_worker_and_audits_it(
    dsn: str, conn: psycopg.Connection
) -> None:
    from test_tui_console import config, notifications, until

    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.screens.confirm import ConfirmScreen
    from jobtui.tui.worker_actions import WorkerControlAsked

    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency) VALUES ('h:1:a', 'h', 1, '{k}', 1)"
    )
    app = JobtuiApp(dsn, "public", config=config())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.polls > 0)
        app.post_message(WorkerControlAsked("h:1:a", "stop"))
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")  # cancelled: nothing written
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        app.post_message(WorkerControlAsked("h:1:a", "quiet"))
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        box = app.screen.query_one("#confirm-body")
        assert "Quiet worker h:1:a" in str(box.render())
        assert "stops claiming" in str(box.render())
        await pilot.press("1")
        await until(pilot, lambda: "Worker h:1:a quieted." in notifications(app))
    assert conn.execute("SELECT control, control_by FROM workers").fetchall() == [
        ("quiet", Actor.current().os_user)
    ]
    assert conn.execute("SELECT action, count FROM audit_log").fetchall() == [("quiet_worker", 1)]


async def test_stop_past_the_grace_releases_the_running_job_and_ends_the_worker(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg, _release, ran = gated()  # never released: the handler outlives the grace
    job = await enqueue(aconn, "slow", {"n": 1})
    worker = Worker(dsn, "public", reg, settings(shutdown_grace=0.5))
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: ran == [1], what="the job to start")
    await control_worker(aconn, "public", worker.id, "stop", actor=ACTOR)
    await asyncio.wait_for(task, 15)  # the worker's run() returns: the process would exit
    row = await fetchall(
        aconn, "SELECT attempts, locked_by, finished_at FROM jobs WHERE id = %s", (job,)
    )
    assert row == [(0, None, None)]  # given back, the attempt not counted: it runs again
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
