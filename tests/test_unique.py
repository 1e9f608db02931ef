"""Unique jobs against a real database: the index, racing producers, windows, batches, requeue."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import psycopg
import pytest

from jobtui import InvalidJob, JobSpec, enqueue, enqueue_many
from jobtui.enqueue import Enqueued
from jobtui.ops import Actor, requeue_dead, requeue_dead_keyed


def test_second_enqueue_returns_the_existing_job(conn: psycopg.Connection) -> None:
    first = enqueue(conn, "invoice", {"n": 1}, unique_key="invoice:42")
    second = enqueue(conn, "invoice", {"n": 2}, unique_key="invoice:42")
    other_kind = enqueue(conn, "receipt", {}, unique_key="invoice:42")
    other_key = enqueue(conn, "invoice", {}, unique_key="invoice:43")
    assert isinstance(first, Enqueued) and first.created
    assert second == first and not second.created
    assert other_kind.created and other_key.created and len({first, other_kind, other_key}) == 3
    rows = conn.execute(
        "SELECT payload FROM jobs WHERE unique_key = 'invoice:42' AND kind = 'invoice'"
    )
    assert [r[0] for r in rows] == [{"n": 1}]
    # The id works wherever an int does, parameters included.
    assert conn.execute("SELECT kind FROM jobs WHERE id = %s", (second,)).fetchone() == ("invoice",)


def test_a_finished_job_frees_its_key(conn: psycopg.Connection) -> None:
    first = enqueue(conn, "invoice", {}, unique_key="k")
    conn.execute("UPDATE jobs SET finished_at = now() WHERE id = %s", (first,))
    second = enqueue(conn, "invoice", {}, unique_key="k")
    assert second.created and second != first


def test_window_counts_recently_finished_jobs(conn: psycopg.Connection) -> None:
    first = enqueue(conn, "sync", {}, unique_key="acct:1")
    conn.execute(
        "UPDATE jobs SET finished_at = now() - interval '5 minutes' WHERE id = %s", (first,)
    )
    inside = enqueue(conn, "sync", {}, unique_key="acct:1", unique_window=timedelta(minutes=10))
    assert inside == first and not inside.created
    outside = enqueue(conn, "sync", {}, unique_key="acct:1", unique_window=timedelta(minutes=2))
    assert outside.created and outside != first


async def test_async_connection(aconn: psycopg.AsyncConnection) -> None:
    a = await enqueue(aconn, "webhook", {}, unique_key="u")
    b = await enqueue(aconn, "webhook", {}, unique_key="u", unique_window=timedelta(hours=1))
    assert a.created and b == a and not b.created


def _race(dsn: str, n: int, **options: object) -> list[Enqueued]:
    """`n` producers in separate transactions enqueue the same key at once; all commit."""
    barrier = threading.Barrier(n)

    def produce() -> Enqueued:
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT 1")  # transaction open before the race
            barrier.wait()
            job = enqueue(conn, "invoice", {}, unique_key="race", **options)
            time.sleep(0.05)  # hold the transaction open while the others arrive
            conn.commit()
            return job

    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(produce) for _ in range(n)]
        return [f.result() for f in futures]


@pytest.mark.parametrize("window", [None, timedelta(minutes=5)])
def test_concurrent_producers_make_exactly_one_job(
    dsn: str, conn: psycopg.Connection, window: timedelta | None
) -> None:
    results = _race(dsn, 8, unique_window=window)
    assert conn.execute("SELECT count(*) FROM jobs WHERE unique_key = 'race'").fetchone() == (1,)
    assert sum(r.created for r in results) == 1
    assert len(set(results)) == 1


def test_a_rolled_back_producer_leaves_the_key_free(dsn: str, conn: psycopg.Connection) -> None:
    with psycopg.connect(dsn) as first:
        enqueue(first, "invoice", {}, unique_key="rb")
        waiting: list[Enqueued] = []
        t = threading.Thread(
            target=lambda: waiting.append(enqueue(dsn, "invoice", {"second": 1}, unique_key="rb"))
        )
        t.start()
        time.sleep(0.3)
        assert not waiting, "the second producer must wait for the first"
        first.rollback()
    t.join()
    assert waiting[0].created
    assert conn.execute("SELECT payload FROM jobs").fetchall() == [({"second": 1},)]


def test_enqueue_many_with_keys(conn: psycopg.Connection) -> None:
    existing = enqueue(conn, "mail", {}, unique_key="m:0")
    result = enqueue_many(
        conn,
        [
            {"kind": "mail", "payload": {"i": 1}, "unique_key": "m:1"},
            {"kind": "mail", "payload": {"i": 2}},
            {"kind": "mail", "payload": {"i": 3}, "unique_key": "m:1"},  # duplicate in batch
            JobSpec("mail", {"i": 4}, unique_key="m:0"),  # already queued
            {"kind": "mail", "payload": {"i": 5}},
        ],
    )
    assert result == 3  # two keyless + m:1
    ids = result.ids
    assert ids[1] is None and ids[4] is None
    assert ids[0] is not None and ids[0].created
    assert ids[2] == ids[0] and ids[2] is not None and not ids[2].created
    assert ids[3] == existing and ids[3] is not None and not ids[3].created
    payloads = {r[0]["i"] for r in conn.execute("SELECT payload FROM jobs WHERE payload ? 'i'")}
    assert payloads == {1, 2, 5}


async def test_enqueue_many_with_keys_async(aconn: psycopg.AsyncConnection) -> None:
    jobs = [
        {"kind": "k", "unique_key": f"u{i % 3}", "unique_window": timedelta(1)} for i in range(7)
    ]
    result = await enqueue_many(aconn, jobs)
    assert result == 3 and [bool(r and r.created) for r in result.ids] == [True] * 3 + [False] * 4


def test_concurrent_batches_on_overlapping_keys_do_not_deadlock(
    dsn: str, conn: psycopg.Connection
) -> None:
    keys = [f"k{i}" for i in range(200)]
    orders = [keys, list(reversed(keys)), keys[100:] + keys[:100]]
    barrier = threading.Barrier(len(orders))

    def produce(order: list[str]) -> None:
        with psycopg.connect(dsn) as c:
            barrier.wait()
            enqueue_many(c, [{"kind": "k", "unique_key": k} for k in order])
            c.commit()

    with ThreadPoolExecutor(len(orders)) as pool:
        for future in [pool.submit(produce, o) for o in orders]:
            future.result()  # a deadlock would raise here
    assert conn.execute("SELECT count(*), count(DISTINCT unique_key) FROM jobs").fetchone() == (
        200,
        200,
    )


def test_keyless_batches_still_return_a_count(conn: psycopg.Connection) -> None:
    result = enqueue_many(conn, [{"kind": "plain"} for _ in range(5)])
    assert result == 5 and result.ids == [None] * 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unique_key": ""}, "non-empty"),
        ({"unique_key": "a\x00b"}, "NUL"),
        ({"unique_key": "x" * 1001}, "longer than"),
        ({"unique_window": timedelta(minutes=1)}, "needs a unique_key"),
        ({"unique_key": "k", "unique_window": timedelta(0)}, "positive"),
    ],
)
def test_bad_keys_are_refused(conn: psycopg.Connection, options: dict, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        enqueue(conn, "k", {}, **options)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


async def test_requeued_dead_letter_whose_key_is_taken_stays_dead(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    for job_id, key in ((101, "free"), (102, "taken")):
        conn.execute(
            """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                                         run_at, reason, unique_key)
               VALUES (%s, 'invoice', '{}', 5, 5, now(), now(), 'failed', %s)""",
            (job_id, key),
        )
    holder = enqueue(conn, "invoice", {}, unique_key="taken")
    outcome = await requeue_dead_keyed(aconn, "public", [101, 102], actor=Actor("op@host"))
    assert outcome.requeued == [101] and outcome.skipped == [102]
    rows = conn.execute("SELECT id, unique_key FROM jobs").fetchall()
    assert sorted(rows) == sorted([(101, "free"), (holder, "taken")])
    assert conn.execute("SELECT id FROM dead_letters").fetchall() == [(102,)]
    audit = conn.execute("SELECT action, count, filter FROM audit_log").fetchall()
    assert audit == [("requeue_dead", 1, {"skipped_key_taken": [102]})]


async def test_requeue_racing_a_producer_puts_the_dead_letter_back(
    dsn: str, aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The producer takes the key after the requeue's snapshot: the INSERT conflicts, and the
    same statement puts the row back in dead letters, history and time of death unchanged."""
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                                     run_at, reason, unique_key, errors, died_at)
           VALUES (9, 'invoice', '{"a": 1}', 5, 5, now(), now(), 'failed', 'k',
                   '[{"attempt": 5}]', '2026-01-01T00:00:00Z')"""
    )
    before = conn.execute("SELECT * FROM dead_letters").fetchall()
    with psycopg.connect(dsn) as producer:
        enqueue(producer, "invoice", {}, unique_key="k")  # not committed yet
        task = asyncio.create_task(requeue_dead_keyed(aconn, "public", [9], actor=Actor("op@host")))
        await asyncio.sleep(0.3)
        assert not task.done(), "the requeue must wait for the producer's key"
        producer.commit()
    outcome = await task
    assert outcome.requeued == [] and outcome.skipped == [9]
    assert conn.execute("SELECT * FROM dead_letters").fetchall() == before
    assert conn.execute("SELECT count(*) FROM jobs WHERE id = 9").fetchone() == (0,)


async def test_plain_requeue_never_violates_the_index(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection
) -> None:
    """The plain requeue uses the keyed statement: a dead letter whose key is held stays a
    dead letter (skipped), so the unique index is never violated."""
    conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
                                     run_at, reason, unique_key)
           VALUES (7, 'invoice', '{}', 5, 5, now(), now(), 'failed', 'taken')"""
    )
    enqueue(conn, "invoice", {}, unique_key="taken")
    assert await requeue_dead(aconn, "public", [7], actor=Actor("op@host")) == 0
    assert conn.execute("SELECT id FROM dead_letters").fetchall() == [(7,)]


