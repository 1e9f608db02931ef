"""Issue 12 item 2: "why isn't this job running?". Each reason is produced by setting up that
situation for real: real workers running, full or limited; a real pause; the article's
consumer locking and giving up; a worker whose heartbeat stopped."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import psycopg
from apps.helpers import fetchval, running_worker, wait_until
from test_topology_managed import _registry as ok_and_boom
from topology import ARTICLE_CLAIM, ARTICLE_GIVE_UP

from jobtui import ops
from jobtui.enqueue import enqueue
from jobtui.registry import Registry
from jobtui.why import DEFAULT_LOCK_TIMEOUT_S, WhyAnswer, explain
from jobtui.worker import WorkerSettings

Actor = ops.Actor


async def why(aconn: psycopg.AsyncConnection, job_id: int) -> WhyAnswer:
    answer = await explain(aconn, "public", job_id)
    assert answer is not None
    return answer


def codes(answer: WhyAnswer) -> list[str]:
    return [r.code for r in answer.reasons]


def text(answer: WhyAnswer, code: str) -> str:
    return next(r.text for r in answer.reasons if r.code == code)


async def add_live_worker(aconn: psycopg.AsyncConnection, worker_id: str, kinds: list[str]) -> None:
    """A `workers` row as a live worker's heartbeat writes it (fresh, a long timeout)."""
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, running, heartbeat_timeout_s) "
        "VALUES (%s, 'h', 1, %s, 4, 0, 3600)",
        (worker_id, kinds),
    )


@asynccontextmanager
async def blocking_worker(
    dsn: str, kind: str, *, concurrency: int, **limits: Any
) -> AsyncIterator[tuple[Any, asyncio.Event]]:
    """A real worker whose handler of `kind` runs until the event is set."""
    release = asyncio.Event()
    reg = Registry()

    @reg.handler(kind, **limits)
    async def hold(payload: Any) -> None:
        await release.wait()

    async with running_worker(dsn, reg, concurrency=concurrency) as worker:
        try:
            yield worker, release
        finally:
            release.set()


async def running_count(aconn: psycopg.AsyncConnection, kind: str) -> int:
    return int(
        await fetchval(
            aconn,
            "SELECT count(*) FROM jobs WHERE kind = %s AND locked_at IS NOT NULL "
            "AND finished_at IS NULL",
            (kind,),
        )
    )


async def test_unknown_id(aconn: psycopg.AsyncConnection) -> None:
    assert await explain(aconn, "public", 424242) is None


async def test_scheduled_for_later(aconn: psycopg.AsyncConnection) -> None:
    job = await enqueue(aconn, "later", {}, delay=timedelta(minutes=10))
    answer = await why(aconn, job)
    assert answer.state == "scheduled" and codes(answer)[0] == "scheduled"
    assert "it is scheduled for later: " in text(answer, "scheduled")
    assert text(answer, "scheduled").endswith(("in 9m59s", "in 10m00s", "in 9m58s"))
    assert answer.position is None  # not due: not in line


async def test_paused_kind_by_whom_and_since(aconn: psycopg.AsyncConnection) -> None:
    await add_live_worker(aconn, "w-live", ["mail"])
    job = await enqueue(aconn, "mail", {})
    await ops.pause_kind(aconn, "public", "mail", actor=Actor("alice@ops"))
    answer = await why(aconn, job)
    assert codes(answer) == ["paused", "position"]
    assert "its kind 'mail' is paused, by alice@ops since " in text(answer, "paused")
    assert re.search(
        r"since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \([01]s ago\)$", text(answer, "paused")
    )
    await ops.resume_kind(aconn, "public", "mail", actor=Actor("alice@ops"))
    assert codes(await why(aconn, job)) == ["ready"]


async def test_no_live_worker_handles_its_kind(aconn: psycopg.AsyncConnection) -> None:
    job = await enqueue(aconn, "orphan", {})
    answer = await why(aconn, job)
    assert codes(answer) == ["no_worker", "position"]
    assert text(answer, "no_worker") == "no live worker handles kind 'orphan'"
    # a worker that handles it but stopped heartbeating does not count
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at, "
        "heartbeat_timeout_s) VALUES ('w-dead', 'h', 1, '{orphan}', 4, "
        "now() - interval '5 minutes', 30)"
    )
    answer = await why(aconn, job)
    assert (
        text(answer, "no_worker") == "no live worker handles kind 'orphan' (1 stale worker(s) do)"
    )


