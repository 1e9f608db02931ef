"""Attacks on issue 9's promises: real workers, real sessions, settings the suite does not use.

Each test here reproduced a broken promise on a real PostgreSQL when it was written (then marked
xfail(strict=True)); the engine now keeps them, and the shutdown test checks what the README
promises instead (a release at shutdown does not count toward max_attempts).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from apps.helpers import fetchall, running_worker, settings, wait_until
from psycopg import conninfo, sql

from jobtui import enqueue
from jobtui.registry import Registry
from jobtui.worker import Worker, current_job

HERE = Path(__file__).parent
FAST_RESCUER = {"kinds": ["quick"], "heartbeat_interval": 0.2, "heartbeat_timeout": 1.0}


def spawn(argvs: list[list[str]], log_path: Path) -> list[subprocess.Popen[bytes]]:
    """Helper processes (workers of tests/apps/basic.py, an operator), each its own loop."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with open(log_path, "wb") as log:
        return [
            subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env) for argv in argvs
        ]


def worker_argv(dsn: str, options: dict[str, Any]) -> list[str]:
    return [sys.executable, str(HERE / "apps" / "run_worker.py"), dsn, json.dumps(options)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait(10)


async def big_claim_race(
    dsn: str, aconn: psycopg.AsyncConnection, reg: Registry, helpers: list[subprocess.Popen[bytes]]
) -> None:
    """Eight ~14 MB payloads (about 1.5 s of json.loads in one claim) claimed by an in-process
    worker with a 0.2 s / 1 s heartbeat, while `helpers` (a rescuer first) run beside it."""
    await aconn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'big', "
        "(SELECT jsonb_agg(i % 250) FROM generate_series(1, 3000000) i) FROM generate_series(1, 8)"
    )
    try:
        await wait_until(
            lambda: fetchall(aconn, "SELECT 1 FROM workers"), what="the rescuer to register"
        )
        async with running_worker(
            dsn, reg, concurrency=8, heartbeat_interval=0.2, heartbeat_timeout=1.0
        ):
            await asyncio.sleep(3.0)
    finally:
        stop(helpers)


# The rolling-deploy test that stood here (an old worker with a lower handler limit started
# AFTER the new one must not bury the new one's retry) contradicts issue 25 item 5 (a lowered
# limit must never strand a job): one rule now judges every worker, the declaration of the
# last worker started (migration 0023). Its successor, where the new worker starts last:
# test_engine_r3_limits.py: test_a_rolling_deploy_that_raises_the_limit_is_not_undone_…


async def test_a_shutdown_release_does_not_count_toward_max_attempts_so_the_handler_starts_again(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """README, Delivery guarantees: attempts that failed, timed out or whose worker was lost
    count toward `max_attempts`; a release at shutdown gives its attempt back. So a
    max_attempts=1 handler interrupted by its worker's shutdown STARTS again, told attempt 1
    both times, and the job ends succeeded (not dead, not over its limit in the row)."""
    reg = Registry()
    starts: list[tuple[int, str]] = []

    @reg.handler("once", max_attempts=1)
    async def once(payload: Any) -> None:
        starts.append((current_job().attempt, current_job().worker_id))
        await asyncio.sleep(payload["s"])

    job_id = await enqueue(aconn, "once", {"s": 30})
    async with running_worker(dsn, reg, shutdown_grace=0.1):
        await wait_until(lambda: starts, what="the first start")
    released = await fetchall(
        aconn, "SELECT attempts, locked_by FROM jobs WHERE id = %s", (job_id,)
    )
    assert released == [(0, None)], released  # the attempt was given back
    await aconn.execute("UPDATE jobs SET payload = '{\"s\": 0}' WHERE id = %s", (job_id,))
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchall(
                aconn, "SELECT 1 FROM jobs WHERE id = %s AND finished_at IS NOT NULL", (job_id,)
            ),
            what="the job to end",
        )
    ended = await fetchall(
        aconn,
        "SELECT attempts, max_attempts, cancelled_at IS NULL FROM jobs WHERE id = %s",
        (job_id,),
    )
    assert [a for a, _ in starts] == [1, 1] and starts[0][1] != starts[1][1], starts
    assert ended == [(1, 1, True)], ended


