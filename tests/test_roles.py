"""`jobtui roles --print-sql`: the SQL applies cleanly and each role can do its job, no more.

Roles are cluster-wide, so every test uses a random prefix and drops its roles afterwards.
"""

from __future__ import annotations

import subprocess
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from apps.helpers import running_worker, wait_until
from psycopg import conninfo, errors
from psycopg.types.json import Jsonb
from test_cli_support import JOBTUI, clean_env

import jobtui.worker.dispatcher as dispatcher_module
from jobtui import browse, ops
from jobtui.models import DeadFilter, JobFilter
from jobtui.registry import Registry
from jobtui.roles import InvalidRolePrefix, drop_roles_sql, role_names, roles_sql


@pytest.fixture
def prefix(conn: psycopg.Connection) -> Iterator[str]:
    """Three roles with a random prefix, applied twice (the script is idempotent)."""
    p = f"t{uuid.uuid4().hex[:8]}_"
    conn.execute(roles_sql("public", p))
    conn.execute(roles_sql("public", p))
    logins: list[str] = []
    try:
        yield p
    finally:
        for (name,) in conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (p + "login_%",)
        ).fetchall():
            logins.append(name)
        for name in logins:
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")
        conn.execute(drop_roles_sql(p))


def _login(conn: psycopg.Connection, dsn: str, prefix: str, group: str) -> str:
    name = f"{prefix}login_{group}"
    conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {prefix}{group}")
    role_dsn = conninfo.make_conninfo(dsn, user=name)
    try:
        psycopg.connect(role_dsn).close()
    except psycopg.OperationalError:
        pytest.skip("the test server does not let a new role log in without a password")
    return role_dsn


