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


async def test_a_prepared_four_argument_claim_resolves_to_0030s_function_after_migrating(
    empty_dsn: str,
) -> None:
    """HELD. A 0029-code worker's connection has its four-argument claim prepared (psycopg
    prepares after five runs) when 0030 drops and recreates the function: its next runs are
    planned again and reach the new function through p_others' DEFAULT (no merge), without an
    error."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=29)
        conn.execute("INSERT INTO kind_limits (kind, declared_concurrency) VALUES ('lim', 50)")
        async with await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True) as a:
            a.prepare_threshold = 0  # prepared at once
            for _ in range(6):
                assert list(await claim_limited(a, S, "w", ["lim"], 1)) == []
            migrate(conn, S, up_to=30)
            enqueue_many(conn, [{"kind": "lim", "payload": {}}, {"kind": "hi", "payload": {}}])
            conn.execute("UPDATE jobs SET priority = 9 WHERE kind = 'hi'")
            got = await claim_limited(a, S, "w", ["lim"], 1)
            assert [r[1] for r in got] == ["lim"]  # four arguments: no merge, as 0029


async def test_the_worker_role_runs_the_merged_claim_and_its_peek(empty_dsn: str) -> None:
    """HELD. `jobtui roles` at 0029, then 0030: a login in the worker group calls the merged
    claim (EXECUTE stays granted to PUBLIC) and its peek reads paused_kinds, kind_limits and
    jobs of the other kind: lim's job is held back for hi's higher priority, then claimed."""
    import uuid

    from test_roles import _login

    from jobtui.roles import drop_roles_sql, roles_sql

    p = f"t{uuid.uuid4().hex[:8]}_"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, S, up_to=29)
        conn.execute(roles_sql(S, p))
        assert [m.version for m in migrate(conn, S)][-1] >= 30
        name = f"{p}login_worker"
        try:
            role_dsn = _login(conn, empty_dsn, p, "worker")
            enqueue_many(conn, [{"kind": "lim", "payload": {}}])
            enqueue_many(conn, [{"kind": "hi", "payload": {}, "priority": 9}])
            async with await psycopg.AsyncConnection.connect(role_dsn, autocommit=True) as a:
                await sync_kind_limits(a, S, [KindLimit("lim", concurrency=2)])
                got = await claim_limited(a, S, "w", ["lim"], 1, ["hi"])
                assert list(got) == [] and got.wait_s == {"lim": 0.0}
                got = await claim_limited(a, S, "w", ["lim"], 2, ["hi"])
                assert [r[1] for r in got] == ["lim"]
        finally:
            conn.execute(f"DROP OWNED BY {name}")
            conn.execute(f"DROP ROLE {name}")
            conn.execute(drop_roles_sql(p))


async def test_a_mixed_worker_through_transaction_pooling_runs_both_kinds_in_order(
    dsn: str, tx_pooled_dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. Behind PgBouncer in transaction mode, one slot: free's priority-9 jobs first,
    then lim's (the merged claim and its wait 0 through the pooler)."""
    reg = Registry()
    ran: list[str] = []

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        ran.append("lim")

    @reg.handler("free")
    async def free(payload: Any) -> None:
        await asyncio.sleep(0.02)
        ran.append("free")

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": 0} for _ in range(3)])
    enqueue_many(conn, [{"kind": "free", "payload": {}, "priority": 9} for _ in range(3)])
    async with running_worker(tx_pooled_dsn, reg, concurrency=1, poll_interval=30.0):
        await wait_until(lambda: len(ran) == 6, timeout=15, what="6 jobs run")
    assert ran == ["free"] * 3 + ["lim"] * 3


