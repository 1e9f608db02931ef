"""Per-kind limits against a real database: concurrent claimers, rates, other kinds, overrides."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import psycopg
import pytest

from jobtui import enqueue_many
from jobtui.limits import (
    InvalidLimit,
    KindLimit,
    claim_limited,
    limited_kinds,
    list_kind_limits,
    parse_rate,
    sync_kind_limits,
)
from jobtui.ops import Actor, InvalidAction, clear_kind_limits, set_kind_limits
from jobtui.sql import queries

S = "public"


async def _connect(dsn: str, n: int) -> list[psycopg.AsyncConnection]:
    return [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(n)]


async def _finish(conn: psycopg.AsyncConnection, job_id: int) -> None:
    await conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (job_id,))


async def statement_plan_nodes(
    aconn: psycopg.AsyncConnection, sql: str, params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every plan node (EXPLAIN ANALYZE's, as JSON) of one statement and of the queries of the
    functions it calls, whose inner plans EXPLAIN does not show: auto_explain sends them to
    this session as LOG messages."""
    plans: list[str] = []
    aconn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    try:
        await aconn.execute("LOAD 'auto_explain'")
    except psycopg.errors.UndefinedFile:
        pytest.skip("this PostgreSQL has no auto_explain (the embedded server's build ships none)")
    for setting in (
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_analyze = on",
        "SET auto_explain.log_format = 'json'",
        "SET client_min_messages = log",
    ):
        await aconn.execute(setting)
    await aconn.execute(sql, params)
    await aconn.execute("SET client_min_messages = notice")

    def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]

    return [
        n
        for text in plans
        if '"Plan"' in text
        for n in nodes(json.loads(text[text.index("{") :])["Plan"])
    ]


