"""Workers that die: SIGKILLed subprocesses, rescue by heartbeat, rows locked by the article's
consumer, and a randomised run of several workers with failing handlers."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from typing import Any

import psycopg
import pytest
from apps import basic
from apps.fleet import Procs, ledger_fixture, procs_fixture  # noqa: F401 - fixtures
from apps.helpers import fetchall, fetchval, running_worker, wait_until

from jobtui import enqueue, enqueue_many
from jobtui.registry import Registry
from jobtui.worker import current_job


async def ledger_rows(aconn: psycopg.AsyncConnection, job_id: int) -> list[Any]:
    return await fetchall(
        aconn,
        "SELECT attempt, pid, worker, started_at, ended_at FROM ledger WHERE job_id = %s "
        "ORDER BY entry",
        (job_id,),
    )


async def started_attempt(aconn: psycopg.AsyncConnection, job_id: int, attempt: int) -> bool:
    return bool(
        await fetchval(
            aconn,
            "SELECT 1 FROM ledger WHERE job_id = %s AND attempt = %s",
            (job_id, attempt),
        )
    )


@pytest.mark.slow
async def test_sigkilled_worker_job_runs_again_never_concurrently_nothing_lost(
    dsn: str, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    job_id = await enqueue(aconn, "sleepy", {"sleeps": [30, 0.2]})
    other = await enqueue(aconn, "quick", {})
    victim = procs.start()
    await wait_until(lambda: started_attempt(aconn, job_id, 1), timeout=15, what="first run")
    victim.send_signal(signal.SIGKILL)
    victim.wait(5)
    killed_at = await fetchval(aconn, "SELECT clock_timestamp()")
    # The dead worker still holds the job; its row in `workers` stops heartbeating.
    row = await fetchall(aconn, "SELECT attempts, locked_by FROM jobs WHERE id = %s", (job_id,))
    assert row[0][0] == 1 and row[0][1] is not None
    async with running_worker(
        dsn, basic.registry, heartbeat_interval=0.2, heartbeat_timeout=2.0
    ) as rescuer:
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ),
            timeout=15,
            what="the job to run again and finish",
        )
    runs = await ledger_rows(aconn, job_id)
    assert [r[0] for r in runs] == [1, 2]
    assert runs[0][1] == victim.pid and runs[0][4] is None  # killed mid-job
    assert runs[1][2] == rescuer.id and runs[1][4] is not None
    assert runs[1][3] >= killed_at, "the second run started only after the first worker died"
    job = await fetchall(
        aconn,
        "SELECT attempts, cancelled_at, errors FROM jobs WHERE id = %s",
        (job_id,),
    )
    attempts, cancelled_at, errors = job[0]
    assert attempts == 2 and cancelled_at is None
    assert len(errors) == 1 and errors[0]["attempt"] == 1
    assert errors[0]["error"].startswith("WorkerLost:")
    assert errors[0]["worker"] == runs[0][2]
    # Nothing lost: both jobs are finished, nothing dead, the dead worker's row was not needed.
    assert (
        await fetchval(
            aconn,
            "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL AND id = ANY(%s)",
            ([job_id, other],),
        )
        == 2
    )
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0


@pytest.mark.slow
async def test_a_job_that_kills_its_worker_every_time_ends_dead_worker_lost(
    dsn: str, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    job_id = await enqueue(aconn, "sleepy", {"sleeps": [30]}, max_attempts=2)
    for attempt in (1, 2):
        proc = procs.start()
        await wait_until(
            lambda a=attempt: started_attempt(aconn, job_id, a),
            timeout=15,
            what=f"attempt {attempt}",
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
    # A worker that does not even handle the kind rescues it: no attempt left, so dead.
    reg = Registry()

    @reg.handler("unrelated")
    async def unrelated(payload: Any) -> None:
        return None

    async with running_worker(dsn, reg, heartbeat_timeout=1.0):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM dead_letters"),
            timeout=10,
            what="dead letter",
        )
    dead = await fetchall(
        aconn, "SELECT id, attempts, max_attempts, reason, errors FROM dead_letters"
    )
    assert len(dead) == 1
    did, attempts, max_attempts, reason, errors = dead[0]
    assert (did, attempts, max_attempts, reason) == (job_id, 2, 2, "worker_lost")
    assert [e["attempt"] for e in errors] == [1, 2]
    assert all(e["error"].startswith("WorkerLost:") for e in errors)
    assert await fetchval(aconn, "SELECT count(*) FROM jobs") == 0
    assert [r[0] for r in await ledger_rows(aconn, job_id)] == [1, 2]


@pytest.mark.slow
async def test_sigterm_drains_the_subprocess_and_unregisters(
    dsn: str, aconn: psycopg.AsyncConnection, ledger: str, procs: Procs
) -> None:
    done_in_time = await enqueue(aconn, "sleepy", {"sleeps": [0.5]})
    proc = procs.start(shutdown_grace=5.0)
    await wait_until(lambda: started_attempt(aconn, done_in_time, 1), timeout=15, what="start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0, procs.logs()
    row = await fetchall(
        aconn,
        "SELECT finished_at IS NOT NULL, attempts FROM jobs WHERE id = %s",
        (done_in_time,),
    )
    assert row == [(True, 1)]
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
    assert "event=stopped" in procs.logs()


async def test_dead_worker_row_and_article_locks_are_rescued(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """In-process: a stale `workers` row, a missing one, and the article's consumer lock."""
    reg = Registry()
    ran: list[int] = []

    @reg.handler("k")
    async def k(payload: Any) -> None:
        ran.append(current_job().id)

    ids = [await enqueue(aconn, "k", {"n": i}) for i in range(5)]
    stale, missing, article, article_last, fresh_article = ids
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at) "
        "VALUES ('h:1:dead', 'h', 1, '{k}', 1, now() - interval '1 minute')"
    )
    await aconn.execute(
        "UPDATE jobs SET attempts = 1, locked_at = now() - interval '1 minute', locked_by = %s "
        "WHERE id = %s",
        ("h:1:dead", stale),
    )
    await aconn.execute(
        "UPDATE jobs SET attempts = 1, locked_at = now(), locked_by = 'h:2:never-registered' "
        "WHERE id = %s",
        (missing,),
    )
    # The article's claim: locked_at set, no locked_by, attempts incremented.
    await aconn.execute(
        "UPDATE jobs SET attempts = 1, locked_at = now() - interval '10 seconds' WHERE id = %s",
        (article,),
    )
    await aconn.execute(
        "UPDATE jobs SET attempts = 5, locked_at = now() - interval '10 seconds' WHERE id = %s",
        (article_last,),
    )
    await aconn.execute(
        "UPDATE jobs SET attempts = 1, locked_at = now() WHERE id = %s", (fresh_article,)
    )
    async with running_worker(dsn, reg, heartbeat_timeout=2.0, lock_timeout=3.0):
        await wait_until(lambda: len(ran) == 3, timeout=10, what="3 rescued jobs to run")
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM dead_letters"), what="dead letter"
        )
        await asyncio.sleep(0.3)
        # Locked by the article's consumer 0.3 s ago: still within the lock timeout.
        assert fresh_article not in ran
        row = await fetchall(
            aconn, "SELECT locked_by, attempts FROM jobs WHERE id = %s", (fresh_article,)
        )
        assert row == [(None, 1)]
    assert sorted(ran) == sorted([stale, missing, article])
    rows = await fetchall(
        aconn,
        "SELECT id, attempts, errors->0->>'error', errors->0->>'worker' FROM jobs "
        "WHERE id = ANY(%s) ORDER BY id",
        ([stale, missing, article],),
    )
    assert [(r[0], r[1]) for r in rows] == [(stale, 2), (missing, 2), (article, 2)]
    assert all(r[2].startswith("WorkerLost:") for r in rows)
    assert [r[3] for r in rows] == ["h:1:dead", "h:2:never-registered", None]
    dead = await fetchall(aconn, "SELECT id, attempts, reason FROM dead_letters")
    assert dead == [(article_last, 5, "worker_lost")]


