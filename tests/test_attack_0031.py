"""Attacks on migration 0031 (the limited claim planned without sorts while `jobs` has no
statistics, 0030's plan once it has some) with real PostgreSQL and real workers.

FAULT marks a test that failed on main at 53d8617 (0031 merged); HELD marks a property that
held there and is kept as a guard.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from apps.helpers import fetchval, running_worker, wait_until
from test_limits import statement_plan_nodes

from jobtui.limits import KindLimit, sync_kind_limits
from jobtui.registry import Registry

S = "public"


def _stale(conn: psycopg.Connection, ready: int) -> None:
    """`jobs` analysed while it held only finished rows (an idle queue), then `ready` jobs of
    `lim` loaded, autovacuum off for the table: pg_stats has a row for locked_at, its
    statistics say no row is waiting."""
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    conn.execute(
        "INSERT INTO jobs (kind, payload, locked_at, finished_at, attempts)"
        " SELECT 'lim', '{}', now(), now(), 1 FROM generate_series(1, 2000)"
    )
    conn.execute("ANALYZE jobs")
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'lim', '{}' FROM generate_series(1, %s)",
        (ready,),
    )


def _came_due(conn: psycopg.Connection, n: int) -> None:
    """`n` jobs of `lim` scheduled for one moment, analysed before it, then come due (run_at
    moved to a second ago), autovacuum off for the table: the statistics say no row is due."""
    conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at)"
        " SELECT 'lim', '{}', now() + interval '1 hour' FROM generate_series(1, %s)",
        (n,),
    )
    conn.execute("ANALYZE jobs")
    conn.execute("UPDATE jobs SET run_at = now() - interval '1 second'")


async def test_fault_a_worker_of_limited_kinds_alone_refreshes_statistics_after_a_slow_claim(
    dsn: str,
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """FAULT. 50,000 `lim` jobs scheduled for one moment, analysed before it, come due: the
    statistics say nothing is due and the claim reads the whole backlog through jobs_pending
    (200,000 of them: 162-281 ms a claim, at 0031 as at 0030: the table has statistics). The
    worker's ANALYZE after a slow claim, made for this case, was asked by the fast claim only,
    which a worker whose kinds are all limited never makes: its claims stayed slow until
    autovacuum came by (never, with it off). Every claim counts as slow here (SLOW_CLAIM_S 0);
    the plans before and after show the ANALYZE is what cures it. Its log line
    (event=analyzed) was never written: the chore returns nothing, which read as skipped."""
    import logging

    import jobtui.worker.dispatcher as dispatcher_module

    caplog.set_level(logging.INFO, logger="jobtui.worker")

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    _came_due(conn, 50_000)
    assert await _rows_read(aconn) > 10_000  # the stale plan reads the backlog
    monkeypatch.setattr(dispatcher_module, "SLOW_CLAIM_S", 0.0)
    reg = Registry()

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        return None

    analyzed = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'jobs'"
    before = await fetchval(aconn, analyzed)
    async with running_worker(dsn, reg, concurrency=5):
        await wait_until(
            lambda: fetchval(aconn, analyzed + " AND analyze_count > %s", (before,)),
            timeout=15,
            what="ANALYZE of jobs after a slow limited claim",
        )
        await wait_until(
            lambda: any("event=analyzed" in r.getMessage() for r in caplog.records),
            what="the ANALYZE logged",
        )
    assert await _rows_read(aconn) <= 100


async def _scan_rows(aconn: psycopg.AsyncConnection, sql: str) -> int:
    """Rows the scans of a `jobs` table returned or filtered out in one statement, the queries
    of the functions it calls included."""
    return sum(
        n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
        for n in await statement_plan_nodes(aconn, sql)
        if "Scan" in n["Node Type"] and n.get("Relation Name") == "jobs"
    )


async def _rows_read(aconn: psycopg.AsyncConnection) -> int:
    """Rows the scans of jobs in one limited claim of `lim` (want 5) returned or filtered out."""
    claim = "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w', 5, 0.05)"
    return await _scan_rows(aconn, claim)


async def test_fault_statistics_of_a_queue_with_no_waiting_row_plan_as_without_statistics(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """FAULT. Statistics gathered while `jobs` held only finished rows, then 50,000 ready `lim`
    jobs loaded: 0031 as merged saw pg_stats' row and planned the claim as 0030, which took
    each walk for one row (the waiting rows' indexes empty at the ANALYZE) and read the whole
    backlog through jobs_pending; with 200,000 ready jobs 90-100 ms a merged claim, and 25-31
    ms for a kind at its limit, which a worker looks at again every FULL_POLL_S (0.05 s). Now
    jobs_claim_kind's reltuples 0 counts as no statistics: 0.8-1.0 ms."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    _stale(conn, 50_000)
    assert await _rows_read(aconn) <= 100
    conn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'x', attempts = 1 WHERE id IN"
        " (SELECT id FROM jobs WHERE kind = 'lim' AND finished_at IS NULL ORDER BY id LIMIT 5)"
    )
    assert await _rows_read(aconn) <= 100  # at its limit: one entry looked at


