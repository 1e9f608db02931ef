"""A worker's free slots go to the ready jobs of all its kinds in one claim order (priority DESC,
run_at, id), limited kinds or not (migration 0030): the limited claim, told the worker's other
kinds, claims a limited job only where the merged order puts it among the first `want`, and the
fast claim takes the rest. Limits still bound how many of a limited kind run.

Before 0030 the limited claim filled every free slot it could from the limited kinds first,
whatever the priorities (tests/test_attack2_0029.py pinned it).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until
from test_limits import limited_claim_plan_nodes

from jobtui import enqueue_many
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.registry import Registry
from jobtui.sql import queries

S = "public"


async def _claim_both(
    aconn: psycopg.AsyncConnection, want: int, limited: list[str], others: list[str]
) -> tuple[list[int], list[int], dict[str, float]]:
    """One worker's claim as the dispatcher makes it: the limited claim with every slot, then
    the fast claim (worker_claim_per_kind) with what is left. The ids each took, and the waits
    the limited claim said."""
    got = await claim_limited(aconn, S, "w", limited, want, others)
    left = want - len(got)
    fast: list[int] = []
    if left > 0:
        cur = await aconn.execute(
            queries(S).worker_claim_per_kind,
            {"kinds": [*limited, *others], "worker": "w", "limit": left},
        )
        fast = [r[0] for r in await cur.fetchall()]
    return [r[0] for r in got], fast, got.wait_s


def _ids(conn: psycopg.Connection, kind: str) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = %s", (kind,))}


def _claim_order(conn: psycopg.Connection) -> list[int]:
    """Every ready job's id in the claim order, across kinds."""
    rows = conn.execute(
        "SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL AND run_at <= now()"
        " AND NOT cancel_requested ORDER BY priority DESC, run_at, id"
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize("want", [1, 2, 3, 5, 8, 20])
async def test_mixed_priorities_give_exactly_the_merged_top_n(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, want: int
) -> None:
    """Fails before 0030 (the limited kind's jobs went first: with want 3, lim's three of
    priority 0-5 ahead of free's priority 9)."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=10)])
    prios = {"lim": [5, 0, 7, 3, 9, 1], "free": [9, 2, 6, 0, 4], "more": [8, 5, 1]}
    enqueue_many(
        conn, [{"kind": k, "payload": {}, "priority": p} for k, ps in prios.items() for p in ps]
    )
    top = _claim_order(conn)[:want]
    limited, fast, waits = await _claim_both(aconn, want, ["lim"], ["free", "more"])
    assert sorted(limited + fast) == sorted(top)
    kinds = dict(conn.execute("SELECT id, kind FROM jobs").fetchall())
    assert all(kinds[i] == "lim" for i in limited) and all(kinds[i] != "lim" for i in fast)
    # lim's picks are its first min(want, 6): any the merge held back are said with wait 0
    assert (waits.get("lim") == 0.0) == (len(limited) < min(want, 6)), waits


async def test_equal_priorities_go_by_run_at_then_id_across_kinds(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """One priority: the older run_at first whatever the kind, then the lower id (one batch
    shares a run_at); the claim takes them in that order, one slot at a time."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=10)])
    enqueue_many(
        conn,
        [
            {"kind": "free", "payload": {}, "delay": timedelta(seconds=-30)},
            {"kind": "lim", "payload": {}, "delay": timedelta(seconds=-20)},
        ],
    )
    enqueue_many(conn, [{"kind": k, "payload": {}} for k in ("lim", "free", "lim", "free")])
    expected = _claim_order(conn)
    taken: list[int] = []
    for _ in expected:
        limited, fast, _waits = await _claim_both(aconn, 1, ["lim"], ["free"])
        assert len(limited) + len(fast) == 1
        taken += limited + fast
    assert taken == expected
    assert await _claim_both(aconn, 1, ["lim"], ["free"]) == ([], [], {})


async def test_a_limited_kind_at_its_limit_holds_no_other_kind_back(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """`lim` (concurrency 1) has one running and higher priorities waiting: the slots go to
    `free`'s lower priorities, and lim is looked at again after the full poll, not at once."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 9} for _ in range(4)])
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 0} for _ in range(4)])
    first, fast, _ = await _claim_both(aconn, 1, ["lim"], ["free"])
    assert len(first) == 1 and fast == []
    limited, fast, waits = await _claim_both(aconn, 3, ["lim"], ["free"])
    assert limited == [] and len(fast) == 3
    assert waits["lim"] > 0  # the full poll's wait, not the merge's 0


async def test_limits_hold_with_other_kinds_behind(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """A rate (2 a minute) and a per-worker limit (1) with lower-priority other kinds: the
    merge lets the limited kinds claim first, never more than their limits."""
    await sync_kind_limits(
        aconn,
        S,
        [KindLimit("rated", rate=2, rate_period_s=60), KindLimit("pw", per_worker=1)],
    )
    enqueue_many(
        conn,
        [{"kind": k, "payload": {}, "priority": 9} for k in ("rated", "pw") for _ in range(5)],
    )
    enqueue_many(conn, [{"kind": "free", "payload": {}} for _ in range(10)])
    limited, fast, waits = await _claim_both(aconn, 10, ["pw", "rated"], ["free"])
    kinds = dict(conn.execute("SELECT id, kind FROM jobs").fetchall())
    assert sorted(kinds[i] for i in limited) == ["pw", "rated", "rated"]
    assert len(fast) == 7 and {kinds[i] for i in fast} == {"free"}
    assert waits["rated"] > 0
    again, _, _ = await _claim_both(aconn, 10, ["pw", "rated"], ["free"])
    assert again == []


async def test_cancelled_paused_or_limited_other_jobs_hold_nothing_back(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The peek takes what the fast claim would: not a cancel-requested job, not a paused
    kind's, not a kind that has a limit since the worker last looked, not one due later."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5), KindLimit("now", rate=9)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0}])
    enqueue_many(
        conn,
        [
            {"kind": "cancelled", "payload": {}, "priority": 9},
            {"kind": "paused", "payload": {}, "priority": 9},
            {"kind": "now", "payload": {}, "priority": 9},
            {"kind": "later", "payload": {}, "priority": 9, "delay": timedelta(hours=1)},
        ],
    )
    conn.execute("UPDATE jobs SET cancel_requested = true WHERE kind = 'cancelled'")
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('paused', 't')")
    others = ["cancelled", "later", "now", "paused"]
    limited, fast, waits = await _claim_both(aconn, 1, ["lim"], others)
    assert len(limited) == 1 and fast == [] and waits == {}


async def test_without_other_kinds_nothing_changes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """No other kinds (or an old caller's four arguments): 0029's claim."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": p} for p in (0, 3, 1)])
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 9}])
    lims = [i for i in _claim_order(conn) if i not in _ids(conn, "free")]
    got = await claim_limited(aconn, S, "w", ["lim"], 2)
    assert [r[0] for r in got] == lims[:2] and got.wait_s == {}
    rows = await (
        await aconn.execute(
            "SELECT id FROM jobtui_claim_limited(ARRAY['lim'], 'w2', 5, 1.0) WHERE id IS NOT NULL"
        )
    ).fetchall()
    assert [r[0] for r in rows] == lims[2:]


