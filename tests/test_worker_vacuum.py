"""The housekeeper vacuums `jobs` where autovacuum will not (jobtui/worker/housekeeper.py).

Without a VACUUM every claimed and finished row leaves its waiting entries in the claim
indexes, and every claim walks them: a drain slows down as it goes. The tables here turn
autovacuum off for `jobs` with the table's own setting, so the tests mean the same on a server
whose autovacuum is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchval, running_worker, wait_until

import jobtui.worker.housekeeper as housekeeper_module
from jobtui.registry import Registry
from jobtui.sql import queries
from jobtui.worker import Worker

DUE = queries("public").worker_jobs_vacuum_due
DEAD = "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
VACUUMS = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
ANALYZES = "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass"
VACUUMING = "SELECT 1 FROM pg_stat_progress_vacuum WHERE relid = 'jobs'::regclass"


def _dead_rows(conn: psycopg.Connection, n: int) -> None:
    """`n` finished jobs, each updated once: n dead row versions (and their index entries)."""
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'noop', '{}' FROM generate_series(1, %s)", (n,)
    )
    conn.execute("ANALYZE jobs")
    conn.execute("UPDATE jobs SET finished_at = now()")


def _unvacuumed(conn: psycopg.Connection, n: int = 3000, *, autovacuum: bool = False) -> None:
    """`n` dead row versions in `jobs`, counted by the statistics; autovacuum off for the
    table (its own setting), or on."""
    setting = "true" if autovacuum else "false"
    conn.execute(f"ALTER TABLE jobs SET (autovacuum_enabled = {setting})")
    _dead_rows(conn, n)
    _dead_counted(conn, n)


@pytest.fixture
def low_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's VACUUM due from 1,000 dead row versions, so a test needs few."""
    monkeypatch.setattr(housekeeper_module, "VACUUM_MIN_DEAD", 1000)


def _due(conn: psycopg.Connection, min_dead: int, pause_s: float = 0.0) -> bool:
    row = conn.execute(
        DUE, {"tables": ["jobs"], "min_dead": min_dead, "pause_s": pause_s}
    ).fetchone()
    assert row is not None
    return bool(row[0])


def _dead_counted(conn: psycopg.Connection, at_least: int) -> None:
    """Wait for the statistics to show the dead versions (a backend flushes them at most once a
    second)."""
    deadline = time.monotonic() + 15
    while (conn.execute(DEAD).fetchone() or (0,))[0] < at_least:
        assert time.monotonic() < deadline, "n_dead_tup never reached the rows updated"
        time.sleep(0.1)


def test_due_only_above_autovacuums_trigger_and_the_floor_and_when_autovacuum_is_off(
    conn: psycopg.Connection,
) -> None:
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    assert not _due(conn, 100)  # an empty table: nothing dead
    _dead_rows(conn, 3000)
    _dead_counted(conn, 3000)
    assert _due(conn, 100)
    assert not _due(conn, 10_000)  # below the floor
    # autovacuum's own trigger, raised by the table's scale factor, above the dead versions
    conn.execute("ALTER TABLE jobs SET (autovacuum_vacuum_threshold = 100000)")
    assert not _due(conn, 100)
    conn.execute("ALTER TABLE jobs RESET (autovacuum_vacuum_threshold)")
    assert _due(conn, 100)
    # autovacuum on for the table: it is autovacuum's job, wherever the server lets it run
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = true)")
    server_on = conn.execute("SELECT current_setting('autovacuum')::bool").fetchone()
    assert server_on is not None
    assert _due(conn, 100) is (not server_on[0])
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    conn.execute("VACUUM jobs")
    _dead_gone(conn)
    assert not _due(conn, 100)
    # dead again: due, unless the last VACUUM ended less than the pause ago
    conn.execute("UPDATE jobs SET finished_at = now()")
    _dead_counted(conn, 3000)
    assert _due(conn, 100, pause_s=0.0)
    assert not _due(conn, 100, pause_s=3600.0)


def _slow_vacuums(conn: psycopg.Connection) -> None:
    """20,000 dead row versions in `jobs`, autovacuum off for it, and every later session of
    this database's VACUUM sleeping at each page: one that runs until cancelled."""
    _unvacuumed(conn, 20_000)
    db = conn.execute("SELECT current_database()").fetchone()
    assert db is not None
    for setting in ("vacuum_cost_delay = '100ms'", "vacuum_cost_limit = 1"):
        conn.execute(f'ALTER DATABASE "{db[0]}" SET {setting}')


def _worker(dsn: str, **settings: Any) -> contextlib.AbstractAsyncContextManager[Worker]:
    """A worker of one no-op handler, its housekeeping turns quick (every 0.2 s)."""
    reg = Registry()

    @reg.handler("noop")
    async def noop(payload: Any) -> None:
        return None

    return running_worker(dsn, reg, heartbeat_interval=0.2, heartbeat_timeout=5.0, **settings)


def _dead_gone(conn: psycopg.Connection) -> None:
    deadline = time.monotonic() + 15
    while (conn.execute(DEAD).fetchone() or (0,))[0] > 0:
        assert time.monotonic() < deadline, "n_dead_tup stayed above 0 after VACUUM"
        time.sleep(0.1)


def test_not_due_for_a_role_that_may_not_vacuum_the_table(conn: psycopg.Connection) -> None:
    _unvacuumed(conn)
    role = "jobtui_vacuum_test_reader"
    conn.execute(
        f"DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {role}")
            assert not _due(conn, 100)  # PostgreSQL would only warn and skip
        assert _due(conn, 100)
    finally:
        conn.execute(f"DROP ROLE IF EXISTS {role}")


