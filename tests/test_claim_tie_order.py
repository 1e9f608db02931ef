"""A limited kind's jobs that share a run_at (one `enqueue_many` batch gets one now()) are
claimed in id order, and `why` places each where the claim then takes it (migration 0029).

Before 0029 the limited claim walked jobs_pending_kind (kind, run_at) and took such jobs in the
index's order among the ties, which is their heap order: a row that was updated (a priority
changed and set back, a retry, a release) moved to the end of its batch, while why_position
counted it by id.
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


async def test_a_limited_kind_takes_a_batch_sharing_a_run_at_in_id_order_as_why_says(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """Fails before 0029: the claim took the batch's upper half first (heap order)."""
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=1)])
    ids = _batch_out_of_heap_order(conn)
    conn.execute("ANALYZE jobs")
    places = {}
    for job_id in ids:
        answer = await explain(aconn, S, job_id)
        assert answer is not None
        places[job_id] = answer.position
    taken = []
    for _ in ids:
        got = await claim_limited(aconn, S, "w", ["lim"], 1)
        assert len(got) == 1, got
        job_id = got[0][0]
        taken.append(job_id)
        await aconn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (job_id,))
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


async def test_the_pick_walks_the_index_with_no_sort_of_a_batch_of_20000_ties(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """A batch of 20,000 sharing a run_at: the pick reads jobs_pending_kind in its order and
    stops after room.n rows; no Sort (or Incremental Sort) reads the batch."""
    enqueue_many(conn, [{"kind": "lim"} for _ in range(20_000)])
    conn.execute("ANALYZE jobs")
    await sync_kind_limits(aconn, S, [KindLimit("lim", concurrency=5)])
    nodes = await limited_claim_plan_nodes(aconn, "lim", 5)
    got = conn.execute("SELECT id FROM jobs WHERE locked_by = 'w' ORDER BY id").fetchall()
    first = conn.execute("SELECT min(id) FROM jobs").fetchone()
    assert first is not None and [r[0] for r in got] == list(range(first[0], first[0] + 5))
    scans = [n for n in nodes if n.get("Index Name") == "jobs_pending_kind"]
    assert scans and all(n["Actual Rows"] <= 5 for n in scans), scans
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(n["Actual Rows"] <= 5 for n in sorts), sorts
