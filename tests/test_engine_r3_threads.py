"""Issue 25 items 3, 4 and 7: handler threads that overrun their timeout hold their kind's
limit and their worker's slot in the database's eyes too, and the engine's own work never
queues behind a handler's threads."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchval, running_worker, wait_until
from test_worker_scheduling import _max_overlap

from jobtui import enqueue
from jobtui.registry import Registry
from jobtui.why import explain

pytestmark = pytest.mark.slow


async def test_threads_that_overran_their_timeout_count_toward_the_kinds_concurrency_limit(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """`slow` may run one at a time; its plain handler times out after 0.3 s and its thread
    runs 1.2 s. Before, the attempt ended in the database at the timeout, so the next job
    started beside the thread still running: three at once. Now the row stays locked until
    the thread ends."""
    reg = Registry()
    spans: list[tuple[float, float]] = []
    guard = threading.Lock()

    @reg.handler("slow", concurrency=1, timeout=0.3, max_attempts=1)
    def slow(payload: Any) -> None:
        t0 = time.monotonic()
        time.sleep(1.2)
        with guard:
            spans.append((t0, time.monotonic()))

    for _ in range(3):
        await enqueue(aconn, "slow", {})
    async with running_worker(dsn, reg, concurrency=3):
        await wait_until(lambda: len(spans) == 3, timeout=20, what="three runs")
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 3 FROM dead_letters"),
            what="the three timeouts to be written",
        )
    assert _max_overlap(spans) == 1, spans


async def test_why_says_the_only_slot_is_held_by_a_thread_that_overran_its_timeout(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The worker's one slot is held by a plain handler's thread that overran its timeout.
    `why` of a job waiting behind it said "ready, next in line"; it must say the worker is
    full, and why."""
    reg = Registry()
    release = threading.Event()

    @reg.handler("hog", timeout=0.2, max_attempts=1)
    def hog(payload: Any) -> None:
        release.wait(10)

    @reg.handler("next")
    async def nxt(payload: Any) -> None:
        return None

    await enqueue(aconn, "hog", {})
    try:
        async with running_worker(dsn, reg, concurrency=1):
            await wait_until(
                lambda: fetchval(aconn, "SELECT abandoned = 1 FROM workers"),
                what="the heartbeat to say one thread overran",
            )
            waiting = await enqueue(aconn, "next", {})
            answer = await explain(aconn, "public", waiting)
            assert answer is not None
            codes = [r.code for r in answer.reasons]
            assert "workers_full" in codes and "ready" not in codes, answer
            assert "overran its timeout" in answer.headline, answer
            release.set()
            await wait_until(
                lambda: fetchval(
                    aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (waiting,)
                ),
                what="the waiting job to run once the thread ended",
            )
    finally:
        release.set()
    await asyncio.sleep(0)


async def test_a_large_claim_never_waits_for_threads_that_hung_in_handlers(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Async handlers that time out inside `asyncio.to_thread` leave its threads hanging in
    the loop's default executor (40 of them here: more than it has). A claim over 1 MB was
    decoded on that executor, so the large job and the small ones claimed with it stayed
    unstarted for as long as those threads hung. The engine decodes on threads of its own."""
    reg = Registry()
    hung = threading.Event()
    started: dict[str, float] = {}

    @reg.handler("hang", timeout=0.1, max_attempts=1)
    async def hang(payload: Any) -> None:
        await asyncio.to_thread(hung.wait, 30)

    @reg.handler("big")
    async def big(payload: Any) -> None:
        started[payload["name"]] = time.monotonic()

    for _ in range(40):
        await enqueue(aconn, "hang", {})
    try:
        async with running_worker(dsn, reg, concurrency=8):
            await wait_until(
                lambda: fetchval(aconn, "SELECT count(*) = 40 FROM dead_letters"),
                timeout=20,
                what="the 40 handlers to time out, their threads left hanging",
            )
            await enqueue(aconn, "big", {"name": "large", "pad": "x" * 1_500_000})
            for i in range(5):
                await enqueue(aconn, "big", {"name": f"small {i}"})
            t0 = time.monotonic()
            await wait_until(lambda: len(started) == 6, timeout=5, what="all six to start")
            assert max(started.values()) - t0 < 3.0, started
    finally:
        hung.set()