async def test_three_workers_with_overlapping_kinds_keep_limits_and_run_each_job_once(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """HELD. Workers {lim, free, held}, {lim} and {lim, free} run together over mixed
    priorities; `held` (priority 9) is paused and some of lim's and free's jobs have a cancel
    request: lim (concurrency 3, per worker 2) never runs more than that, no job runs twice,
    nothing paused or cancel-requested runs, everything else runs."""
    running: dict[str, int] = {}
    worst = {"all": 0}
    ran: list[int] = []

    def registry(kinds: tuple[str, ...], tag: str) -> Registry:
        reg = Registry()
        if "lim" in kinds:

            @reg.handler("lim", concurrency=3, per_worker=2)
            async def lim(payload: Any) -> None:
                running[tag] = running.get(tag, 0) + 1
                worst[tag] = max(worst.get(tag, 0), running[tag])
                worst["all"] = max(worst["all"], sum(running.values()))
                ran.append(payload["i"])
                await asyncio.sleep(0.01)
                running[tag] -= 1

        for kind in ("free", "held"):
            if kind in kinds:

                async def other(payload: Any) -> None:
                    ran.append(payload["i"])
                    await asyncio.sleep(0.002)

                reg.handler(kind)(other)
        return reg

    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=3, per_worker=2)])
    conn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('held', 'op')")
    specs = [
        {"kind": k, "payload": {"i": n}, "priority": (n * 7) % 5 + (9 if k == "held" else 0)}
        for n, k in enumerate(["lim"] * 150 + ["free"] * 300 + ["held"] * 20)
    ]
    enqueue_many(conn, specs)
    conn.execute(
        "UPDATE jobs SET cancel_requested = true WHERE (payload->>'i')::int % 17 = 0"
        " AND kind <> 'held'"
    )
    expected = {
        r[0]
        for r in conn.execute(
            "SELECT (payload->>'i')::int FROM jobs WHERE kind <> 'held' AND NOT cancel_requested"
        )
    }
    async with (
        running_worker(dsn, registry(("lim", "free", "held"), "a"), concurrency=4),
        running_worker(dsn, registry(("lim",), "b"), concurrency=4),
        running_worker(dsn, registry(("lim", "free"), "c"), concurrency=3),
    ):
        await wait_until(lambda: set(ran) >= expected, timeout=30, what="every job run")
        await asyncio.sleep(0.3)
    assert sorted(ran) == sorted(expected)  # once each, nothing paused or cancel-requested
    assert worst["all"] <= 3 and all(worst.get(t, 0) <= 2 for t in "abc"), worst


async def _read_without_statistics(
    dsn: str,
    free: int,
    lim: int,
    others: list[str] | None,
    at_limit: bool = False,
    scheduled: int = 0,
) -> list[tuple[Any, ...]]:
    """The scans of jobs in one limited claim of `lim` (concurrency 5, want 5), each as (node
    type, index, rows returned, rows removed by its filter), on a table loaded with `free`
    ready jobs of `free` (priority 5) and `lim` of `lim` (priority 0) and never analyzed
    (autovacuum off for it). `at_limit`: five `lim` jobs are running, so the claim has no room
    and only looks whether `lim` has a job ready (its p_full_poll_s row). `scheduled`: that
    many jobs of each kind at priority 9 due tomorrow, and the table analyzed. Each scan's
    buffers (hit + read) come last."""
    from test_limits import limited_claim_plan_nodes

    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, S)
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        conn.execute(
            "INSERT INTO jobs (kind, payload, priority)"
            " SELECT 'free', '{}'::jsonb, 5 FROM generate_series(1, %s)"
            " UNION ALL SELECT 'lim', '{}', 0 FROM generate_series(1, %s)",
            (free, lim),
        )
        if at_limit:
            conn.execute(
                "UPDATE jobs SET locked_at = now(), locked_by = 'x', attempts = 1"
                " WHERE id IN (SELECT id FROM jobs WHERE kind = 'lim' ORDER BY id LIMIT 5)"
            )
        if scheduled:
            conn.execute(
                "INSERT INTO jobs (kind, payload, priority, run_at)"
                " SELECT k, '{}', 9, now() + interval '1 day'"
                " FROM generate_series(1, %s), unnest(ARRAY['free', 'lim']) AS k",
                (scheduled,),
            )
            conn.execute("ANALYZE jobs")
        stats = "SELECT count(*) > 0 FROM pg_stats WHERE schemaname = %s AND tablename = 'jobs'"
        assert conn.execute(stats, (S,)).fetchone() == (bool(scheduled),)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as a:
        await sync_kind_limits(a, S, [KindLimit("lim", concurrency=5)])
        await a.execute("SET auto_explain.log_buffers = on")
        nodes = await limited_claim_plan_nodes(a, "lim", 5, others)
    return [
        (
            n["Node Type"],
            n.get("Index Name"),
            n.get("Actual Rows", 0),
            n.get("Rows Removed by Filter", 0),
            n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0),
        )
        for n in nodes
        if "Scan" in n["Node Type"] and n.get("Relation Name") == "jobs"
    ]