def test_the_result_prints_like_the_plain_id(conn: psycopg.Connection) -> None:
    job = enqueue(conn, "k", {}, unique_key="p")
    assert (str(job), repr(job), f"{job}") == (str(int(job)),) * 3


async def test_the_key_goes_with_the_job_into_dead_letters_by_every_path(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    """Migration 0006: jobtui_move_to_dead copies unique_key: a last failed attempt (worker
    bury), a lost worker's last attempt (rescue) and a row another consumer exhausted (sweep)."""
    from apps.helpers import fetchall, running_worker, wait_until

    from jobtui.registry import Registry

    reg = Registry()

    @reg.handler("fails", max_attempts=1)
    async def fails(payload: object) -> None:
        raise RuntimeError("no")

    buried = enqueue(conn, "fails", {}, unique_key="bury:1")
    swept = enqueue(conn, "other_app_kind", {}, unique_key="sweep:1", max_attempts=1)
    conn.execute("UPDATE jobs SET attempts = 1 WHERE id = %s", (swept,))
    lost = enqueue(conn, "fails", {}, unique_key="lost:1", max_attempts=1)
    conn.execute(
        "UPDATE jobs SET attempts = 1, max_attempts = 1, locked_at = now(), "
        "locked_by = 'gone-worker' WHERE id = %s",
        (lost,),
    )
    async with running_worker(dsn, reg, prune_interval=0.2):

        async def three() -> bool:
            rows = await fetchall(aconn, "SELECT count(*) FROM dead_letters")
            return rows[0][0] == 3

        await wait_until(three, what="three dead letters")
    rows = conn.execute("SELECT id, unique_key, reason FROM dead_letters ORDER BY id").fetchall()
    assert sorted(rows) == sorted(
        [
            (buried, "bury:1", "failed"),
            (swept, "sweep:1", "exhausted by another consumer"),
            (lost, "lost:1", "worker_lost"),
        ]
    )
