"""Second attack pass on migration 0029 (a limited kind's jobs claimed in the claim order of
every kind, priority DESC, run_at, id): NULL priorities, extreme priorities, a rate-limited
kind under a flood of higher priorities, why and the Jobs tab against the claim.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until
from test_claim_tie_order import places_and_turns

from benchmarks.article import ARTICLE_DDL
from jobtui import enqueue, enqueue_many
from jobtui.browse import list_jobs
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.models import JobFilter
from jobtui.registry import Registry
from jobtui.schema import MigrationRefused, migrate

S = "public"


@pytest.mark.parametrize(
    "column", ["priority int", "cancel_requested boolean", "created_at timestamptz"]
)
def test_an_article_table_with_a_nullable_column_jobtui_needs_not_null_is_refused(
    empty_dsn: str, column: str
) -> None:
    """An article table that already has `priority int` (nullable, no default) was accepted and
    kept it so: `ADD COLUMN IF NOT EXISTS priority int not null default 0` is skipped. The
    article's producer (`INSERT INTO jobs (kind, payload)`) then stored NULL priorities, which
    `priority DESC` sorts first: both claims (a limited kind's too since 0029) took them ahead
    of every priority while `jobtui jobs why` (`priority > %s`, `priority = %s`) counted none
    of them and put each NULL job first. A NULL cancel_requested kept a job from ever being
    claimed (`NOT cancel_requested`). The migrator refuses such a table, nothing changed."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute(f"ALTER TABLE jobs ADD COLUMN {column}")
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
        name = column.split()[0]
        with pytest.raises(MigrationRefused, match=f"column {name} allows NULL"):
            migrate(conn, "public")
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
        assert tables == (1,)


async def test_a_worker_with_one_slot_fills_it_in_the_claim_order_of_all_its_kinds(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The console's docs said the Jobs tab's order (one claim order over every kind) is "the
    order the workers take them, in a kind with a limit too". Not across kinds, until 0030: a
    worker with one slot handling `lim` (concurrency 5) and `free` (no limit) ran `lim`'s jobs
    of priority 0 before `free`'s of priority 9, as its claim called claim_limited first with
    every free slot (jobtui/worker/dispatcher.py). Since 0030 the limited claim leaves a slot
    to a job of the worker's other kinds ahead in the claim order: `free` first, then `lim`.
    Fails before 0030 (ran was ["lim", "lim", "free", "free"])."""
    reg = Registry()
    ran: list[str] = []

    @reg.handler("lim", concurrency=5)
    async def lim(payload: Any) -> None:
        ran.append("lim")

    @reg.handler("free")
    async def free(payload: Any) -> None:
        ran.append("free")

    await enqueue(aconn, "lim", {}, priority=0)
    await enqueue(aconn, "lim", {}, priority=0)
    await enqueue(aconn, "free", {}, priority=9)
    await enqueue(aconn, "free", {}, priority=9)
    async with running_worker(dsn, reg, concurrency=1):
        await wait_until(lambda: len(ran) == 4, what="4 jobs run")
    assert ran == ["free", "free", "lim", "lim"], ran


async def test_extreme_priorities_of_a_limited_kind_agree_in_claim_why_and_the_jobs_tab(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The int range's ends, 0 and -1 in one batch of a limited kind (concurrency 1), with a job
    of priority 2147483647 due in an hour (passed over) and an exhausted one: the Jobs tab's
    `state:ready` listing, paged two at a time (its cursor compares priorities), why's places
    and the claim's turns are one order."""
    top, bottom = 2**31 - 1, -(2**31)
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    prios = [0, bottom, top, -1, top, bottom, 0]
    enqueue_many(conn, [{"kind": "lim", "payload": {}, "priority": p} for p in prios])
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
    enqueue_many(
        conn,
        [
            {"kind": "lim", "payload": {}, "priority": top, "delay": timedelta(hours=1)},
            {"kind": "lim", "payload": {}, "priority": top},
        ],
    )
    later = [
        r[0] for r in conn.execute("SELECT id FROM jobs WHERE id > %s ORDER BY id", (ids[-1],))
    ]
    conn.execute("UPDATE jobs SET attempts = max_attempts WHERE id = %s", (later[1],))
    expected = [ids[2], ids[4], ids[0], ids[6], ids[3], ids[1], ids[5]]
    listed: list[int] = []
    before = None
    while True:
        page = await list_jobs(
            aconn, S, JobFilter(states=("ready",), kind="lim"), before=before, limit=2
        )
        listed += [r.id for r in page.rows]
        if page.next_before is None:
            break
        before = page.next_before
    assert listed == expected
    places, taken = await places_and_turns(aconn, [*ids, *later])
    assert taken == expected
    assert [places[i] for i in expected] == list(range(1, 8))
    assert places[later[0]] is None and places[later[1]] is None


async def test_future_higher_priorities_leave_the_rate_and_full_waits_as_they_were(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """200 jobs of priority 9 due in an hour head each kind's line in jobs_claim_kind. A kind
    limited to 3 a minute takes its 3 due jobs of priority 0 (lowest ids first) and says when
    its next token comes (20 s); a kind limited to 1 at once, at its limit: with only future
    jobs waiting it gives no "no room" row (nothing is ready), with a due one it does."""
    await sync_kind_limits(
        aconn, S, [KindLimit("r", rate=3, rate_period_s=60), KindLimit("c", concurrency=1)]
    )
    hour = timedelta(hours=1)
    future = [{"kind": k, "payload": {}, "priority": 9, "delay": hour} for k in "rc"] * 200
    enqueue_many(conn, future)
    start = conn.execute("SELECT max(id) FROM jobs").fetchone()[0]
    enqueue_many(conn, [{"kind": "r", "payload": {}} for _ in range(5)])
    enqueue_many(conn, [{"kind": "c", "payload": {}}])
    r_ids = [
        i
        for (i,) in conn.execute(
            "SELECT id FROM jobs WHERE id > %s AND kind = 'r' ORDER BY id", (start,)
        )
    ]
    got = await claim_limited(aconn, S, "w", ["r"], 10)
    assert sorted(g[0] for g in got) == r_ids[:3]
    assert 19 < got.wait_s["r"] <= 20.0
    first = await claim_limited(aconn, S, "w", ["c"], 10)
    assert len(first) == 1 and first.wait_s == {}
    none_ready = await claim_limited(aconn, S, "w", ["c"], 10)
    assert list(none_ready) == [] and none_ready.wait_s == {}
    enqueue_many(conn, [{"kind": "c", "payload": {}}])
    full = await claim_limited(aconn, S, "w", ["c"], 10)
    assert list(full) == [] and list(full.wait_s) == ["c"]


async def test_a_limited_kind_through_transaction_pooling_runs_in_claim_order_within_its_limit(
    tx_pooled_dsn: str, conn: psycopg.Connection
) -> None:
    """A worker connected through PgBouncer in transaction pooling (no prepared statements)
    with four slots and a kind limited to 1 at once: 30 jobs of priorities 0-2 enqueued before it
    starts, more than psycopg's prepare threshold of claims on its connections, run one at a
    time, highest priority first, then by id."""
    reg = Registry()
    ran: list[int] = []
    running = 0
    most = 0

    @reg.handler("lim", concurrency=1)
    async def lim(payload: Any) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.005)
        ran.append(payload["n"])
        running -= 1

    enqueue_many(
        conn,
        [{"kind": "lim", "payload": {"n": n}, "priority": n % 3} for n in range(30)],
    )
    async with running_worker(tx_pooled_dsn, reg, concurrency=4):
        await wait_until(lambda: len(ran) == 30, timeout=30, what="30 jobs run")
    assert most == 1
    assert ran == sorted(range(30), key=lambda n: (-(n % 3), n))