async def test_every_handling_worker_full(dsn: str, aconn: psycopg.AsyncConnection) -> None:
    async with blocking_worker(dsn, "slow", concurrency=1) as (worker, _release):
        first = await enqueue(aconn, "slow", {})
        await wait_until(lambda: running_count(aconn, "slow"), what="the first job to run")
        second = await enqueue(aconn, "slow", {})

        async def full() -> WhyAnswer | None:
            answer = await why(aconn, second)
            return answer if "workers_full" in codes(answer) else None

        answer = await wait_until(full, what="its heartbeat to say 1 running")
        assert text(answer, "workers_full") == (
            f"every worker that handles 'slow' is full: {worker.id} running 1 of 1"
        )
        assert answer.position == 1 and codes(answer)[-1] == "position"
        # the running one: on that worker, with its heartbeat's age and the rescue time
        running = await why(aconn, first)
        assert running.state == "running" and codes(running) == ["running"]
        match = re.fullmatch(
            rf"it is running on worker {re.escape(worker.id)}, whose heartbeat is (\d)s old; "
            r"should that worker stop, it will be rescued in (\d)s",
            text(running, "running"),
        )
        assert match, text(running, "running")
        age, rescue_in = int(match.group(1)), int(match.group(2))
        assert age <= 1 and 1 <= age + rescue_in <= 2  # heartbeats every 0.2 s, 2 s timeout


async def test_a_limit_holds_it(dsn: str, aconn: psycopg.AsyncConnection) -> None:
    release = asyncio.Event()
    reg = Registry()

    @reg.handler("capped", concurrency=1)
    async def capped(payload: Any) -> None:
        await release.wait()

    @reg.handler("per_worker", per_worker=1)
    async def one_each(payload: Any) -> None:
        await release.wait()

    @reg.handler("metered", rate="1/m")
    async def metered(payload: Any) -> None:
        return None

    async with running_worker(dsn, reg, concurrency=4):
        try:
            await enqueue(aconn, "capped", {})
            await wait_until(lambda: running_count(aconn, "capped"), what="one capped job running")
            held = await enqueue(aconn, "capped", {})
            answer = await why(aconn, held)
            assert codes(answer) == ["limit_concurrency", "position"]
            assert text(answer, "limit_concurrency") == (
                "a limit holds it: kind 'capped' is at its concurrency limit, 1 of 1 running"
            )
            await enqueue(aconn, "per_worker", {})
            await wait_until(lambda: running_count(aconn, "per_worker"), what="one running")
            held = await enqueue(aconn, "per_worker", {})
            answer = await why(aconn, held)
            assert codes(answer) == ["limit_per_worker", "position"]
            assert text(answer, "limit_per_worker") == (
                "a limit holds it: every live worker that handles 'per_worker' runs its "
                "per-worker limit of 1"
            )
            first = await enqueue(aconn, "metered", {})

            async def done() -> bool:
                return bool(
                    await fetchval(
                        aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (first,)
                    )
                )

            await wait_until(done, what="the first metered job to run")
            second = await enqueue(aconn, "metered", {})
            answer = await why(aconn, second)
            assert codes(answer) == ["limit_rate", "position"]
            head, _, wait = text(answer, "limit_rate").rpartition(" in ")
            assert head == (
                "a limit holds it: kind 'metered' has used its rate of 1 per minute; the next "
                "start is allowed"
            )
            assert 50 < float(wait.rstrip("s")) <= 60  # one token a minute, just spent
        finally:
            release.set()


async def test_locked_by_a_worker_whose_heartbeat_stopped(aconn: psycopg.AsyncConnection) -> None:
    job = await enqueue(aconn, "k", {})
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, running, heartbeat_at, "
        "heartbeat_timeout_s) VALUES ('w-gone', 'h', 1, '{k}', 4, 1, "
        "now() - interval '45 seconds', 30)"
    )
    await aconn.execute(
        "UPDATE jobs SET locked_at = now(), locked_by = 'w-gone', attempts = 1 WHERE id = %s",
        (job,),
    )
    answer = await why(aconn, job)
    assert answer.state == "locked" and codes(answer) == ["stale_worker"]
    assert text(answer, "stale_worker") == (
        "it is locked by worker w-gone, whose heartbeat is 45s old, past its 30s timeout: it "
        "will be rescued now, at the next rescue by any live worker"
    )


async def test_locked_by_a_classic_consumer(conn: psycopg.Connection, aconn: Any) -> None:
    assert WorkerSettings().lock_timeout == DEFAULT_LOCK_TIMEOUT_S
    job = await enqueue(aconn, "k", {})
    claimed = conn.execute(ARTICLE_CLAIM).fetchone()
    assert claimed is not None and claimed[0] == job
    answer = await why(aconn, job)
    assert answer.state == "locked" and codes(answer) == ["classic_lock"]
    assert text(answer, "classic_lock") == (
        "it is locked (0s ago) by something that never heartbeats (a classic consumer: no "
        "locked_by); it will be rescued after the lock timeout of 1h00m, in 59m59s"
    ) or text(answer, "classic_lock").endswith("in 1h00m")
    # an operator's cancel of a locked row is a request: the locker is asked to stop it
    assert await ops.cancel_jobs(aconn, "public", [job], actor=Actor("bob@ops")) == 1
    answer = await why(aconn, job)
    assert codes(answer) == ["classic_lock", "cancel_requested"]
    assert text(answer, "cancel_requested") == (
        "a cancel was requested: its worker is asked to stop it"
    )
    # a locked_by that is no worker jobtui knows: rescued at once
    await aconn.execute("UPDATE jobs SET locked_by = 'consumer-7' WHERE id = %s", (job,))
    answer = await why(aconn, job)
    assert codes(answer) == ["unknown_locker", "cancel_requested"]
    assert "locked by 'consumer-7', which is not a known worker" in text(answer, "unknown_locker")


