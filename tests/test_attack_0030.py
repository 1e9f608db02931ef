"""Attacks on migration 0030 (the limited claim merged with the worker's other kinds in one claim
order) with real PostgreSQL and real workers.

FAULT marks a test that failed on main at 98030f0 (before the fix in the same commit series);
HELD marks a property that held there and is kept as a guard.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker

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


async def _merged(
    aconn: psycopg.AsyncConnection, want: int, limited: list[str], others: list[str]
) -> tuple[list[int], dict[str, float]]:
    got = await claim_limited(aconn, S, "w", limited, want, others)
    return sorted(r[0] for r in got), dict(got.wait_s)


def _lim_ids(conn: psycopg.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = 'lim' ORDER BY id")]


@pytest.mark.parametrize(
    "unready",
    [
        "UPDATE jobs SET cancel_requested = true WHERE kind = 'hi'",
        "UPDATE jobs SET run_at = now() + interval '1 hour' WHERE kind = 'hi'",
        "UPDATE jobs SET attempts = max_attempts WHERE kind = 'hi'",
        "UPDATE jobs SET locked_at = now(), locked_by = 'other' WHERE kind = 'hi'",
        "UPDATE jobs SET finished_at = now() WHERE kind = 'hi'",
        "INSERT INTO paused_kinds (kind, paused_by) VALUES ('hi', 'op')",
        "INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('hi', 1)",
    ],
    ids=["cancel", "not_due", "exhausted", "running", "finished", "paused", "limited_now"],
)
async def test_held_rows_of_another_kind_that_cannot_be_claimed_hold_nothing_back(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, unready: str
) -> None:
    """HELD. `hi`'s priority-9 rows, cancel-requested, not yet due, out of attempts, running,
    finished, paused, or given a limit by an operator since the worker read its limits (so
    still in its `others`): none is peeked, lim's priority-0 jobs fill the slots."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=10)])
    enqueue_many(conn, [{"kind": "hi", "payload": {}, "priority": 9} for _ in range(3)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0} for _ in range(3)])
    conn.execute(unready)
    claimed, waits = await _merged(aconn, 3, ["lim"], ["hi"])
    assert claimed == _lim_ids(conn) and waits == {}


async def test_an_other_kind_also_limited_and_claimed_here_is_not_counted_twice(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. `others` names `lim2`, which is also among the limited kinds (a limit set between
    the worker's reads): lim2 is claimed as a limited kind, never peeked as an other one."""
    await sync_kind_limits(
        aconn, S, [KindLimit("lim", concurrency=10), KindLimit("lim2", concurrency=10)]
    )
    enqueue_many(conn, [{"kind": "lim2", "payload": {}, "priority": 9} for _ in range(2)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0} for _ in range(2)])
    claimed, waits = await _merged(aconn, 4, ["lim", "lim2"], ["lim2", "lim2"])
    assert len(claimed) == 4 and waits == {}


async def test_extreme_priorities_and_duplicate_or_null_kinds(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. Priorities at int4's ends and a duplicated or NULL other kind: the merged order
    is still exact (the highest other first, lim's int4 minimum held back)."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=10)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": -(2**31)}])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 2**31 - 1}])
    enqueue_many(conn, [{"kind": "hi", "payload": {}, "priority": 2**31 - 1}])
    top, low = _lim_ids(conn)[1], _lim_ids(conn)[0]
    claimed, waits = await _merged(aconn, 2, ["lim"], ["hi", "hi", None])  # type: ignore[list-item]
    assert claimed == [top] and waits == {"lim": 0.0}
    claimed, waits = await _merged(aconn, 2, ["lim"], ["hi"])
    assert claimed == [low] and waits == {}


async def test_two_hundred_other_kinds_rank_exactly(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. 200 other kinds with a job each at priority 1..200 and lim's one at 150, enqueued
    first: it ranks 51st (50 others above it; at its own priority the older run_at goes
    first), so it is claimed with want 51 and held back with want 50."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=10)])
    others = [f"k{i:03d}" for i in range(1, 201)]
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 150}])
    enqueue_many(
        conn, [{"kind": k, "payload": {}, "priority": i + 1} for i, k in enumerate(others)]
    )
    claimed, waits = await _merged(aconn, 51, ["lim"], others)
    assert claimed == _lim_ids(conn) and waits == {}
    conn.execute("UPDATE jobs SET locked_at = NULL, locked_by = NULL, attempts = 0")
    claimed, waits = await _merged(aconn, 50, ["lim"], others)
    assert claimed == [] and waits == {"lim": 0.0}


async def _lim_throughput(
    dsn: str, conn: psycopg.Connection, mixed: bool, seconds: float = 4.0
) -> tuple[int, int]:
    """Worker B handles `lim` (concurrency 4) alone; worker A handles `free` (a flood of
    priority-5 no-op jobs), and `lim` too when `mixed`. lim's jobs (priority 0) and free's
    that finished in `seconds`."""
    reg_a, reg_b = Registry(), Registry()
    for reg in (reg_a, reg_b):

        @reg.handler("lim", concurrency=4)
        async def lim(payload: Any) -> None:
            await asyncio.sleep(0.005)

    @reg_a.handler("free")
    async def free(payload: Any) -> None:
        pass

    if not mixed:
        reg_a = Registry()
        reg_a.handler("free")(free)
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 5} for _ in range(40_000)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0} for _ in range(2_000)])
    async with (
        running_worker(dsn, reg_b, concurrency=4, poll_interval=1.0),
        running_worker(dsn, reg_a, concurrency=8, poll_interval=1.0),
    ):
        await asyncio.sleep(seconds)
    done = dict(
        conn.execute(
            "SELECT kind, count(*) FROM jobs WHERE finished_at IS NOT NULL GROUP BY kind"
        ).fetchall()
    )
    return done.get("lim", 0), done.get("free", 0)


async def test_fault_a_limited_only_worker_beside_a_mixed_one_under_a_flood_is_not_starved(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """FAULT. Worker A handles `lim` and `free` (a flood of priority-5 jobs), worker B `lim`
    alone (priority-0 jobs, concurrency 4). Since 0030 A leaves lim's jobs to the flood's
    order, so B is the one to run them; B ran 1,068-1,319 in 4 s beside a worker of `free`
    alone, but 8-44 beside A on main (0029: 448-512, A and B together). B's limited claim,
    skipped while A's held lim's row (CONTESTED_RETRY_S) or at the limit (FULL_POLL_S), waited
    the whole polling interval instead: the claim's end woke the dispatcher's loop before the
    claim left `_claims`, so the loop saw one in flight and slept poll_interval (1 s here).
    With the loop woken again once it has left, 583-917."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=4)])
    lim, free = await _lim_throughput(dsn, conn, mixed=True)
    assert lim >= 150, f"lim={lim} free={free} in 4 s"
