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
from test_limits import limited_claim_plan_nodes

from jobtui.limits import KindLimit, sync_kind_limits
from jobtui.registry import Registry

S = "public"


def _stale(conn: psycopg.Connection, ready: int) -> None:
    """`jobs` analysed while it held only finished rows (an idle queue), then `ready` jobs of
    `lim` loaded, autovacuum off for the table: pg_stats has a row for locked_at, so 0031 plans
    the claim as 0030 did, with statistics that say no row is waiting."""
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


async def _rows_read(aconn: psycopg.AsyncConnection) -> int:
    """Rows the scans of jobs in one limited claim of `lim` (want 5) returned or filtered out."""
    nodes = await limited_claim_plan_nodes(aconn, "lim", 5)
    return sum(
        n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
        for n in nodes
        if "Scan" in n["Node Type"] and n.get("Relation Name") == "jobs"
    )


async def test_fault_a_worker_of_limited_kinds_alone_refreshes_stale_statistics(
    dsn: str,
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FAULT. Statistics gathered while `jobs` held only finished rows, then 50,000 ready `lim`
    jobs loaded: 0031 sees statistics and plans the claim as 0030 did, which reads the whole
    backlog (with 200,000: 88-120 ms a claim, as slow as 0030; 1 ms once analysed again). The
    worker's ANALYZE after a slow claim was asked by the fast claim only, which a worker whose
    kinds are all limited never makes: its claims stayed slow until autovacuum came by (never,
    with it off). Every claim counts as slow here (SLOW_CLAIM_S 0); the plans before and after
    show the ANALYZE is what cures it."""
    import jobtui.worker.dispatcher as dispatcher_module

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    _stale(conn, 50_000)
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
    assert await _rows_read(aconn) <= 100
