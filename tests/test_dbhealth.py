"""Issue 12 item 1, the engine: `jobtui.dbhealth.collect` and `jobtui.backends`, against real
sessions of a real PostgreSQL (open transactions, a real worker, a non-superuser role)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until
from psycopg import conninfo
from topology import Owner, ReplicaDB, quick_registry

from jobtui import backends
from jobtui.dbhealth import (
    JOBTUI_TABLES,
    DbHealth,
    as_json,
    collect,
    prometheus_lines,
    vacuum_overdue,
)
from jobtui.enqueue import JobSpec, enqueue_many
from jobtui.schema import migrate


async def reading(dsn: str) -> DbHealth:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await collect(conn, "public")


def open_blocker(dsn: str, app: str = "test-blocker") -> psycopg.Connection:
    """A session with an open transaction that has written (it holds an xid), left idle."""
    blocker = psycopg.connect(dsn, application_name=app)
    blocker.execute("SELECT txid_current()")
    return blocker


def churn(conn: psycopg.Connection, n: int) -> None:
    """n dead tuples in jobs: insert n jobs and update each once; statistics flushed."""
    enqueue_many(conn, [JobSpec("k", {"i": i}) for i in range(n)])
    conn.execute("UPDATE jobs SET priority = priority + 1")
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # idle in between: the flush happens


def audit_rows(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT action, count, filter, os_user FROM audit_log ORDER BY id"
    ).fetchall()


async def test_open_transaction_is_the_blocker_with_its_age_and_effect(
    dsn: str, conn: psycopg.Connection
) -> None:
    started = time.monotonic()
    blocker = open_blocker(dsn)
    try:
        churn(conn, 300)  # written after the blocker's snapshot: vacuum may not remove them
        conn.execute("VACUUM jobs")
        await asyncio.sleep(1.2)
        before = time.monotonic()
        h = await wait_until(lambda: _with_dead(dsn, 300), what="300 dead tuples in the statistics")
        elapsed = time.monotonic() - started
        b = h.blocker
        assert b is not None
        assert b.pid == blocker.info.backend_pid
        assert b.application == "test-blocker" and b.user == blocker.info.user
        assert b.state == "idle in transaction"
        assert b.query == "SELECT txid_current()"
        assert b.refusal is None  # the test server's user is a superuser
        assert b.xact_age_s is not None
        assert before - started - 0.3 <= b.xact_age_s <= elapsed + 0.3
        jobs = h.jobs
        assert jobs is not None and jobs.dead >= 300 and jobs.live == 300
        assert 0.45 < jobs.dead_share < 0.55
        data = as_json(h)
        assert data["blocker"]["pid"] == b.pid and data["blocker"]["may_signal"] is True
        assert data["jobs_dead_tuples"] == jobs.dead
        text = "\n".join(prometheus_lines(h))
        assert f'jobtui_db_table_dead_tuples{{table="jobs"}} {jobs.dead}' in text
        assert "jobtui_db_blocker_xact_age_seconds 0\n" not in text
    finally:
        blocker.close()
    h = await reading(dsn)
    assert h.blocker is None
    assert "jobtui_db_blocker_xact_age_seconds 0" in prometheus_lines(h)


async def _with_dead(dsn: str, n: int) -> DbHealth | None:
    h = await reading(dsn)
    return h if h.jobs is not None and h.jobs.dead >= n else None


async def test_vacuum_warning_until_jobs_is_vacuumed(dsn: str, conn: psycopg.Connection) -> None:
    h = await reading(dsn)
    assert vacuum_overdue(h) is None and not h.warnings
    churn(conn, 200)  # over jobs' trigger (50 + 2% of its tuples), never vacuumed
    h = await wait_until(lambda: _with_dead(dsn, 200), what="dead tuples in the statistics")
    warning = vacuum_overdue(h)
    assert warning is not None and warning.startswith("jobs: ")
    assert "never vacuumed" in warning and warning in h.warnings
    assert as_json(h)["vacuum_overdue"] == warning
    assert "jobtui_db_jobs_vacuum_overdue 1" in prometheus_lines(h)
    conn.execute("VACUUM jobs")
    h = await wait_until(lambda: _vacuumed(dsn), what="the vacuum to show in the statistics")
    assert vacuum_overdue(h) is None
    assert "jobtui_db_jobs_vacuum_overdue 0" in prometheus_lines(h)


async def _vacuumed(dsn: str) -> DbHealth | None:
    h = await reading(dsn)
    return h if h.jobs is not None and h.jobs.vacuumed_at is not None else None


async def test_tables_and_indexes_are_jobtui_s_own(dsn: str, conn: psycopg.Connection) -> None:
    conn.execute("CREATE TABLE not_ours (id int PRIMARY KEY)")
    conn.execute(
        "ALTER TABLE dead_letters SET (autovacuum_enabled = false, "
        "autovacuum_vacuum_threshold = 7, autovacuum_vacuum_scale_factor = 0)"
    )
    enqueue_many(conn, [JobSpec("k", {"i": i}) for i in range(100)])
    conn.execute("ANALYZE jobs")
    h = await reading(dsn)
    names = {t.name for t in h.tables}
    assert "not_ours" not in names and names <= set(JOBTUI_TABLES)
    assert {"jobs", "dead_letters", "workers", "audit_log"} <= names
    server_on = conn.execute("SELECT current_setting('autovacuum')::bool").fetchone()
    by_name = {t.name: t for t in h.tables}
    assert by_name["dead_letters"].autovacuum is False
    assert by_name["jobs"].autovacuum is (server_on == (True,))
    # a table's own settings make its trigger: jobs' scale factor 0.02 (migration 0001) with
    # the server's threshold, dead_letters' threshold 7 and scale factor 0
    threshold = conn.execute("SELECT current_setting('autovacuum_vacuum_threshold')::int")
    assert by_name["jobs"].vacuum_trigger == pytest.approx(threshold.fetchone()[0] + 2.0)
    assert by_name["dead_letters"].vacuum_trigger == pytest.approx(7.0)
    indexes = {(i.table, i.name) for i in h.indexes}
    assert ("jobs", "jobs_pkey") in indexes and ("jobs", "jobs_claim") in indexes
    assert not any(i.table == "not_ours" for i in h.indexes)
    jobs = by_name["jobs"]
    assert jobs.size_bytes > 0 and jobs.live == 100 and jobs.analyzed_at is not None
    lines = prometheus_lines(h)
    assert f'jobtui_db_table_size_bytes{{table="jobs"}} {jobs.size_bytes}' in lines
    assert 'jobtui_db_table_size_bytes{table="not_ours"}' not in "\n".join(lines)


async def test_terminate_ends_the_session_and_writes_one_audit_row(
    dsn: str, conn: psycopg.Connection
) -> None:
    blocker = open_blocker(dsn)
    try:
        h = await reading(dsn)
        b = h.blocker
        assert b is not None and b.pid == blocker.info.backend_pid
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            outcome = await backends.signal_backend(
                aconn, "public", b.pid, b.backend_start, terminate=True, os_user="op@host"
            )
        assert outcome.signalled and not outcome.gone
        assert outcome.describe() == f"terminated backend {b.pid}"

        def gone() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (b.pid,)
            ).fetchone()
            return row == (0,)

        await wait_until(gone, what="the terminated backend to go")
        with pytest.raises(psycopg.OperationalError):
            blocker.execute("SELECT 1")
        rows = audit_rows(conn)
        assert len(rows) == 1
        action, count, details, os_user = rows[0]
        assert (action, count, os_user) == ("terminate_backend", 1, "op@host")
        assert details["pid"] == b.pid and details["application"] == "test-blocker"
    finally:
        blocker.close()


async def test_cancel_stops_the_statement_and_a_reused_pid_is_never_signalled(
    dsn: str, conn: psycopg.Connection
) -> None:
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as sleeper,
        await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn,
    ):
        pid = sleeper.info.backend_pid
        sleeping = asyncio.create_task(sleeper.execute("SELECT pg_sleep(30)"))

        def active() -> Any:
            return conn.execute(
                "SELECT backend_start FROM pg_stat_activity WHERE pid = %s AND state = 'active'",
                (pid,),
            ).fetchone()

        row = await wait_until(active, what="the sleeper to be active")
        started = row[0]
        # the same pid with another start time: a new session that reused the pid
        other = await backends.signal_backend(
            aconn,
            "public",
            pid,
            started.replace(year=started.year - 1),
            terminate=False,
            os_user="op@host",
        )
        assert other.gone and not other.signalled
        assert not sleeping.done()
        outcome = await backends.signal_backend(
            aconn, "public", pid, started, terminate=False, os_user="op@host"
        )
        assert outcome.signalled
        with pytest.raises(psycopg.errors.QueryCanceled):
            await asyncio.wait_for(sleeping, 10)
        assert await (await sleeper.execute("SELECT 1")).fetchone() == (1,)  # still connected
    rows = audit_rows(conn)
    assert [(r[0], r[1]) for r in rows] == [("cancel_backend", 0), ("cancel_backend", 1)]


@pytest.fixture(name="managed")
def managed_db(owner: Owner) -> Iterator[tuple[Owner, str]]:
    """The owner's database migrated by the owner, and a DSN of another non-superuser role
    (made by the owner, which is not a member of it)."""
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        migrate(conn, "public")
        app_role = f"{owner.prefix}app"
        conn.execute(f'CREATE ROLE "{app_role}" LOGIN')
    yield owner, conninfo.make_conninfo(owner.dsn, user=app_role)


async def test_a_role_that_may_not_signal_is_told_why_and_nothing_is_written(
    managed: tuple[Owner, str],
) -> None:
    owner, app_dsn = managed
    blocker = open_blocker(app_dsn, app="someone-else")
    try:
        # Without pg_read_all_stats the owner sees that the other role's session holds back
        # vacuum (its xid), but not its state, age or query; it is told what would show them.
        h = await reading(owner.dsn)
        b = h.blocker
        assert b is not None and b.pid == blocker.info.backend_pid and h.hidden_sessions == 1
        assert (b.state, b.xact_age_s, b.query) == (None, None, "<insufficient privilege>")
        assert any("pg_read_all_stats" in w for w in h.warnings)
        with psycopg.connect(owner.admin_dsn, autocommit=True) as admin:
            admin.execute(f'GRANT pg_read_all_stats TO "{owner.role}"')
        h = await reading(owner.dsn)
        b = h.blocker
        assert b is not None and b.pid == blocker.info.backend_pid and h.hidden_sessions == 0
        assert b.state == "idle in transaction" and b.xact_age_s is not None
        assert b.refusal == (
            f"role {owner.role} is not superuser, not a member of pg_signal_backend and not a "
            f"member of role {owner.prefix}app, whose backend it is"
        )
        assert json.dumps(as_json(h)["blocker"]["signal_refusal"]) is not None
        async with await psycopg.AsyncConnection.connect(owner.dsn, autocommit=True) as aconn:
            with pytest.raises(backends.SignalRefused) as refused:
                await backends.signal_backend(
                    aconn, "public", b.pid, b.backend_start, terminate=True, os_user="op@host"
                )
        assert "not allowed to terminate it" in str(refused.value)
        assert "pg_signal_backend" in str(refused.value)
        assert blocker.execute("SELECT 1").fetchone() == (1,)  # still alive
        with psycopg.connect(owner.dsn, autocommit=True) as conn:
            assert audit_rows(conn) == []
    finally:
        blocker.close()


async def test_workers_wakeups_and_connections(dsn: str, conn: psycopg.Connection) -> None:
    listener = f"jobtui_listen_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{listener}" LOGIN')
    listen_dsn = conninfo.make_conninfo(dsn, user=listener)
    try:
        async with running_worker(dsn, quick_registry(), listen_dsn=listen_dsn) as worker:

            async def mode(wanted: str) -> DbHealth | None:
                h = await reading(dsn)
                w = next((w for w in h.workers if w.id == worker.id), None)
                ok = w is not None and (w.mode, w.listen_connected) == (
                    wanted,
                    wanted == "listen",
                )
                return h if ok else None

            h = await wait_until(lambda: mode("listen"), what="the worker to LISTEN")
            w = next(w for w in h.workers if w.id == worker.id)
            assert not w.polling and w.last_wakeup_age_s is not None  # its probe woke it
            assert h.connections.workers >= 3  # its claim, liveness and listen connections
            assert h.connections.in_use <= h.connections.max_connections
            lines = prometheus_lines(h)
            assert f'jobtui_worker_listen_connected{{worker="{worker.id}"}} 1' in lines
            # The LISTEN connection is killed and may not come back: the worker polls.
            conn.execute(f'ALTER ROLE "{listener}" NOLOGIN')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (listener,),
            )
            h = await wait_until(lambda: mode("polling"), what="the worker to poll")
            w = next(w for w in h.workers if w.id == worker.id)
            assert w.polling and w.note is not None and "LISTEN connection lost" in w.note
            assert any(worker.id in x and "polling" in x for x in h.warnings)
            assert f'jobtui_worker_listen_connected{{worker="{worker.id}"}} 0' in prometheus_lines(
                h
            )
            data = as_json(h)["workers"]
            assert {"id": worker.id, "wakeup": "polling"}.items() <= next(
                d for d in data if d["id"] == worker.id
            ).items()
    finally:
        conn.execute(f'DROP ROLE IF EXISTS "{listener}"')


async def test_on_a_standby_the_lag_and_read_only(replica_db: ReplicaDB) -> None:
    h = await reading(replica_db.standby_dsn)
    assert h.replica is not None
    assert as_json(h)["replica"]["read_only"] is True
    primary = await reading(replica_db.primary_dsn)
    assert primary.replica is None and as_json(primary)["replica"] is None


async def test_a_role_that_may_not_write_the_audit_log_signals_nothing(
    managed: tuple[Owner, str],
) -> None:
    """The signal and its audit row are one statement: a role that may signal but not write
    audit_log is refused before anything is signalled (a signal cannot be rolled back)."""
    owner, app_dsn = managed
    signaller = f"{owner.prefix}sig"
    with psycopg.connect(owner.admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{signaller}" LOGIN')
        admin.execute(f'GRANT pg_signal_backend, pg_read_all_stats TO "{signaller}"')
        admin.execute(f'GRANT USAGE ON SCHEMA public TO "{signaller}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{signaller}"')
    victim = open_blocker(app_dsn, app="victim")
    try:
        sig_dsn = conninfo.make_conninfo(owner.dsn, user=signaller)
        h = await reading(sig_dsn)
        b = h.blocker
        assert b is not None and b.pid == victim.info.backend_pid and b.backend_start is not None
        async with await psycopg.AsyncConnection.connect(sig_dsn, autocommit=True) as aconn:
            with pytest.raises(backends.SignalRefused, match="audit log"):
                await backends.signal_backend(
                    aconn, "public", b.pid, b.backend_start, terminate=True, os_user="op@host"
                )
        assert victim.execute("SELECT 1").fetchone() == (1,)  # still alive
        # Without pg_read_all_stats the session's start is hidden: refused up front, in words.
        with psycopg.connect(owner.admin_dsn, autocommit=True) as admin:
            admin.execute(f'REVOKE pg_read_all_stats FROM "{signaller}"')
        h = await reading(sig_dsn)
        assert h.blocker is not None and h.blocker.backend_start is None
        assert h.blocker.refusal is not None
        assert "pg_read_all_stats" in h.blocker.refusal
        async with await psycopg.AsyncConnection.connect(sig_dsn, autocommit=True) as aconn:
            with pytest.raises(backends.SignalRefused, match="pg_read_all_stats"):
                await backends.signal_backend(
                    aconn, "public", b.pid, None, terminate=True, os_user="op@host"
                )
        assert victim.execute("SELECT 1").fetchone() == (1,)
    finally:
        victim.close()
    with psycopg.connect(owner.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