async def test_held_a_session_that_saw_one_schema_analysed_plans_another_without_statistics(
    empty_dsn: str,
) -> None:
    """HELD. Two schemas in one database: `public` analysed, `other` holding 50,000 ready `lim`
    jobs never analysed. One session claims in `public` (it remembers that table's oid in
    jobtui.analysed_jobs), then in `other`: that claim still looks at pg_stats, finds nothing
    for other.jobs, and walks the kind's head (rows read: a handful, not the backlog); back in
    `public` it looks again (an oid is one table)."""
    from jobtui.schema import migrate

    claim = "SELECT id FROM {}.jobtui_claim_limited(ARRAY['lim'], 'w', 5, 0.05)"
    seen = "SELECT current_setting('jobtui.analysed_jobs', true)"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for schema in ("public", "other"):
            migrate(conn, schema)
            conn.execute(f"ALTER TABLE {schema}.jobs SET (autovacuum_enabled = false)")
            conn.execute(
                f"INSERT INTO {schema}.kind_limits (kind, declared_concurrency) VALUES ('lim', 5)"
            )
        conn.execute("INSERT INTO public.jobs (kind, payload) VALUES ('lim', '{}')")
        conn.execute("ANALYZE public.jobs")
        conn.execute(
            "INSERT INTO other.jobs (kind, payload) SELECT 'lim', '{}'"
            " FROM generate_series(1, 50000)"
        )
        public_oid = conn.execute("SELECT 'public.jobs'::regclass::oid::text").fetchone()
    async with await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True) as a:
        await a.execute(claim.format("public"))
        assert await (await a.execute(seen)).fetchone() == public_oid
        assert await _scan_rows(a, claim.format("other")) <= 100
        assert await (await a.execute(seen)).fetchone() == public_oid
        assert await _scan_rows(a, claim.format("other")) <= 100


async def test_held_three_workers_on_an_analysed_table_keep_limits_and_run_each_job_once(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. test_attack_0030's three workers with overlapping kinds, on a table that has
    statistics (analysed with rows in it, which are then deleted: pg_stats keeps them), so every
    claim takes the branch planned freely rather than the one without sorts the fresh test
    database gives: limits kept, each job once, nothing paused or cancel-requested run."""
    from test_attack_0030 import (
        test_three_workers_with_overlapping_kinds_keep_limits_and_run_each_job_once as three,
    )

    conn.execute("INSERT INTO jobs (kind, payload) SELECT 'x', '{}' FROM generate_series(1, 100)")
    conn.execute("ANALYZE jobs")
    conn.execute("DELETE FROM jobs")
    stats = "SELECT count(*) FROM pg_stats WHERE tablename = 'jobs' AND attname = 'locked_at'"
    assert conn.execute(stats).fetchone() == (1,)
    await three(dsn, aconn, conn)
    oid = conn.execute("SELECT 'jobs'::regclass::oid::text").fetchone()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
        await a.execute("SELECT jobtui_claim_limited(ARRAY['lim'], 'w', 1, 0.05)")
        got = await a.execute("SELECT current_setting('jobtui.analysed_jobs', true)")
        assert await got.fetchone() == oid  # the branch with statistics was the one taken
