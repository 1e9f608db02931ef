"""Attacks on migration 0030 (the limited claim merged with the worker's other kinds in one claim
order) with real PostgreSQL and real workers.

FAULT marks a test that failed on main at 98030f0 (before the fix in the same commit series);
HELD marks a property that held there and is kept as a guard.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until

from jobtui import enqueue_many, limits
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.registry import Registry
from jobtui.schema import migrate

S = "public"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Record every limited claim a worker makes (its `others` and what it claimed)."""
    calls: list[tuple[Any, ...]] = []
    real = limits.claim_limited

    async def spy(*args: Any, **kwargs: Any) -> limits.LimitedRows:
        got = await real(*args, **kwargs)
        calls.append((tuple(args[5]) if len(args) > 5 else (), len(got), dict(got.wait_s)))
        return got

    monkeypatch.setattr(limits, "claim_limited", spy)
    return calls


async def test_fault_a_row_locked_by_another_transaction_neither_starves_nor_spins(
    dsn: str,
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FAULT. A ready `free` job of priority 9 is row-locked by another transaction (an
    operator's SELECT ... FOR UPDATE, a cancel or retry in an open transaction, another
    worker's claim in flight): the peek reads it (not locking, it sees locked_at NULL) and
    ranks it ahead of `lim`'s priority-0 job, so lim's pick is held back with wait 0; the fast
    claim skips the locked row (SKIP LOCKED) and takes nothing. The slot stays free, wait 0
    claims again at once: on main the worker spun (thousands of claims a second, each one
    locking kind_limits and lim's row) and lim's job never ran while the lock was held."""
    reg = Registry()
    ran: list[str] = []

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        ran.append("lim")

    @reg.handler("free")
    async def free(payload: Any) -> None:
        ran.append("free")

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 9}])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0}])
    calls = _counting(monkeypatch)
    with psycopg.connect(dsn) as holder:  # a transaction open for the whole test
        holder.execute("SELECT id FROM jobs WHERE kind = 'free' FOR UPDATE")
        async with running_worker(dsn, reg, concurrency=1, poll_interval=30.0):
            await asyncio.sleep(2.0)
            seen = list(ran)
        holder.rollback()
    assert seen == ["lim"], (seen, len(calls))
    assert len(calls) < 20, f"{len(calls)} limited claims in 2 s with one job to run"


class _Counting:
    """A connection whose statements are counted (the fallback's round trips)."""

    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self.conn, self.sent = conn, 0

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.sent += 1
        return await self.conn.execute(*args, **kwargs)


async def test_fault_a_new_worker_on_a_0029_schema_does_not_fail_a_statement_every_claim(
    empty_dsn: str,
) -> None:
    """FAULT. On a schema before 0030 the five-argument call fails (UndefinedFunction) and
    claim_limited falls back to four arguments. On main it tried the five first at every
    claim: 20 claims sent 40 claim statements, 20 of them errors (each an ERROR line with its
    statement in the server's log, and a round trip). Now the fallback is remembered for the
    connection for a while (limits.MERGE_RETRY_S)."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=29)
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 5)")
        async with await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True) as a:
            counted = _Counting(a)
            for _ in range(20):
                got = await claim_limited(counted, S, "w", ["lim"], 1, ["free"])  # type: ignore[arg-type]
                assert list(got) == []
            assert counted.sent <= 21, f"{counted.sent} statements for 20 claims"
