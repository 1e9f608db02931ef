"""Migration 0032: jobtui_analyze_jobs(), the worker's ANALYZE of `jobs` with its owner's
rights (SECURITY DEFINER, a fixed search_path), EXECUTE revoked from PUBLIC and granted to the
worker role by `jobtui roles` (tests/test_roles.py runs it as that role). A new function only.
The head schema is tests/data/schema_v32.txt, `tools/schema_describe.py DSN --fresh --up-to 32`.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
from test_roles import _login
from test_schema_v30 import entries

from jobtui.roles import drop_roles_sql, roles_sql
from jobtui.schema import migrate
from jobtui.schema.describe import describe
from jobtui.worker.link import Link
from jobtui.worker.statements import WorkerDB

DATA = Path(__file__).parent / "data"
SNAPSHOT = DATA / "schema_v32.txt"


def test_the_head_schema_is_its_description(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, "Queue_2", up_to=32)][-1] == 32
        assert describe(conn, "Queue_2") == SNAPSHOT.read_text("utf-8")


def test_0032_adds_only_the_analyze_function_executable_by_its_owner() -> None:
    """Against 0031's description: one new function, its one grant the owner's (PUBLIC's
    EXECUTE revoked), nothing else changed."""
    old = (DATA / "schema_v31.txt").read_text("utf-8")
    new = SNAPSHOT.read_text("utf-8")

    a, b = entries(old), entries(new)
    assert a.keys() <= b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    added = sorted(set(b) - set(a))
    assert added == ["function jobtui_analyze_jobs", "grant on function jobtui_analyze_jobs"]
    assert "security definer cost 100 rows 0 set search_path=pg_catalog, pg_temp body:" in new
    grants = [g for g in new.splitlines() if g.startswith("grant on function jobtui_analyze_jobs")]
    assert grants == ["grant on function jobtui_analyze_jobs() to OWNER EXECUTE"]


def test_a_restored_schema_without_0032_is_recognised_and_0032_applies(empty_dsn: str) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=31)
        conn.execute("DELETE FROM jobtui_migrations")  # a schema-only restore, say
        assert [m.version for m in migrate(conn, "public", up_to=32)] == [32]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
        conn.execute("DELETE FROM jobtui_migrations")
        assert [m.version for m in migrate(conn, "public", up_to=32)] == []


async def test_the_worker_analyses_through_the_function_and_before_0032_without_it(
    empty_dsn: str,
) -> None:
    """The housekeeper's ANALYZE (WorkerDB.analyze) on a schema at 0031, which has no
    jobtui_analyze_jobs: the plain ANALYZE (the owner's here) still analyses; after 0032 the
    function does. pg_stats is emptied between the two (the test server's role is a
    superuser)."""
    stats = "SELECT count(*) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'jobs'"
    has_function = "SELECT to_regprocedure('jobtui_analyze_jobs()') IS NOT NULL"
    db = WorkerDB("public", "w1")
    link = Link(empty_dsn, "housekeeping", statement_timeout=30.0)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=31)
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 50)"
        )
        try:
            assert conn.execute(has_function).fetchone() == (False,)
            await db.analyze(link)
            assert conn.execute(stats).fetchone() != (0,)
            migrate(conn, "public", up_to=32)
            assert conn.execute(has_function).fetchone() == (True,)
            conn.execute("DELETE FROM pg_statistic WHERE starelid = 'jobs'::regclass")
            assert conn.execute(stats).fetchone() == (0,)
            await db.analyze(link)
            assert conn.execute(stats).fetchone() != (0,)
        finally:
            await link.close()
            db.engine_threads.shutdown()


async def test_roles_granted_before_0032_fall_back_until_the_script_runs_again(
    empty_dsn: str,
) -> None:
    """`jobtui roles` run at 0031 (it applies: there is no function to grant yet), then 0032:
    the worker role may not call jobtui_analyze_jobs, so its ANALYZE falls back to the plain
    one, which PostgreSQL skips with a warning (no statistics, no error for the chore). The
    roles script run again grants it, and the worker role's ANALYZE then gives statistics."""
    stats = "SELECT count(*) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'jobs'"
    p = f"t{uuid.uuid4().hex[:8]}_"
    db = WorkerDB("public", "w1")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=31)
        conn.execute(roles_sql("public", p))
        assert [m.version for m in migrate(conn, "public", up_to=32)] == [32]
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 50)"
        )
        name = f"{p}login_worker"
        try:
            link = Link(_login(conn, empty_dsn, p, "worker"), "housekeeping", statement_timeout=30)
            try:
                await db.analyze(link)
                assert conn.execute(stats).fetchone() == (0,)
                conn.execute(roles_sql("public", p))
                await db.analyze(link)
                assert conn.execute(stats).fetchone() != (0,)
            finally:
                await link.close()
        finally:
            db.engine_threads.shutdown()
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")
            conn.execute(drop_roles_sql(p))
