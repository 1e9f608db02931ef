"""The worker and the console survive a real PostgreSQL restart, and lose nothing.

These tests restart the server, so they run on an embedded server of their own (never the
session's shared one). Killed backends (`pg_terminate_backend`) are covered for the worker by
test_worker.py::test_reconnects_when_its_connections_are_killed_and_loses_nothing and for the
console by test_tui_console.py::test_db_outage_banner_then_recovery.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, fetchval, running_worker, wait_until
from psycopg import conninfo

from jobtui.embedded import EmbeddedServer, start_embedded
from jobtui.enqueue import enqueue_many
from jobtui.registry import Registry
from jobtui.schema import migrate

DOWN_S = 1.5


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    """An embedded server these tests may restart. As root the server runs as `pgserver`,
    so its directory must be traversable (pytest's tmp_path parents are not)."""
    root = tempfile.mkdtemp(prefix="jobtui-restart-")
    os.chmod(root, 0o755)
    srv = start_embedded(Path(root) / "data")
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_dsn(server: EmbeddedServer) -> Iterator[str]:
    """A fresh, migrated database on the restartable server."""
    name = f"jobtui_r_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(server.dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, "public")
    try:
        yield dsn
    finally:
        deadline = time.monotonic() + 30
        while True:  # the server may still be coming back from a failed test's restart
            try:
                with psycopg.connect(server.dsn, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


async def connect(dsn: str) -> psycopg.AsyncConnection:
    """A fresh connection, retried while the server comes back."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_the_worker_rides_out_a_postgresql_restart_and_loses_nothing(
    server: EmbeddedServer, own_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    reg = Registry()
    runs: dict[int, int] = {}

    @reg.handler("k")
    async def k(payload: Any) -> None:
        await asyncio.sleep(0.01)
        runs[payload["n"]] = runs.get(payload["n"], 0) + 1

    caplog.set_level(logging.INFO, logger="jobtui.worker")
    conn = await connect(own_dsn)
    await enqueue_many(conn, [{"kind": "k", "payload": {"n": i}} for i in range(600)])
    await conn.close()
    async with running_worker(own_dsn, reg, concurrency=5) as worker:
        await wait_until(lambda: len(runs) >= 50, what="jobs flowing")
        before = len(runs)
        t0 = time.monotonic()
        await asyncio.to_thread(server.restart, down_for=DOWN_S)
        assert time.monotonic() - t0 >= DOWN_S
        assert len(runs) < 600, "the restart happened while jobs were flowing"
        conn = await connect(own_dsn)
        try:
            # Jobs enqueued after the restart are picked up too (LISTEN re-established).
            await enqueue_many(conn, [{"kind": "k", "payload": {"n": 600 + i}} for i in range(50)])
            await wait_until(
                lambda: fetchval(
                    conn, "SELECT count(*) = 650 FROM jobs WHERE finished_at IS NOT NULL"
                ),
                timeout=30,
                what="all 650 jobs recorded done",
            )
            beat = await fetchval(
                conn,
                "SELECT now() - heartbeat_at < interval '2s' FROM workers WHERE id = %s",
                (worker.id,),
            )
            assert beat, "the heartbeat resumed after the restart"
            assert await fetchval(conn, "SELECT count(*) FROM dead_letters") == 0
            attempts = await fetchall(conn, "SELECT DISTINCT attempts FROM jobs")
        finally:
            await conn.close()
    assert before >= 50
    assert sorted(runs) == list(range(650))
    assert set(runs.values()) == {1}, "no job ran twice"
    assert attempts == [(1,)]
    assert "event=reconnected" in caplog.text


async def test_jobs_that_finish_while_the_server_is_down_are_recorded_once_it_returns(
    server: EmbeddedServer, own_dsn: str
) -> None:
    """Jobs the worker held across the outage finish while the server is down: their outcomes
    are kept and written after it comes back (the rows stay locked by the worker meanwhile),
    and nothing is run twice."""
    reg = Registry()
    started: set[int] = set()
    finished: list[int] = []
    go = asyncio.Event()

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.add(payload["n"])
        await go.wait()
        finished.append(payload["n"])

    conn = await connect(own_dsn)
    await enqueue_many(conn, [{"kind": "long", "payload": {"n": i}} for i in range(4)])
    await conn.close()
    async with running_worker(own_dsn, reg, concurrency=4) as worker:
        await wait_until(lambda: len(started) == 4, what="4 jobs running")
        restart = asyncio.create_task(asyncio.to_thread(server.restart, down_for=DOWN_S))

        async def down() -> bool:
            try:
                c = await psycopg.AsyncConnection.connect(own_dsn, connect_timeout=1)
            except psycopg.OperationalError:
                return True
            await c.close()
            return False

        await wait_until(down, timeout=20, interval=0.05, what="the server to be down")
        go.set()
        await wait_until(lambda: len(finished) == 4, what="handlers to finish")
        assert not restart.done(), "the handlers finished while the server was down"
        await restart
        conn = await connect(own_dsn)
        try:
            await wait_until(
                lambda: fetchval(
                    conn, "SELECT count(*) = 4 FROM jobs WHERE finished_at IS NOT NULL"
                ),
                timeout=30,
                what="4 jobs recorded done",
            )
            rows = await fetchall(conn, "SELECT DISTINCT attempts, locked_by FROM jobs")
        finally:
            await conn.close()
    assert sorted(finished) == [0, 1, 2, 3]
    assert rows == [(1, worker.id)]


async def test_the_console_shows_its_banner_during_a_restart_and_recovers(
    server: EmbeddedServer, own_dsn: str
) -> None:
    from textual.widgets import Static

    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    with psycopg.connect(own_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")

    async def until(pilot: Any, cond: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}: polls={app.polls} db_error={app.db_error!r}"
                )
            await pilot.pause(0.05)

    app = JobtuiApp(own_dsn, "public", config=ConsoleConfig(refresh_s=0.3))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.polls >= 2, 10, "first polls")
        banner = app.query_one("#banner", Static)
        assert not banner.display
        restart = asyncio.create_task(asyncio.to_thread(server.restart, down_for=3.0))
        await until(pilot, lambda: banner.display, 10, "the banner")
        shown = str(banner.render())
        assert "DATABASE UNREACHABLE" in shown
        assert "retrying in" in shown and "data shown is from" in shown
        await restart
        await until(pilot, lambda: not banner.display, 30, "recovery")
        assert app.db_error is None
        polls = app.polls
        await until(pilot, lambda: app.polls > polls + 1, 10, "polls after recovery")
        notes = [n.message for n in app._notifications]
        assert "Database reachable again." in notes
