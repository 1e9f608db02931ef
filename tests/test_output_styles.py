"""A database whose default date or interval style is not ISO: every jobtui connection still
reads its timestamps and intervals (psycopg parses only ISO dates and `postgres` intervals).

Before the fix `jobtui jobs list` on such a database ended with "can't parse timestamptz with
DateStyle 'SQL, DMY'", and so did the console, `stats` and the worker.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, running_worker, wait_until
from psycopg import conninfo
from test_cli_support import assert_ok, run_cli
from test_tui_console import SIZE, add_dead, config, goto, rendered, table, until

from jobtui import enqueue, enqueue_many
from jobtui.db import connect
from jobtui.registry import Registry
from jobtui.tui.app import JobtuiApp

STYLES = {"DateStyle": "SQL, DMY", "IntervalStyle": "sql_standard"}


@pytest.fixture
def sql_style_dsn(dsn: str) -> str:
    """`dsn`'s database with the SQL date style and the SQL-standard interval style."""
    name = conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as admin:
        for setting, value in STYLES.items():
            admin.execute(
                psycopg.sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    psycopg.sql.Identifier(str(name)),
                    psycopg.sql.Identifier(setting),
                    psycopg.sql.Literal(value),
                )
            )
    with psycopg.connect(dsn) as check:  # the setting holds for new sessions
        assert check.info.parameter_status("DateStyle") == "SQL, DMY"
    return dsn


def test_the_cli_reads_a_database_with_sql_date_style(
    sql_style_dsn: str, conn: psycopg.Connection
) -> None:
    first = enqueue(conn, "send_email", {"to": "a@example.org"})
    add_dead(conn, "webhook", "ConnectTimeout: host 'a.example' after 10s", n=2)
    listing = assert_ok(run_cli("jobs", "list", dsn=sql_style_dsn))
    assert "send_email" in listing
    assert "send_email" in assert_ok(run_cli("jobs", "show", str(first), dsn=sql_style_dsn))
    stats = json.loads(assert_ok(run_cli("stats", "--json", dsn=sql_style_dsn)))
    assert stats["totals"]["ready"] == 1 and stats["totals"]["dead"] == 2
    assert stats["oldest_ready_age_s"] is not None
    assert "webhook" in assert_ok(run_cli("dead", "list", dsn=sql_style_dsn))


async def test_the_worker_retries_and_completes_on_a_database_with_sql_styles(
    sql_style_dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """A guard: the worker's statements read no timestamps as such today (this passed before
    the fix too); a claim or back-off that starts to must keep working on such a database."""
    reg = Registry()
    calls: list[int] = []

    @reg.handler("flaky", backoff_base=0.05, backoff_cap=0.1, jitter=0.0)
    def flaky(payload: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first attempt fails")

    job_id = await enqueue(aconn, "flaky", {})
    async with running_worker(sql_style_dsn, reg):
        await wait_until(lambda: len(calls) >= 2, what="a retried attempt", timeout=30)

        async def finished() -> bool:
            rows = await fetchall(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            )
            return bool(rows) and rows[0][0]

        await wait_until(finished, what="the job finished")
    rows = await fetchall(aconn, "SELECT attempts, last_error FROM jobs WHERE id = %s", (job_id,))
    assert rows == [(2, "ValueError: first attempt fails")]


async def test_the_console_shows_jobs_on_a_database_with_sql_styles(
    sql_style_dsn: str, conn: psycopg.Connection
) -> None:
    enqueue(conn, "send_email", {"to": "b@example.org"})
    app = JobtuiApp(sql_style_dsn, "public", config=config())
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, pilot, "2")
        jobs = table(app, "#jobs-table")
        await until(pilot, lambda: len(jobs.keys) == 1)
        assert "send_email" in rendered(jobs)
        assert app.db_error is None


def test_behind_pgbouncer_jobtui_leaves_other_clients_their_interval_style(
    dsn: str, tx_pooled_dsn: str, conn: psycopg.Connection
) -> None:
    """PgBouncer before 1.20 does not track IntervalStyle: jobtui's SET stayed on the server
    connection that took it, and the next client of the pool given that connection was told
    the database's style (here iso_8601) but sent `postgres` intervals (an application that
    parses what it was told reads them wrong, or refuses them as psycopg does). DateStyle,
    tracked by every PgBouncer, is still set for jobtui and not seen by the others."""
    name = conninfo.conninfo_to_dict(dsn)["dbname"]
    for setting, value in (("DateStyle", "SQL, DMY"), ("IntervalStyle", "iso_8601")):
        conn.execute(
            psycopg.sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                psycopg.sql.Identifier(str(name)),
                psycopg.sql.Identifier(setting),
                psycopg.sql.Literal(value),
            )
        )
    enqueue(conn, "send_email", {"to": "c@example.org"})
    with connect(tx_pooled_dsn) as ours:
        assert ours.execute("SELECT created_at FROM jobs").fetchone() is not None
    # Other clients of the pool, each holding its own server connection at once (the pool
    # hands the most recently used server connection out first): every one is as told.
    others = [psycopg.connect(tx_pooled_dsn) for _ in range(4)]
    try:
        for other in others:
            told = other.info.parameter_status("IntervalStyle")
            style, day = other.execute(
                "SELECT current_setting('IntervalStyle'), interval '1 day 2 hours'::text"
            ).fetchone() or (None, None)
            assert (told, style, day) == ("iso_8601", "iso_8601", "P1DT2H")
            assert other.execute("SHOW DateStyle").fetchone() == ("SQL, DMY",)
    finally:
        for other in others:
            other.close()
    stats = json.loads(assert_ok(run_cli("stats", "--json", dsn=tx_pooled_dsn)))
    assert stats["totals"]["ready"] == 1
    assert "send_email" in assert_ok(run_cli("jobs", "list", dsn=tx_pooled_dsn))


async def test_enqueue_many_on_the_callers_own_connection_with_sql_styles(
    sql_style_dsn: str,
) -> None:
    """The producer API on a connection the application opened (no jobtui SET on it)."""
    with psycopg.connect(sql_style_dsn, autocommit=True) as mine:
        enqueue(mine, "one", {})  # the single path reads no timestamp: it works
        enqueue_many(mine, [{"kind": "many", "payload": {}}, {"kind": "many", "payload": {}}])
    async with await psycopg.AsyncConnection.connect(sql_style_dsn, autocommit=True) as amine:
        await enqueue_many(amine, [{"kind": "many", "payload": {}}])