async def test_attempts_exhausted_by_a_classic_consumer(
    conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    job = await enqueue(aconn, "k", {}, max_attempts=1)
    assert conn.execute(ARTICLE_CLAIM).fetchone() is not None
    conn.execute(ARTICLE_GIVE_UP, {"id": job, "error": "gave up"})
    answer = await why(aconn, job)
    assert answer.state == "exhausted" and codes(answer) == ["exhausted"]
    assert text(answer, "exhausted").startswith("its attempts are exhausted (1 of 1): no worker")


async def test_finished_cancelled_and_dead(dsn: str, aconn: psycopg.AsyncConnection) -> None:
    reg = ok_and_boom()  # "ok" succeeds, "boom" fails its only attempt
    done = await enqueue(aconn, "ok", {})
    dead = await enqueue(aconn, "boom", {})
    async with running_worker(dsn, reg):

        async def settled() -> bool:
            return bool(
                await fetchval(
                    aconn,
                    "SELECT (SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s) "
                    "AND EXISTS (SELECT 1 FROM dead_letters WHERE id = %s)",
                    (done, dead),
                )
            )

        await wait_until(settled, what="one done, one dead")
    answer = await why(aconn, done)
    assert answer.state == "succeeded" and codes(answer) == ["finished"]
    assert text(answer, "finished").endswith("): it will not run again")
    answer = await why(aconn, dead)
    assert answer.state == "dead" and codes(answer) == ["dead"]
    assert text(answer, "dead").startswith("it is a dead letter (reason: failed), moved ")
    assert text(answer, "dead").endswith("after 1 of 1 attempts: it runs again only if requeued")
    cancelled = await enqueue(aconn, "later", {}, delay=timedelta(hours=1))
    assert await ops.cancel_jobs(aconn, "public", [cancelled], actor=Actor("bob@ops")) == 1
    answer = await why(aconn, cancelled)
    assert answer.state == "cancelled" and codes(answer) == ["cancelled"]
    assert text(answer, "cancelled").endswith("): it will not run")


async def test_ready_and_its_place_in_claim_order(aconn: psycopg.AsyncConnection) -> None:
    await add_live_worker(aconn, "w-live", ["mail"])
    a = await enqueue(aconn, "mail", {})
    b = await enqueue(aconn, "mail", {})
    urgent = await enqueue(aconn, "mail", {}, priority=5)  # priority first in worker_claim
    other_kind = await enqueue(aconn, "sms", {}, priority=9)  # another kind's line
    later = await enqueue(aconn, "mail", {}, delay=timedelta(hours=1))  # not due: not ahead
    del other_kind, later
    answers = {job: await why(aconn, job) for job in (urgent, a, b)}
    assert [answers[j].position for j in (urgent, a, b)] == [1, 2, 3]
    assert text(answers[urgent], "ready") == "it is ready, next in line for kind 'mail'"
    assert text(answers[b], "ready") == "it is ready, number 3 in line (2 ahead) for kind 'mail'"
    assert all(codes(x) == ["ready"] and x.state == "ready" for x in answers.values())
    assert answers[a].as_json() == {
        "id": a,
        "kind": "mail",
        "state": "ready",
        "position": 2,
        "reasons": [
            {
                "code": "ready",
                "text": "it is ready, number 2 in line (1 ahead) for kind 'mail'",
                "blocking": False,
            }
        ],
    }


async def test_a_quieted_worker_does_not_count_as_handling_its_kind(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """An operator quieted the only worker for the kind (a real one, through worker_control):
    `why` says so, and the snapshot no longer calls the kind handled (the no_worker rule)."""
    from jobtui import metrics, worker_control

    reg = Registry()

    @reg.handler("qk")
    async def qk(payload: Any) -> None:
        return None

    async with running_worker(dsn, reg) as worker:
        await worker_control.control_worker(
            aconn, "public", worker.id, "quiet", actor=ops.Actor("op@test")
        )

        async def applied() -> bool:
            return await fetchval(
                aconn, "SELECT control_applied = 'quiet' FROM workers WHERE id = %s", (worker.id,)
            )

        await wait_until(applied, what="the worker to go quiet")
        job_id = await enqueue(aconn, "qk", {})
        answer = await explain(aconn, "public", job_id)
        assert answer is not None
        assert "workers_quiet" in [r.code for r in answer.reasons], answer.reasons
        snap = await metrics.snapshot(aconn, "public")
        assert next(k for k in snap.kinds if k.kind == "qk").handled is False
