"""Least privilege, end to end: log in as each of `jobtui roles --print-sql`'s roles.

Complements test_roles.py (the script, and each role's basic abilities): here the console as
monitor, every operator action refused *by the database* as monitor and audited as operator
(database role and OS user, API and CLI), the audit log closed to tampering, and an in-process
Worker doing everything a worker does (retry, dead-letter, cancel, pause, rescue, release) as
the worker role. Roles are cluster-wide: every test uses a random prefix and drops its roles.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, fetchval, running_worker, wait_until
from psycopg import conninfo, errors
from test_cli_support import assert_ok, assert_one_error, run_cli

from jobtui import browse, ops
from jobtui.enqueue import enqueue
from jobtui.models import DeadFilter, JobFilter
from jobtui.registry import Registry
from jobtui.roles import drop_roles_sql, roles_sql

GROUPS = ("monitor", "operator", "worker")


@pytest.fixture
def logins(conn: psycopg.Connection, dsn: str) -> Iterator[dict[str, tuple[str, str]]]:
    """{group: (login role name, its DSN)} for one LOGIN role granted each group role."""
    prefix = f"p{uuid.uuid4().hex[:8]}_"
    conn.execute(roles_sql("public", prefix))
    made: dict[str, tuple[str, str]] = {}
    try:
        for group in GROUPS:
            name = f"{prefix}login_{group}"
            conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {prefix}{group}")
            made[group] = (name, conninfo.make_conninfo(dsn, user=name))
        try:
            psycopg.connect(made["monitor"][1]).close()
        except psycopg.OperationalError:
            pytest.skip("the test server does not let a new role log in without a password")
        yield made
    finally:
        for name, _ in made.values():
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")
        conn.execute(drop_roles_sql(prefix))


INSERT_DEAD = """
INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                          last_error, errors, reason)
SELECT nextval('jobs_id_seq'), %s, '{}', 1, 1, now(), now(), 'E: x', '[]', 'failed'
FROM generate_series(1, %s)
RETURNING id
"""


def seed(conn: psycopg.Connection) -> dict[str, list[int]]:
    """Pending, scheduled and old finished jobs, and dead letters of two kinds."""
    ready = [
        r[0]
        for r in conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 3)"
            " RETURNING id"
        )
    ]
    later = [
        r[0]
        for r in conn.execute(
            "INSERT INTO jobs (kind, payload, run_at) VALUES ('later', '{}', now() + '1h')"
            " RETURNING id"
        )
    ]
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at)"
        " VALUES ('old', '{}', now() - '30 days'::interval)"
    )
    dead = [r[0] for r in conn.execute(INSERT_DEAD, ("dk", 3))]
    other = [r[0] for r in conn.execute(INSERT_DEAD, ("dk2", 2))]
    return {"ready": ready, "later": later, "dead": dead, "other": other}


def state(conn: psycopg.Connection) -> tuple[Any, ...]:
    """Everything an operator action could change."""
    return (
        conn.execute(
            "SELECT id, run_at, finished_at, cancelled_at FROM jobs ORDER BY id"
        ).fetchall(),
        conn.execute("SELECT id FROM dead_letters ORDER BY id").fetchall(),
        conn.execute("SELECT kind FROM paused_kinds").fetchall(),
        conn.execute("SELECT count(*) FROM audit_log").fetchone(),
    )


async def test_as_monitor_the_console_is_read_only_and_says_so(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp
    from jobtui.tui.widgets.status import StatusBar

    seed(conn)
    app = JobtuiApp(logins["monitor"][1], "public", config=ConsoleConfig(refresh_s=0.3))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.read_only and app.polls >= 1:
                break
            await pilot.pause(0.05)
        assert app.read_only and not app.config.read_only  # decided by the role, not a flag
        notes = [n.message for n in app._notifications]
        assert "Read-only: the database role cannot write; write actions are hidden." in notes
        assert "READ-ONLY" in app.query_one("#status", StatusBar).plain
        footer = app.export_screenshot()
        assert "READ-ONLY" in footer


async def test_as_monitor_every_operator_action_is_refused_by_the_database(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    ids = seed(conn)
    before = state(conn)
    actor = ops.Actor.current()
    async with await psycopg.AsyncConnection.connect(logins["monitor"][1], autocommit=True) as a:
        assert await browse.can_write(a, "public") is False
        actions = {
            "requeue_dead": ops.requeue_dead(a, "public", ids["dead"], actor=actor),
            "delete_dead": ops.delete_dead(a, "public", ids["dead"], actor=actor),
            "run_now": ops.run_now(a, "public", ids["later"], actor=actor),
            "cancel_jobs": ops.cancel_jobs(a, "public", ids["ready"], actor=actor),
            "requeue_dead_matching": ops.requeue_dead_matching(
                a, "public", DeadFilter(kind="dk"), actor=actor
            ),
            "delete_dead_matching": ops.delete_dead_matching(
                a, "public", DeadFilter(), actor=actor
            ),
            "cancel_jobs_matching": ops.cancel_jobs_matching(
                a, "public", JobFilter(kind="k"), actor=actor
            ),
            "pause_kind": ops.pause_kind(a, "public", "k", actor=actor),
            "resume_kind": ops.resume_kind(a, "public", "k", actor=actor),
            "prune_finished": ops.prune_finished(a, "public", timedelta(days=1), actor=actor),
        }
        for name, action in actions.items():
            with pytest.raises(errors.InsufficientPrivilege):
                await action
            assert a.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, name
        # Nor can it write the audit log directly, or enqueue.
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute("INSERT INTO audit_log (os_user, action, count) VALUES ('x', 'y', 0)")
        with pytest.raises(errors.InsufficientPrivilege):
            await enqueue(a, "k", {})
    assert state(conn) == before
    mon = logins["monitor"][1]
    assert_one_error(
        run_cli("dead", "requeue", str(ids["dead"][0]), dsn=mon), 1, "permission denied"
    )
    assert_one_error(
        run_cli("jobs", "cancel", str(ids["ready"][0]), dsn=mon), 1, "permission denied"
    )
    assert state(conn) == before
    assert "dk" in assert_ok(run_cli("dead", "list", dsn=mon))  # reading is fine


async def test_as_operator_every_action_works_and_is_audited_with_role_and_os_user(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    ids = seed(conn)
    login, op_dsn = logins["operator"]
    actor = ops.Actor.current()
    async with await psycopg.AsyncConnection.connect(op_dsn, autocommit=True) as a:
        assert await browse.can_write(a, "public") is True
        done = [
            ("requeue_dead", await ops.requeue_dead(a, "public", ids["dead"][:1], actor=actor)),
            ("delete_dead", await ops.delete_dead(a, "public", ids["dead"][1:2], actor=actor)),
            ("run_now", await ops.run_now(a, "public", ids["later"], actor=actor)),
            ("cancel_jobs", await ops.cancel_jobs(a, "public", ids["ready"][:1], actor=actor)),
            ("pause_kind", await ops.pause_kind(a, "public", "k", actor=actor)),
            ("resume_kind", await ops.resume_kind(a, "public", "k", actor=actor)),
            (
                "requeue_dead_matching",
                await ops.requeue_dead_matching(a, "public", DeadFilter(kind="dk2"), actor=actor),
            ),
            (
                "cancel_jobs_matching",
                await ops.cancel_jobs_matching(a, "public", JobFilter(kind="k"), actor=actor),
            ),
            (
                "prune_finished",
                await ops.prune_finished(a, "public", timedelta(days=7), actor=actor),
            ),
        ]
    assert [n for _, n in done] == [1, 1, 1, 1, 1, 1, 2, 2, 1]
    # The same through the CLI (another process, same OS user and host).
    assert_ok(run_cli("dead", "requeue", str(ids["dead"][2]), dsn=op_dsn))
    assert conn.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    audit = conn.execute(
        "SELECT action, count, db_role, os_user FROM audit_log ORDER BY id"
    ).fetchall()
    assert [(r[0], r[1]) for r in audit] == [*done, ("requeue_dead", 1)]
    assert {(r[2], r[3]) for r in audit} == {(login, actor.os_user)}
    assert "@" in actor.os_user


async def test_as_operator_the_audit_log_cannot_be_altered_or_deleted(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    ids = seed(conn)
    async with await psycopg.AsyncConnection.connect(logins["operator"][1], autocommit=True) as a:
        await ops.requeue_dead(a, "public", ids["dead"][:1], actor=ops.Actor.current())
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute("UPDATE audit_log SET os_user = 'someone@else'")
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute("DELETE FROM audit_log")
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute("TRUNCATE audit_log")
    assert conn.execute("SELECT count(*), min(action) FROM audit_log").fetchone() == (
        1,
        "requeue_dead",
    )


async def test_as_operator_and_worker_a_bulk_action_in_batches_is_one_audit_row(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    """Issue 15 item 8 under least privilege: later batches add to the row's count (UPDATE
    (count) granted), and that grant cannot lower a count or touch another role's row."""
    seed(conn)
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at)"
        " SELECT 'old', '{}', now() - '30 days'::interval FROM generate_series(1, 4)"
    )
    actor = ops.Actor.current()
    async with await psycopg.AsyncConnection.connect(logins["operator"][1], autocommit=True) as a:
        n = await ops.requeue_dead_matching(
            a, "public", DeadFilter(kind="dk"), actor=actor, batch_size=1
        )
        assert n == 3
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute("UPDATE audit_log SET count = 0")
    async with await psycopg.AsyncConnection.connect(logins["worker"][1], autocommit=True) as w:
        pruned = await ops.prune_finished(
            w, "public", timedelta(days=7), actor=ops.Actor.worker("w1"), batch_size=2
        )
        assert pruned == 5
        with pytest.raises(errors.InsufficientPrivilege):
            await w.execute(
                "UPDATE audit_log SET count = count + 1 WHERE action = 'requeue_dead_matching'"
            )
    rows = conn.execute("SELECT action, count, db_role FROM audit_log ORDER BY id").fetchall()
    assert rows == [
        ("requeue_dead_matching", 3, logins["operator"][0]),
        ("prune_finished", 5, logins["worker"][0]),
    ]


