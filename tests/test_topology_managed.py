"""Issue 15 item 5: managed PostgreSQL (RDS, Cloud SQL, Azure), where no role is superuser.

The whole path runs as a role that owns its database and has CREATEDB and CREATEROLE but not
SUPERUSER (the `owner` fixture), as the master user of those services does.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from apps.helpers import fetchval, running_worker, wait_until
from psycopg import conninfo
from test_cli_support import assert_ok, run_cli
from topology import Owner, console_polled

from jobtui.registry import Registry


def _login(owner: Owner, group: str) -> str:
    """A login role (made by the owner) in one of jobtui's groups; its DSN."""
    name = f"{owner.prefix}login_{group}"
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {owner.prefix}{group}")
    return conninfo.make_conninfo(owner.dsn, user=name)


def _registry() -> Registry:
    reg = Registry()

    @reg.handler("ok")
    async def ok(payload: Any) -> None:
        return None

    @reg.handler("boom", max_attempts=1)
    async def boom(payload: Any) -> None:
        raise RuntimeError("always fails")

    return reg


async def test_the_whole_path_as_a_non_superuser_owner(owner: Owner) -> None:
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        assert conn.execute(
            "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone() == (False, True)
    # migrate, then the least-privilege roles from `roles --print-sql`, both as the owner
    assert "applied 0024_baseline" in assert_ok(run_cli("migrate", dsn=owner.dsn))
    script = assert_ok(run_cli("roles", "--print-sql", "--prefix", owner.prefix, dsn=owner.dsn))
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        conn.execute(script)
    worker_dsn, operator_dsn, monitor_dsn = (
        _login(owner, g) for g in ("worker", "operator", "monitor")
    )
    # a producer as the owner, the worker as the worker role
    assert_ok(run_cli("enqueue", "ok", "{}", dsn=owner.dsn))
    assert_ok(run_cli("enqueue", "boom", "{}", dsn=owner.dsn))
    async with (
        await psycopg.AsyncConnection.connect(owner.dsn, autocommit=True) as aconn,
        running_worker(worker_dsn, _registry()),
    ):

        async def settled() -> bool:
            return bool(
                await fetchval(
                    aconn,
                    "SELECT (SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL) = 1 "
                    "AND (SELECT count(*) FROM dead_letters) = 1",
                )
            )

        await wait_until(settled, what="one job done and one dead letter")
    # the monitor reads, the operator requeues, the owner prunes
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=monitor_dsn)))
    assert data["totals"]["dead"] == 1
    assert assert_ok(run_cli("check", "--max-dead", "5", dsn=monitor_dsn)).startswith("JOBTUI OK")
    assert_ok(run_cli("dead", "requeue", "--kind", "boom", dsn=operator_dsn))
    # issue 13's operator actions as the operator role, listings as the monitor
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO schedules (name, cron, kind) VALUES ('tick', '*/5 * * * *', 'ok')"
        )
    assert_ok(run_cli("schedules", "pause", "tick", dsn=operator_dsn))
    assert_ok(run_cli("schedules", "run-now", "tick", dsn=operator_dsn))
    assert_ok(run_cli("kinds", "limit", "ok", "--concurrency", "2", dsn=operator_dsn))
    assert "paused by" in assert_ok(run_cli("schedules", "list", dsn=monitor_dsn))
    assert "2 running" in assert_ok(run_cli("kinds", "list", dsn=monitor_dsn))
    assert_ok(run_cli("prune", "--older-than", "0s", dsn=owner.dsn))
    # a schema-only restore recognised as the owner (its scratch schema needs CREATE only)
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM jobtui_migrations")
    assert "recognised an existing jobtui schema" in assert_ok(run_cli("migrate", dsn=owner.dsn))
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        assert sorted(conn.execute("SELECT kind FROM jobs").fetchall()) == [("boom",), ("ok",)]
        assert {r[0] for r in conn.execute("SELECT db_role FROM audit_log")} == {
            conninfo.conninfo_to_dict(operator_dsn)["user"],
            owner.role,
        }


async def test_the_console_as_the_owner_may_write(owner: Owner) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    assert_ok(run_cli("migrate", dsn=owner.dsn))
    app = JobtuiApp(owner.dsn, "public", config=ConsoleConfig(refresh_s=0.2))
    async with app.run_test(size=(120, 40)) as pilot:
        await console_polled(app, pilot)
        assert app.polls >= 2 and app.db_error is None
        assert not app.read_only
