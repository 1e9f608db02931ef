"""A limited kind's jobs are claimed in the claim order of every kind (priority DESC, run_at,
id; migration 0029): a higher priority first, and jobs that share a priority and a run_at (one
`enqueue_many` batch gets one now()) in id order; `why` places each where the claim then takes
it.

Before 0029 the limited claim walked jobs_pending_kind (kind, run_at): oldest first whatever the
priority, and among ties on run_at in the index's order, which is their heap order: a row that
was updated (a priority changed and set back, a retry, a release) moved to the end of its batch,
while why_position counted it by id.
"""

from __future__ import annotations

import psycopg
from test_limits import limited_claim_plan_nodes

from jobtui import enqueue_many
from jobtui.limits import KindLimit, claim_limited, sync_kind_limits
from jobtui.why import explain

S = "public"
N = 12


def _batch_out_of_heap_order(conn: psycopg.Connection) -> list[int]:
    """One enqueue_many batch of kind 'lim' whose lower half was updated (its new row versions
    now stand after the upper half in the heap and in jobs_pending_kind): its ids in order."""
    enqueue_many(conn, [{"kind": "lim", "payload": {"n": n}} for n in range(N)])
    rows = conn.execute("SELECT id, run_at FROM jobs WHERE kind = 'lim' ORDER BY id").fetchall()
    ids = [r[0] for r in rows]
    assert len({r[1] for r in rows}) == 1  # one run_at for the whole batch
    # A change of an indexed column is not a HOT update: each row gets a new version (and new
    # index entries) at the end of the heap. The second statement sets it back.
    lower = ids[: N // 2]
    conn.execute("UPDATE jobs SET priority = 1 WHERE id = ANY(%s)", (lower,))
    conn.execute("UPDATE jobs SET priority = 0 WHERE id = ANY(%s)", (lower,))
    heap = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = 'lim' ORDER BY ctid")]
    assert heap != ids, "the batch's heap order should differ from its id order"
    return ids


async def places_and_turns(
    aconn: psycopg.AsyncConnection, ids: list[int]
) -> tuple[dict[int, int | None], list[int]]:
    """why's place for each job of `ids` (kind 'lim', concurrency 1), then the order the
    limited claim takes them in, one a claim, each finished before the next, until it takes
    none."""
    places: dict[int, int | None] = {}
    for job_id in ids:
        answer = await explain(aconn, S, job_id)
        assert answer is not None
        places[job_id] = answer.position
    taken: list[int] = []
    while got := await claim_limited(aconn, S, "w", ["lim"], 1):
        assert len(got) == 1, got
        taken.append(got[0][0])
        await aconn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (got[0][0],))
    return places, taken


async def test_a_limited_kind_takes_a_batch_sharing_a_run_at_in_id_order_as_why_says(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Fails before 0029 (as first written, 44b333f, too): the claim took the batch's upper
    half first (heap order)."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    ids = _batch_out_of_heap_order(conn)
    conn.execute("ANALYZE jobs")
    places, taken = await places_and_turns(aconn, ids)
    assert taken == ids
    assert [places[job_id] for job_id in taken] == list(range(1, N + 1))


async def test_a_limited_claim_of_several_takes_the_lowest_ids_of_a_batch(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Room for 4: the 4 lowest ids of the batch, not the 4 first in the heap."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=4)])
    ids = _batch_out_of_heap_order(conn)
    got = await claim_limited(aconn, S, "w", ["lim"], 10)
    assert sorted(c[0] for c in got) == ids[:4]


async def test_a_higher_priority_job_of_a_limited_kind_is_claimed_first(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Fails before 0029 (the claim took [1, 2, 3, ...], oldest first): a batch of 6 with the
    5th at priority 5, then a job enqueued later at priority 9, then one at priority -1 before
    them all; concurrency 1. Claimed: 9, then 5, then the batch's 0s in id order, then -1, and
    why's place for each is the turn it is taken in."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    enqueue_many(conn, [{"kind": "lim", "priority": -1}])
    conn.execute("UPDATE jobs SET run_at = run_at - interval '1 minute'")  # the oldest
    enqueue_many(conn, [{"kind": "lim", "priority": 5 if n == 4 else 0} for n in range(6)])
    enqueue_many(conn, [{"kind": "lim", "priority": 9}])
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
    low, batch, late = ids[0], ids[1:7], ids[7]
    expected = [late, batch[4], *batch[:4], batch[5], low]
    places, taken = await places_and_turns(aconn, ids)
    assert taken == expected
    assert [places[job_id] for job_id in taken] == list(range(1, len(ids) + 1))


async def test_a_limited_claim_steps_over_future_jobs_of_a_higher_priority(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Jobs of priority 9 due in an hour stand first in jobs_claim_kind: the claim passes them
    over (as worker_claim does) and takes the due ones in order."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=3)])
    conn.execute(
        "INSERT INTO jobs (kind, payload, run_at, priority)"
        " SELECT 'lim', '{}', now() + interval '1 hour', 9 FROM generate_series(1, 50)"
    )
    enqueue_many(conn, [{"kind": "lim", "priority": n % 2} for n in range(6)])
    due = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE priority < 9 ORDER BY id")]
    got = await claim_limited(aconn, S, "w", ["lim"], 10)
    assert sorted(c[0] for c in got) == sorted([due[1], due[3], due[5]])


async def test_the_pick_walks_the_index_with_no_sort_of_a_batch_of_20000_ties(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """A batch of 20,000 sharing a run_at: the pick reads jobs_claim_kind in its order and
    stops after room.n rows; no Sort (or Incremental Sort) reads the batch."""
    enqueue_many(conn, [{"kind": "lim"} for _ in range(20_000)])
    conn.execute("ANALYZE jobs")
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    nodes = await limited_claim_plan_nodes(aconn, "lim", 5)
    got = conn.execute("SELECT id FROM jobs WHERE locked_by = 'w' ORDER BY id").fetchall()
    first = conn.execute("SELECT min(id) FROM jobs").fetchone()
    assert first is not None and [r[0] for r in got] == list(range(first[0], first[0] + 5))
    scans = [n for n in nodes if n.get("Index Name") == "jobs_claim_kind"]
    assert any(n["Actual Rows"] == 5 for n in scans), scans  # the pick (0 rows: the full check)
    assert all(n["Actual Rows"] <= 5 for n in scans), scans
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(n["Actual Rows"] <= 5 for n in sorts), sorts