async def test_the_worker_vacuums_jobs_when_autovacuum_is_off_and_closes_its_connection(
    dsn: str,
    conn: psycopg.Connection,
    aconn: psycopg.AsyncConnection,
    low_floor: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _unvacuumed(conn)
    before = await fetchval(aconn, VACUUMS)
    caplog.set_level("INFO", logger="jobtui.worker")
    async with _worker(dsn):
        await wait_until(
            lambda: fetchval(aconn, VACUUMS + " AND vacuum_count > %s", (before,)),
            what="the worker's VACUUM of jobs",
        )

        async def connection_closed() -> bool:
            n = await fetchval(
                aconn,
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name LIKE 'jobtui worker (vacuum%%'",
            )
            return n == 0

        await wait_until(connection_closed, what="the vacuum connection closed")
    assert "event=vacuumed table=jobs" in caplog.text


async def test_the_worker_leaves_jobs_to_autovacuum_where_it_runs(
    dsn: str,
    conn: psycopg.Connection,
    aconn: psycopg.AsyncConnection,
    low_floor: None,
) -> None:
    server_on = conn.execute("SELECT current_setting('autovacuum')::bool").fetchone()
    if not (server_on and server_on[0]):
        pytest.skip("the server's autovacuum is off: the worker is right to vacuum")
    _unvacuumed(conn, autovacuum=True)
    before = await fetchval(aconn, VACUUMS)
    async with _worker(dsn):
        await asyncio.sleep(2.0)  # ten housekeeping turns
    assert await fetchval(aconn, VACUUMS) == before


async def test_a_vacuum_skipped_for_a_lock_is_not_logged_as_done_nor_retried_every_turn(
    dsn: str,
    conn: psycopg.Connection,
    low_floor: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VACUUM (SKIP_LOCKED) only warns when something holds the table (another VACUUM, an
    ANALYZE, CREATE INDEX CONCURRENTLY): no row of 'vacuumed', and no new connection and
    VACUUM every housekeeping turn while it lasts."""
    _unvacuumed(conn)
    caplog.set_level("INFO", logger="jobtui.worker")
    with psycopg.connect(dsn) as holder:
        holder.execute("LOCK jobs IN SHARE UPDATE EXCLUSIVE MODE")  # as a VACUUM holds it
        async with _worker(dsn):
            await asyncio.sleep(2.0)  # ten housekeeping turns
        holder.rollback()
    assert "event=vacuumed" not in caplog.text
    assert caplog.text.count("event=vacuum_skipped") == 1


def test_not_due_while_a_vacuum_of_jobs_runs(dsn: str, conn: psycopg.Connection) -> None:
    """Another worker's VACUUM (or autovacuum's anti-wraparound one) is under way: a second
    would only be skipped for the lock."""
    _unvacuumed(conn)
    assert _due(conn, 100)
    with psycopg.connect(dsn, autocommit=True) as slow:
        slow.execute("SET vacuum_cost_delay = '100ms'")
        slow.execute("SET vacuum_cost_limit = 1")  # a VACUUM that sleeps at every page
        pid = slow.info.backend_pid

        def vacuum() -> None:
            with contextlib.suppress(psycopg.errors.QueryCanceled):
                slow.execute("VACUUM jobs")

        thread = threading.Thread(target=vacuum)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while not conn.execute(
                "SELECT 1 FROM pg_stat_progress_vacuum WHERE pid = %s", (pid,)
            ).fetchone():
                assert time.monotonic() < deadline, "the slow VACUUM never started"
                time.sleep(0.05)
            assert not _due(conn, 100)
        finally:
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
            thread.join()


async def test_the_workers_vacuum_yields_to_a_lock_that_would_stop_the_queue(
    dsn: str,
    conn: psycopg.Connection,
    aconn: psycopg.AsyncConnection,
    low_floor: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An ALTER TABLE (a migration, an operator's) waiting behind the worker's VACUUM holds up
    every later claim and INSERT in the lock queue; PostgreSQL cancels autovacuum for it, and
    the worker cancels its own VACUUM the same way. The housekeeping link's own statements on
    `jobs` queue behind the ALTER too (for as long as housekeeping_lock_timeout; behind
    PgBouncer, where it is not set, until the ALTER gives up), so the watch is not made there."""
    _slow_vacuums(conn)
    caplog.set_level("INFO", logger="jobtui.worker")
    async with _worker(dsn, housekeeping_lock_timeout=30.0):
        await wait_until(lambda: fetchval(aconn, VACUUMING), what="the worker's VACUUM of jobs")
        t0 = time.monotonic()
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as ddl:
            await ddl.execute("SET lock_timeout = '8s'")
            await ddl.execute("ALTER TABLE jobs ADD COLUMN yielded int")
        assert time.monotonic() - t0 < 5.0
    assert "event=vacuum_yielded" in caplog.text


async def test_an_analyze_wanted_during_the_workers_vacuum_waits_for_it_to_end(
    dsn: str,
    conn: psycopg.Connection,
    aconn: psycopg.AsyncConnection,
    low_floor: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ANALYZE wants the lock the VACUUM holds: asked for meanwhile (a slow claim), it would
    only wait out the housekeeping lock timeout and be logged as skipped."""
    _slow_vacuums(conn)
    caplog.set_level("INFO", logger="jobtui.worker")
    async with _worker(dsn) as worker:
        await wait_until(lambda: fetchval(aconn, VACUUMING), what="the worker's VACUUM of jobs")
        assert worker._housekeeper is not None
        worker._housekeeper.want_analyze()
        await asyncio.sleep(2.0)
        await aconn.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_progress_vacuum"
            " WHERE relid = 'jobs'::regclass"
        )
        await wait_until(
            lambda: fetchval(aconn, ANALYZES + " AND analyze_count > 0"), what="the ANALYZE"
        )
    assert "chore=analyze" not in caplog.text