async def test_as_operator_the_database_role_of_an_audit_row_cannot_be_forged(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]]
) -> None:
    async with await psycopg.AsyncConnection.connect(logins["operator"][1], autocommit=True) as a:
        with pytest.raises(errors.InsufficientPrivilege):
            await a.execute(
                "INSERT INTO audit_log (os_user, db_role, action, count, at)"
                " VALUES ('x@y', 'postgres', 'requeue_dead', 1, now() - '1 year'::interval)"
            )


async def test_as_worker_a_worker_does_all_of_its_work(
    dsn: str,
    conn: psycopg.Connection,
    logins: dict[str, tuple[str, str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Succeed, retry, dead-letter, honour a pause, deliver a cancel, rescue a dead worker's
    job, record statistics, release at shutdown: all as the worker role, no privilege error."""
    caplog.set_level(logging.INFO, logger="jobtui.worker")
    reg = Registry()
    started_long = asyncio.Event()
    cancelled = asyncio.Event()

    @reg.handler("ok")
    async def ok(p: Any) -> None:
        if p.get("enqueue"):  # handlers may enqueue follow-up jobs
            from jobtui.worker import current_job

            assert current_job().kind == "ok"

    @reg.handler("boom", max_attempts=2, backoff_base=0, jitter=0)
    async def boom(p: Any) -> None:
        raise RuntimeError("always fails")

    @reg.handler("long")
    async def long(p: Any) -> None:
        started_long.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @reg.handler("paused")
    async def paused(p: Any) -> None:
        return None

    @reg.handler("stay")
    async def stay(p: Any) -> None:
        await asyncio.sleep(30)

    ok_ids = [enqueue(conn, "ok", {"n": i}) for i in range(5)]
    boom_id = enqueue(conn, "boom", {})
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('paused', 'test')")
    paused_id = enqueue(conn, "paused", {})
    # A job held by a worker that died (its row's heartbeat is long gone).
    conn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at)"
        " VALUES ('gone:1:x', 'gone', 1, '{ok}', 1, now() - interval '1 hour')"
    )
    orphan = enqueue(conn, "ok", {"orphan": True})
    conn.execute(
        "UPDATE jobs SET locked_at = now() - '1h'::interval, locked_by = 'gone:1:x', attempts = 1"
        " WHERE id = %s",
        (orphan,),
    )
    worker_dsn = logins["worker"][1]
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
        async with running_worker(worker_dsn, reg, shutdown_grace=0.3) as worker:
            long_id = enqueue(conn, "long", {})
            await asyncio.wait_for(started_long.wait(), 10)
            await ops.cancel_jobs(admin, "public", [long_id], actor=ops.Actor.current())
            await asyncio.wait_for(cancelled.wait(), 5)
            await wait_until(
                lambda: fetchval(
                    admin,
                    "SELECT count(*) = 6 FROM jobs WHERE kind = 'ok' AND finished_at IS NOT NULL",
                ),
                what="ok jobs and the rescued orphan",
            )
            await wait_until(
                lambda: fetchval(admin, "SELECT count(*) = 1 FROM dead_letters"), what="dead"
            )
            await wait_until(
                lambda: fetchval(
                    admin, "SELECT cancelled_at IS NOT NULL FROM jobs WHERE id = %s", (long_id,)
                ),
                what="the cancel recorded",
            )
            await wait_until(
                lambda: fetchval(admin, "SELECT coalesce(sum(done), 0) >= 6 FROM kind_stats"),
                what="statistics",
            )
            stay_id = enqueue(conn, "stay", {})
            await wait_until(
                lambda: fetchval(
                    admin, "SELECT locked_by IS NOT NULL FROM jobs WHERE id = %s", (stay_id,)
                ),
                what="the stay job claimed",
            )
            worker_id = worker.id
        rows = await fetchall(
            admin,
            "SELECT id, attempts, locked_by, finished_at IS NOT NULL FROM jobs"
            " WHERE id = ANY(%s) ORDER BY id",
            ([paused_id, stay_id, orphan],),
        )
        dead = await fetchall(admin, "SELECT id, attempts, reason FROM dead_letters")
        workers = await fetchval(admin, "SELECT count(*) FROM workers WHERE id = %s", (worker_id,))
    assert dead == [(boom_id, 2, "failed")]
    assert sorted(rows) == sorted(
        [(paused_id, 0, None, False), (stay_id, 0, None, False), (orphan, 2, worker_id, True)]
    )
    assert workers == 0
    assert len(ok_ids) == 5
    text = caplog.text.lower()
    assert "permission denied" not in text and "insufficient" not in text
    assert "_error" not in text


async def test_as_operator_or_monitor_a_worker_cannot_run(
    dsn: str, conn: psycopg.Connection, logins: dict[str, tuple[str, str]], tmp_path: Any
) -> None:
    from jobtui.worker import Worker, WorkerSettings

    reg = Registry()

    @reg.handler("k")
    async def k(p: Any) -> None:
        return None

    for group in ("operator", "monitor"):
        with pytest.raises(errors.InsufficientPrivilege):
            await Worker(logins[group][1], "public", reg, WorkerSettings()).run()
    (tmp_path / "priv_app.py").write_text(
        "from jobtui import Registry\nregistry = Registry()\n\n"
        "@registry.handler('k')\ndef k(payload):\n    return None\n"
    )
    proc = run_cli("worker", "--app", "priv_app", dsn=logins["monitor"][1], cwd=tmp_path)
    assert_one_error(proc, 1, "permission denied")
    assert conn.execute("SELECT count(*) FROM workers").fetchone() == (0,)