async def test_randomised_run_every_job_succeeds_once_or_is_dead_with_all_attempts(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    reg = Registry()
    succeeded: dict[int, int] = {}
    running: set[int] = set()
    overlaps: list[int] = []
    fail_rate = 0.35

    def enter() -> int:
        job_id = current_job().id
        if job_id in running:
            overlaps.append(job_id)
        running.add(job_id)
        return job_id

    @reg.handler("ra", max_attempts=3, backoff_base=0.01, backoff_cap=0.05)
    async def ra(payload: Any) -> None:
        job_id = enter()
        try:
            await asyncio.sleep(rng.random() * 0.005)
            if rng.random() < fail_rate:
                raise RuntimeError(f"random failure of {job_id}")
            succeeded[job_id] = succeeded.get(job_id, 0) + 1
        finally:
            running.discard(job_id)

    @reg.handler("rp", backoff_base=0.01, backoff_cap=0.05)
    def rp(payload: Any) -> None:
        job_id = current_job().id
        time.sleep(rng.random() * 0.003)
        if rng.random() < fail_rate:
            raise ValueError(f"random failure of {job_id}")
        succeeded[job_id] = succeeded.get(job_id, 0) + 1  # one thread per job: no race

    def specs(n: int) -> list[dict[str, Any]]:
        return [
            {
                "kind": rng.choice(["ra", "rp"]),
                "payload": {"n": i},
                "max_attempts": rng.choice([1, 2, 3, 4]),
            }
            for i in range(n)
        ]

    await enqueue_many(aconn, specs(300))
    async with (
        running_worker(dsn, reg, concurrency=20) as w1,
        running_worker(dsn, reg, concurrency=7, claim_batch=3) as w2,
        running_worker(dsn, reg, concurrency=50, kinds=("ra",)),
    ):
        await enqueue_many(aconn, specs(200))
        await asyncio.sleep(0.2)
        w2.request_stop()  # one worker leaves mid-run; what it held is released, not lost
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 0 FROM jobs WHERE finished_at IS NULL"),
            timeout=30,
            what=f"the queue to drain (seed {seed})",
        )
        assert w1.running_count == 0
    note = f"seed {seed}"
    jobs = await fetchall(
        aconn, "SELECT id, attempts, max_attempts, errors, cancelled_at FROM jobs"
    )
    dead = await fetchall(
        aconn, "SELECT id, attempts, max_attempts, errors, reason FROM dead_letters"
    )
    assert len(jobs) + len(dead) == 500, note  # conservation
    assert not overlaps, note
    for job_id, attempts, max_attempts, errors, cancelled_at in jobs:
        assert succeeded.get(job_id) == 1, note
        assert cancelled_at is None and attempts <= max_attempts, note
        assert len(errors) == attempts - 1, note
    for job_id, attempts, max_attempts, errors, reason in dead:
        assert job_id not in succeeded, note
        assert attempts == max_attempts and reason == "failed", note
        assert [e["attempt"] for e in errors] == list(range(1, attempts + 1)), note
    assert set(succeeded) == {j[0] for j in jobs}, note
    assert dead, f"with a {fail_rate:.0%} failure rate some jobs die ({note})"
    stats = await fetchall(aconn, "SELECT sum(done), sum(dead) FROM kind_stats")
    assert stats == [(len(jobs), len(dead))], note