def _rows(scans: list[tuple[Any, ...]]) -> int:
    return sum(s[2] + s[3] for s in scans)


async def test_fault_without_statistics_the_merged_claim_reads_no_backlog(empty_dsn: str) -> None:
    """FAULT, fixed by migration 0031 (a strict xfail until then). 50,000 ready jobs of `free`
    and 10 of `lim` just loaded, never analyzed (before autovacuum comes by, or with it off):
    without statistics `IS NULL` is estimated to keep 0.5% of rows, 0030's generic plan
    expected about one row and walked jobs_pending (run_at) through the whole backlog,
    filtering on kind, in the pick and again in the peek: 100,020 rows read here. With 200,000
    rows of `free` and 2,000 of `lim` the merged claim took 78-143 ms, 0.5-1.1 after 0031.
    Tried and dropped: `run_at + interval '0'` (no index condition; fast at 200,000, still
    jobs_pending's full scan here); `SET enable_sort = off` alone (750-900 ms a claim: JIT, its
    plan's cost being over jit_above_cost), kept in 0031 with jit off."""
    scans = await _read_without_statistics(empty_dsn, 50_000, 10, ["free"])
    assert _rows(scans) <= 100, scans
    assert {s[1] for s in scans if s[2] + s[3]} == {"jobs_claim_kind"}, scans


async def test_fault_without_statistics_a_large_limited_backlog_is_not_read(
    empty_dsn: str,
) -> None:
    """FAULT, fixed by migration 0031. 50,000 ready jobs of the limited kind alone, never
    analyzed: 0030's pick walked jobs_pending over all of them and sorted them to claim 5
    (200,000 of them: 124-200 ms a claim; 0.7-0.8 ms after 0031)."""
    scans = await _read_without_statistics(empty_dsn, 0, 50_000, None)
    assert _rows(scans) <= 100, scans


async def test_fault_without_statistics_a_kind_at_its_limit_is_checked_in_one_entry(
    empty_dsn: str,
) -> None:
    """FAULT, fixed by migration 0031. `lim` at its concurrency limit beside 50,000 ready
    `free` jobs, never analyzed: 0030 looked whether `lim` has a job ready (to report
    p_full_poll_s) with an EXISTS the planner made a semi join over jobs_pending, reading every
    ready job of every kind (200,000 of them: 34-40 ms a claim; 0.6-0.7 ms after 0031)."""
    scans = await _read_without_statistics(empty_dsn, 50_000, 10, ["free"], at_limit=True)
    assert _rows(scans) <= 100, scans


async def test_held_with_statistics_scheduled_jobs_ahead_in_the_index_are_not_stepped_over(
    empty_dsn: str,
) -> None:
    """HELD (a guard for 0031's fix). 10 ready jobs of each kind at priority 0 behind 20,000
    of each at priority 9 due tomorrow, analyzed: the planner reads the few due rows
    (jobs_pending) and sorts them, where a walk of jobs_claim_kind would step over every
    scheduled entry first. A first 0031 planned the claim with enable_sort off always: 72
    buffers here became 258, and with 200,000 scheduled a kind 0.7-0.9 ms a claim became 19
    ms; 0031 keeps that setting to a table without statistics."""
    scans = await _read_without_statistics(empty_dsn, 10, 10, ["free"], scheduled=20_000)
    assert sum(s[4] for s in scans) <= 150, scans