async def test_a_worker_with_one_slot_runs_the_higher_priority_first_across_kinds(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """One slot, `lim` (concurrency 5) at priority 0 and `free` (no limit) at priority 9, then
    more of both at once: each turn runs the head of the one claim order. The held-back lim
    jobs run at the turn after the last free one, not after the polling interval (30 s here):
    fails before 0030 (lim first), and without its wait-0 row (lim after the poll)."""
    reg = Registry()
    ran: list[tuple[str, float]] = []

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        ran.append(("lim", time.monotonic()))

    @reg.handler("free")
    async def free(payload: Any) -> None:
        await asyncio.sleep(0.05)
        ran.append(("free", time.monotonic()))

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0} for _ in range(2)])
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 9} for _ in range(2)])
    async with running_worker(dsn, reg, concurrency=1, poll_interval=30.0):
        await wait_until(lambda: len(ran) == 4, timeout=15, what="4 jobs run")
    assert [k for k, _ in ran] == ["free", "free", "lim", "lim"], ran
    assert ran[2][1] - ran[1][1] < 3.0, ran  # the next turn, far below the 30 s poll


async def test_concurrent_merged_claims_keep_the_limit_and_take_each_job_once(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Four claim loops, each on its own connection, as four workers handling `lim`
    (concurrency 3) and `free` with mixed priorities: lim never has more than 3 running, no job
    is claimed twice, and every job is claimed."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=3)])
    enqueue_many(
        conn,
        [
            {"kind": k, "payload": {}, "priority": (i * 7) % 5}
            for k in ("lim", "free")
            for i in range(60)
        ],
    )
    taken: list[int] = []
    worst = 0

    async def loop(n: int) -> None:
        nonlocal worst
        worker = f"w{n}"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            idle = 0
            while idle < 20:
                got = await claim_limited(c, S, worker, ["lim"], 3, ["free"])
                cur = await c.execute(
                    queries(S).worker_claim_per_kind,
                    {"kinds": ["lim", "free"], "worker": worker, "limit": 3 - len(got)},
                )
                ids = [r[0] for r in got] + [r[0] for r in await cur.fetchall()]
                running = await (
                    await c.execute(
                        "SELECT count(*) FROM jobs WHERE kind = 'lim'"
                        " AND locked_at IS NOT NULL AND finished_at IS NULL"
                    )
                ).fetchone()
                assert running is not None
                worst = max(worst, running[0])
                taken.extend(ids)
                idle = idle + 1 if not ids else 0
                await asyncio.sleep(0.002)
                await c.execute("UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)", (ids,))

    await asyncio.gather(*(loop(n) for n in range(4)))
    assert worst <= 3
    assert len(taken) == len(set(taken)) == 120


async def test_the_peek_walks_each_other_kinds_index_and_stops_after_want_rows(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """20,000 ready jobs of `free` beside `lim`: the peek reads jobs_claim_kind for `free` in
    its order and stops after `want` rows; no Sort reads the backlog."""
    enqueue_many(conn, [{"kind": "free"} for _ in range(20_000)])
    enqueue_many(conn, [{"kind": "lim"} for _ in range(10)])
    conn.execute("ANALYZE jobs")
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    nodes = await limited_claim_plan_nodes(aconn, "lim", 5, ["free"])
    scans = [n for n in nodes if n.get("Index Name") == "jobs_claim_kind"]
    assert scans and all(n["Actual Rows"] <= 5 for n in scans), scans
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(n["Actual Rows"] <= 5 for n in sorts), sorts
    # free's 20,000 came first (one priority, an earlier run_at): they take the 5 slots
    assert conn.execute("SELECT count(*) FROM jobs WHERE locked_by = 'w'").fetchone() == (0,)