def _seed(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 4)")
    conn.execute("INSERT INTO jobs (kind, payload, run_at) VALUES ('later', '{}', now() + '1h')")
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at)"
        " VALUES ('old', '{}', now() - '30 days'::interval)"
    )
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                                     last_error, errors, reason)
           SELECT nextval('jobs_id_seq'), 'dk', %s, 1, 1, now(), now(), 'E: x', '[]', 'failed'
           FROM generate_series(1, 4)""",
        (Jsonb({}),),
    )


def test_names_and_bad_prefix() -> None:
    assert role_names("app_") == {
        "monitor": "app_monitor",
        "operator": "app_operator",
        "worker": "app_worker",
    }
    for bad in ("App_", "a-b", "x; drop", ""):
        with pytest.raises(InvalidRolePrefix):
            roles_sql("public", bad)


def test_roles_are_nologin_groups(conn: psycopg.Connection, prefix: str) -> None:
    rows = conn.execute(
        "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE %s ORDER BY 1",
        (prefix + "%",),
    ).fetchall()
    assert rows == [
        (prefix + "monitor", False),
        (prefix + "operator", False),
        (prefix + "worker", False),
    ]


async def test_monitor_reads_but_the_database_refuses_its_writes(
    conn: psycopg.Connection, dsn: str, prefix: str
) -> None:
    _seed(conn)
    role_dsn = _login(conn, dsn, prefix, "monitor")
    actor = ops.Actor.current()
    async with await psycopg.AsyncConnection.connect(role_dsn, autocommit=True) as aconn:
        assert len((await browse.list_jobs(aconn, "public", JobFilter())).rows) == 6
        assert await browse.count_dead(aconn, "public", DeadFilter()) == 4
        assert await browse.can_write(aconn, "public") is False
        for action in (
            ops.requeue_dead(aconn, "public", [1], actor=actor),
            ops.cancel_jobs(aconn, "public", [1], actor=actor),
            ops.pause_kind(aconn, "public", "k", actor=actor),
            ops.delete_dead_matching(aconn, "public", DeadFilter(), actor=actor),
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                await action
        with pytest.raises(errors.InsufficientPrivilege):
            await aconn.execute("INSERT INTO jobs (kind, payload) VALUES ('x', '{}')")
        with pytest.raises(errors.InsufficientPrivilege):  # the worker's ANALYZE (0032)
            await aconn.execute("SELECT jobtui_analyze_jobs()")


async def test_operator_can_do_every_operator_action(
    conn: psycopg.Connection, dsn: str, prefix: str
) -> None:
    _seed(conn)
    role_dsn = _login(conn, dsn, prefix, "operator")
    actor = ops.Actor.current()
    dead_ids = [r[0] for r in conn.execute("SELECT id FROM dead_letters ORDER BY id").fetchall()]
    later = conn.execute("SELECT id FROM jobs WHERE kind = 'later'").fetchone()[0]  # type: ignore[index]
    async with await psycopg.AsyncConnection.connect(role_dsn, autocommit=True) as aconn:
        assert await browse.can_write(aconn, "public") is True
        assert await ops.requeue_dead(aconn, "public", dead_ids[:1], actor=actor) == 1
        assert await ops.delete_dead(aconn, "public", dead_ids[1:2], actor=actor) == 1
        assert await ops.requeue_dead_matching(aconn, "public", DeadFilter(), actor=actor) == 2
        assert await ops.run_now(aconn, "public", [later], actor=actor) == 1
        assert await ops.cancel_jobs(aconn, "public", [later], actor=actor) == 1
        assert (
            await ops.cancel_jobs_matching(aconn, "public", JobFilter(kind="k"), actor=actor) == 4
        )
        assert await ops.pause_kind(aconn, "public", "k", actor=actor) == 1
        assert await ops.resume_kind(aconn, "public", "k", actor=actor) == 1
        assert await ops.prune_finished(aconn, "public", timedelta(days=7), actor=actor) == 1
    roles = {r[0] for r in conn.execute("SELECT DISTINCT db_role FROM audit_log").fetchall()}
    assert roles == {f"{prefix}login_operator"}


def test_worker_role_runs_the_worker(
    conn: psycopg.Connection, dsn: str, prefix: str, tmp_path: Path
) -> None:
    role_dsn = _login(conn, dsn, prefix, "worker")
    (tmp_path / "role_app.py").write_text(
        textwrap.dedent("""
        from jobtui import Registry, enqueue
        registry = Registry()

        @registry.handler("ok")
        def ok(payload):
            return None

        @registry.handler("boom", max_attempts=2, backoff_base=0)
        def boom(payload):
            raise RuntimeError("always fails")
    """)
    )
    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'ok', '{}' FROM generate_series(1, 5)")
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('boom', '{}')")
    conn.execute(
        "INSERT INTO jobs (kind, payload, finished_at)"
        " VALUES ('ok', '{}', now() - '30 days'::interval)"
    )
    proc = subprocess.Popen(
        [
            *JOBTUI,
            "worker",
            "--app",
            "role_app",
            "--dsn",
            role_dsn,
            "--heartbeat",
            "1s",
            "--retention",
            "7d",
        ],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT (SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL),"
                " (SELECT count(*) FROM dead_letters),"
                " (SELECT count(*) FROM workers),"
                " (SELECT coalesce(sum(done), 0) FROM kind_stats),"
                " (SELECT count(*) FROM queue_samples)"
            ).fetchone()
            if done is not None and done[0] == 5 and done[1] == 1 and done[3] >= 5 and done[4]:
                break
            time.sleep(0.1)
        assert done is not None and done[0] == 5 and done[1] == 1 and done[2] == 1, done
        assert done[3] >= 5
        assert done[4] >= 1  # the queue sample reads the counts through their functions
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "permission denied" not in err.lower(), err
    assert "Traceback" not in err


async def test_the_worker_role_analyses_jobs_after_a_slow_claim(
    conn: psycopg.Connection, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker logged in with the worker role, every claim counted slow (SLOW_CLAIM_S 0), on
    a `jobs` never analysed (autovacuum off for it): its housekeeper's ANALYZE gives the table
    statistics. The plain `ANALYZE jobs` it ran before migration 0032 was skipped by
    PostgreSQL with a WARNING (only the owner may), and pg_stats stayed empty."""
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'ok', '{}' FROM generate_series(1, 2000)")
    stats = "SELECT count(*) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'jobs'"
    assert conn.execute(stats).fetchone() == (0,)
    role_dsn = _login(conn, dsn, prefix, "worker")
    monkeypatch.setattr(dispatcher_module, "SLOW_CLAIM_S", 0.0)
    reg = Registry()

    @reg.handler("ok")
    async def ok(payload: object) -> None:
        return None

    async with running_worker(role_dsn, reg, concurrency=5):
        await wait_until(
            lambda: conn.execute(stats).fetchone() != (0,),
            timeout=15,
            what="statistics of jobs from the worker role's ANALYZE",
        )