async def limited_claim_plan_nodes(
    aconn: psycopg.AsyncConnection, kind: str, want: int, others: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every plan node of one limited claim of `kind` by worker 'w' (told the worker's `others`
    kinds, if given). The claim is one function call (migration 0023)."""
    params = {"kinds": [kind], "worker": "w", "want": want, "full_poll_s": 0.05}
    if others is None:
        return await statement_plan_nodes(aconn, queries(S).limits_claim_own, params)
    return await statement_plan_nodes(
        aconn, queries(S).limits_claim, {**params, "others": others}
    )


async def test_concurrency_limit_of_three_is_never_exceeded(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(aconn, S, [KindLimit("slow", concurrency=3)])
    enqueue_many(conn, [{"kind": "slow"} for _ in range(120)])
    workers = await _connect(dsn, 4)
    observer = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    ledger: list[tuple[float, float]] = []  # (start, end) as the handlers saw them
    observed: list[int] = []
    stop = asyncio.Event()

    async def work(i: int, wconn: psycopg.AsyncConnection) -> None:
        rng = random.Random(i)
        while not stop.is_set():
            rows = await claim_limited(wconn, S, f"w{i}", ["slow"], 5)
            if not rows:
                await asyncio.sleep(0.002)
                continue
            for job_id, *_ in rows:
                start = time.monotonic()  # after the claim committed
                await asyncio.sleep(rng.uniform(0.005, 0.03))
                end = time.monotonic()  # before the finish commits
                ledger.append((start, end))
                await _finish(wconn, job_id)

    async def watch() -> None:
        while not stop.is_set():
            cur = await observer.execute(
                "SELECT count(*) FROM jobs WHERE kind = 'slow' AND locked_at IS NOT NULL"
                " AND finished_at IS NULL"
            )
            observed.append((await cur.fetchone())[0])

    async def until_done() -> None:
        while True:
            cur = await aconn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NULL")
            if (await cur.fetchone())[0] == 0:
                break
            await asyncio.sleep(0.05)
        stop.set()

    try:
        await asyncio.wait_for(
            asyncio.gather(until_done(), watch(), *(work(i, w) for i, w in enumerate(workers))),
            timeout=60,
        )
    finally:
        for c in [*workers, observer]:
            await c.close()
    events = sorted([(s, 1) for s, _ in ledger] + [(e, -1) for _, e in ledger])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert len(ledger) == 120
    assert peak <= 3 and max(observed) <= 3
    assert peak == 3, "the limit should also be reached, or the test proves little"


async def test_rate_limit_holds_within_its_bound(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    rate, seconds = 20, 3.0
    await sync_kind_limits(aconn, S, [KindLimit("api", rate=rate, rate_period_s=1)])
    enqueue_many(conn, [{"kind": "api"} for _ in range(1000)])
    workers = await _connect(dsn, 3)
    starts: list[float] = []
    t0 = time.monotonic()

    async def work(i: int, wconn: psycopg.AsyncConnection) -> None:
        while time.monotonic() - t0 < seconds:
            rows = await claim_limited(wconn, S, f"w{i}", ["api"], 10)
            now = time.monotonic()
            starts.extend(now for _ in rows)
            wait = min(rows.wait_s.values(), default=0.005)
            await asyncio.sleep(min(wait, 0.05))

    try:
        await asyncio.gather(*(work(i, w) for i, w in enumerate(workers)))
    finally:
        for c in workers:
            await c.close()
    # The bucket is kept on the server's clock (statement_timestamp), so the windows are
    # judged on the claims' own locked_at: a response held back by a loaded client would
    # bunch the client's clock readings into a window the server never saw.
    server = [
        r[0]
        for r in conn.execute(
            "SELECT extract(epoch FROM locked_at)::float8 FROM jobs"
            " WHERE locked_at IS NOT NULL ORDER BY 1"
        )
    ]
    assert len(server) == len(starts)
    # Bound: a full bucket (rate) plus rate per second elapsed between first and last claim.
    elapsed = server[-1] - server[0]
    assert len(server) <= rate + rate * elapsed + 1
    assert len(server) >= rate * seconds * 0.8
    for s in server:  # any one-second window: at most 2 × rate (burst + refill)
        assert sum(1 for x in server if s <= x < s + 1.0) <= 2 * rate


async def test_a_kind_at_its_limit_does_not_stall_others(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(
        aconn, S, [KindLimit("full", concurrency=1), KindLimit("roomy", concurrency=50)]
    )
    enqueue_many(conn, [{"kind": k} for k in ("full", "full", "roomy", "roomy", "free", "free")])
    first = await claim_limited(aconn, S, "w1", ["full"], 5)
    assert [r[1] for r in first] == ["full"]
    both = await claim_limited(aconn, S, "w1", ["full", "roomy"], 5)
    assert sorted(r[1] for r in both) == ["roomy", "roomy"]
    # The fast claim takes unlimited kinds, with the limited ones left out of its list.
    unlimited = sorted({"full", "roomy", "free"} - await limited_kinds(aconn, S))
    cur = await aconn.execute(
        queries(S).worker_claim,
        {"kinds": unlimited, "worker": "w2", "limit": 10, "limits": "{}"},
    )
    assert sorted(r[1] for r in await cur.fetchall()) == ["free", "free"]


async def test_a_kind_being_claimed_elsewhere_is_skipped_not_waited_for(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(aconn, S, [KindLimit("a", concurrency=5), KindLimit("b", rate=100)])
    enqueue_many(conn, [{"kind": "a"}, {"kind": "b"}])
    with psycopg.connect(dsn) as other:
        other.execute("SELECT 1 FROM kind_limits WHERE kind = 'a' FOR UPDATE")
        started = time.monotonic()
        rows = await claim_limited(aconn, S, "w1", ["a", "b"], 5)
        assert time.monotonic() - started < 1.0
        assert [r[1] for r in rows] == ["b"] and rows.skipped == ["a"]


async def test_per_worker_limit_and_paused_kinds(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(aconn, S, [KindLimit("pw", per_worker=2)])
    enqueue_many(conn, [{"kind": "pw"} for _ in range(10)])
    assert len(await claim_limited(aconn, S, "w1", ["pw"], 5)) == 2
    assert len(await claim_limited(aconn, S, "w1", ["pw"], 5)) == 0
    assert len(await claim_limited(aconn, S, "w2", ["pw"], 5)) == 2
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('pw', 'op')")
    assert len(await claim_limited(aconn, S, "w3", ["pw"], 5)) == 0


async def test_rate_reports_when_the_next_token_comes(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(aconn, S, [KindLimit("m", rate=2, rate_period_s=60)])
    enqueue_many(conn, [{"kind": "m"} for _ in range(5)])
    rows = await claim_limited(aconn, S, "w1", ["m"], 5)
    assert len(rows) == 2 and 29 < rows.wait_s["m"] <= 30.0


async def test_overrides_are_audited_and_show_where_limits_came_from(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    actor = Actor("op@host")
    await sync_kind_limits(aconn, S, [KindLimit("k", concurrency=5, rate=100, rate_period_s=60)])
    assert await set_kind_limits(aconn, S, "k", concurrency=2, actor=actor) == 1
    [row] = await list_kind_limits(aconn, S)
    assert (row.concurrency, row.rate, row.overridden, row.overridden_by) == (
        2,
        None,
        True,
        actor.os_user,
    )
    assert (row.declared_concurrency, row.declared_rate, row.declared_period_s) == (5, 100, 60)
    # A new declaration does not undo the operator's override.
    await sync_kind_limits(aconn, S, [KindLimit("k", concurrency=7)])
    assert (await list_kind_limits(aconn, S))[0].concurrency == 2
    assert await clear_kind_limits(aconn, S, "k", actor=actor) == 1
    assert await clear_kind_limits(aconn, S, "k", actor=actor) == 0
    [row] = await list_kind_limits(aconn, S)
    assert (row.concurrency, row.rate, row.overridden) == (7, None, False)
    # Lifting every limit by override takes the kind out of the limited set.
    await set_kind_limits(aconn, S, "k", actor=actor)
    assert await limited_kinds(aconn, S) == set()
    with pytest.raises(InvalidAction, match="concurrency"):
        await set_kind_limits(aconn, S, "k", concurrency=0, actor=actor)
    audit = conn.execute("SELECT action, count FROM audit_log ORDER BY id").fetchall()
    assert audit == [
        ("set_kind_limits", 1),
        ("clear_kind_limits", 1),
        ("clear_kind_limits", 0),
        ("set_kind_limits", 1),
    ]


def test_declarations() -> None:
    assert KindLimit.declared("k", concurrency=5, rate="100/m") == KindLimit("k", 5, None, 100, 60)
    assert KindLimit.declared("k", rate=7).rate_period_s == 1
    assert not KindLimit("k").limited
    with pytest.raises(InvalidLimit, match="per_worker"):
        KindLimit("k", per_worker=0)


def test_parse_rate() -> None:
    assert parse_rate("100/m") == (100, 60) and parse_rate(" 5 / s ") == (5, 1)
    for bad in ("100", "0/s", "5/h", "x/s"):
        with pytest.raises(InvalidLimit):
            parse_rate(bad)


async def test_limited_claim_reads_only_its_own_kind_of_a_large_backlog(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """With few kinds the planner once walked jobs_pending past the other kind's backlog."""
    enqueue_many(conn, [{"kind": "bulk"} for _ in range(20_000)])
    enqueue_many(conn, [{"kind": "slow"} for _ in range(20)])
    conn.execute("ANALYZE jobs")
    await sync_kind_limits(aconn, S, [KindLimit("slow", concurrency=5)])
    nodes = await limited_claim_plan_nodes(aconn, "slow", 5)
    claimed = conn.execute("SELECT count(*) FROM jobs WHERE locked_by = 'w'").fetchone()
    assert claimed == (5,)
    scans = [n for n in nodes if n.get("Relation Name") == "jobs"]
    assert scans
    assert all(n.get("Rows Removed by Filter", 0) < 100 for n in scans), scans
    assert any(n.get("Index Name") == "jobs_claim_kind" for n in scans)


async def test_per_kind_fast_claim_leaves_out_limited_and_paused_kinds_in_claim_order(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=9)])
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('paused', 'op')")
    jobs = [{"kind": k, "priority": p} for k in ("a", "b", "lim", "paused") for p in (0, 5)]
    enqueue_many(conn, jobs)
    cur = await aconn.execute(
        queries(S).worker_claim_per_kind,
        {"kinds": ["a", "b", "lim", "paused"], "worker": "w", "limit": 3, "limits": "{}"},
    )
    assert len(await cur.fetchall()) == 3
    # Both priority-5 rows first, then the oldest priority-0 row (same run_at: lowest id).
    claimed = conn.execute("SELECT kind, priority FROM jobs WHERE locked_by = 'w'").fetchall()
    assert sorted(claimed) == [("a", 0), ("a", 5), ("b", 5)]