async def test_a_claim_of_large_payloads_stalls_the_heartbeat_and_live_jobs_are_rescued(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """Liveness has its own task and connection, but shares the event loop with the
    dispatcher, which decodes every claimed payload (json.loads) synchronously in one loop
    step (WorkerDB.claim). Eight ~14 MB payloads in one claim block the loop for over a
    second: the owner cannot heartbeat, a rescuer in another process (its own loop, judging
    by the owner's own 1 s timeout) rescues all eight live jobs, the owner claims them again,
    decodes them again, stalls again... A healthy worker's jobs run twice at once, and each
    rescue burns an attempt (towards dead letters, reason worker_lost)."""
    reg = Registry()
    starts: list[tuple[int, int]] = []

    @reg.handler("big")
    async def big(payload: Any) -> None:
        starts.append((current_job().id, current_job().attempt))
        await asyncio.sleep(4.0)

    helpers = spawn([worker_argv(dsn, FAST_RESCUER)], tmp_path / "rescuer.log")
    await big_claim_race(dsn, aconn, reg, helpers)
    lost = await fetchall(
        aconn,
        "SELECT id, e ->> 'attempt' FROM jobs, jsonb_array_elements(errors) e "
        "WHERE e ->> 'error' LIKE 'WorkerLost%%' ORDER BY 1, 2",
    )
    assert lost == [] and all(attempt == 1 for _, attempt in starts), (lost, starts)


async def test_a_job_rescued_and_cancelled_while_its_claim_is_being_decoded_starts_after_the_cancel(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """The claim commits, then the worker spends over a second decoding payloads before it
    starts the handlers. Meanwhile a rescuer (another process) rescues the jobs and an
    operator (another process) cancels them while they are pending: the cancel commits and
    finishes them. The worker then starts their handlers from its stale claim reply anyway:
    "once a cancel commits, a job that is not running never starts again" is broken."""
    reg = Registry()
    starts: list[tuple[int, int, float]] = []

    @reg.handler("big")
    async def big(payload: Any) -> None:
        starts.append((current_job().id, current_job().attempt, time.time()))
        await asyncio.sleep(2.0)

    argvs = [worker_argv(dsn, FAST_RESCUER), [sys.executable, "-c", CANCELLER, dsn]]
    await big_claim_race(dsn, aconn, reg, spawn(argvs, tmp_path / "helpers.log"))
    cancelled = dict(
        await fetchall(
            aconn,
            "SELECT id, extract(epoch FROM cancelled_at)::float8 FROM jobs "
            "WHERE cancelled_at IS NOT NULL",
        )
    )
    late = [
        (job, attempt) for job, attempt, at in starts if job in cancelled and at > cancelled[job]
    ]
    assert late == [], (late, cancelled, starts)


async def test_a_lock_on_workers_lets_rescuers_take_live_jobs_of_a_10s_heartbeat_worker(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """A worker with `--heartbeat 10s --heartbeat-timeout 11s` runs long jobs; another with
    0.2 s / 1 s runs nearby. A session holds ACCESS EXCLUSIVE on `workers` for 12 s (a
    migration, an operator's LOCK TABLE). Both workers are alive throughout and each keeps
    trying to heartbeat (each try cut short after 11/3 s, then retried). When the lock lifts,
    the fast worker's rescue reads the `heartbeat_at` the lock held back before the slow
    worker's next heartbeat commits, and rescues all four live jobs."""
    await aconn.execute(
        "CREATE TABLE IF NOT EXISTS ledger (entry bigserial primary key, job_id bigint not null, "
        "attempt int not null, pid int not null, worker text not null, started_at timestamptz "
        "not null default clock_timestamp(), ended_at timestamptz)"
    )
    for _ in range(4):
        await enqueue(aconn, "sleepy", {"sleeps": [25, 0.1]})
    slow = {
        "kinds": ["sleepy"],
        "concurrency": 4,
        "heartbeat_interval": 10.0,
        "heartbeat_timeout": 11.0,
    }
    procs = spawn([worker_argv(dsn, slow), worker_argv(dsn, FAST_RESCUER)], tmp_path / "w.log")
    try:
        await wait_until(
            lambda: fetchall(aconn, "SELECT count(*) = 4 FROM ledger"), what="the four starts"
        )
        await asyncio.sleep(2.0)
        async with await psycopg.AsyncConnection.connect(dsn) as locker:
            await locker.execute("LOCK TABLE workers IN ACCESS EXCLUSIVE MODE")
            await asyncio.sleep(12.0)
            await locker.rollback()
        await asyncio.sleep(2.0)
    finally:
        stop(procs)
    lost = await fetchall(
        aconn, "SELECT id FROM jobs WHERE errors::text LIKE '%%WorkerLost%%' ORDER BY id"
    )
    assert lost == [], lost


async def test_a_worker_that_cannot_heartbeat_keeps_claiming_and_runs_its_jobs_twice_at_once(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The worker's role may open 6 connections (what a worker at concurrency > 1 uses). Its
    liveness connection is terminated and the slot taken by another session of that role
    (connection exhaustion: any busy server). Claims, outcomes and handlers go on, only the
    heartbeat is gone: its jobs are rescued after its own 1 s timeout, and the same worker,
    which never learns it lost them (that check runs on the dead connection), claims them
    again and runs attempt 2 beside attempt 1, then keeps its slots full of both."""
    role = f"attack_{os.getpid()}_{int(time.time() * 1000) % 100000}"
    await aconn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    for grant in (
        "GRANT ALL ON ALL TABLES IN SCHEMA public TO {}",
        "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {}",
        "ALTER ROLE {} CONNECTION LIMIT 6",
    ):
        await aconn.execute(sql.SQL(grant).format(sql.Identifier(role)))
    owner_dsn = conninfo.make_conninfo(dsn, user=role)
    reg, other = Registry(), Registry()
    starts: list[tuple[int, int]] = []

    @reg.handler("long")
    async def long(payload: Any) -> None:
        starts.append((current_job().id, current_job().attempt))
        await asyncio.sleep(15.0)

    @other.handler("other")
    async def nothing(payload: Any) -> None:
        return None

    squatter: psycopg.AsyncConnection | None = None
    fast = settings(concurrency=4, heartbeat_interval=0.2, heartbeat_timeout=1.0)
    owner = Worker(owner_dsn, "public", reg, fast)
    task: asyncio.Task[None] | None = None
    try:
        for _ in range(2):
            await enqueue(aconn, "long", {})
        task = asyncio.create_task(owner.run())
        await wait_until(lambda: len(starts) == 2, what="the two starts")
        async with running_worker(dsn, other, heartbeat_interval=0.2, heartbeat_timeout=1.0):
            # The squatter takes a seventh slot first and the limit then drops back to 6, so
            # the liveness connection cannot win its slot back between the kill and the squat.
            limit = "ALTER ROLE {} CONNECTION LIMIT %d"
            await aconn.execute(sql.SQL(limit % 7).format(sql.Identifier(role)))
            squatter = await psycopg.AsyncConnection.connect(owner_dsn)
            await aconn.execute(sql.SQL(limit % 6).format(sql.Identifier(role)))
            await aconn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE usename = %s AND application_name = 'jobtui worker (liveness)'",
                (role,),
            )
            await asyncio.sleep(4.0)
    finally:
        if task is not None:
            owner.request_stop()
            owner.request_stop()
            await asyncio.wait_for(task, 30)
        if squatter is not None:
            await squatter.close()
        await aconn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        await aconn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        await aconn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    started_twice = sorted({job for job, attempt in starts if attempt > 1})
    assert started_twice == [], starts


# The operator of the test above: cancels each job the moment a rescue has unlocked it.
CANCELLER = """
import asyncio, sys
import psycopg
from jobtui.ops import Actor, cancel_jobs

async def main(dsn):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while True:
            rows = await (await conn.execute(
                "SELECT id FROM jobs WHERE locked_at IS NULL AND finished_at IS NULL "
                "AND errors::text LIKE '%WorkerLost%'")).fetchall()
            if rows:
                await cancel_jobs(conn, "public", [r[0] for r in rows], actor=Actor("attack"))
            await asyncio.sleep(0.01)

asyncio.run(main(sys.argv[1]))
"""
