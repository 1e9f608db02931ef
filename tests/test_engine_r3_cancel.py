"""Issue 25 item 6: a cancel reaches its handler within a second whatever the topology, here
behind PgBouncer in transaction pooling without `--listen-dsn` (LISTEN hears nothing there)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from apps.helpers import running_worker, wait_until

from jobtui import enqueue
from jobtui.ops import Actor, cancel_jobs
from jobtui.registry import Registry
from jobtui.worker import current_job

pytestmark = pytest.mark.slow


async def test_a_cancel_reaches_its_handler_within_a_second_without_listen(
    tx_pooled_dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Before, without a LISTEN that works, a cancel waited for the next heartbeat's check
    (here every 10 s). Three jobs are cancelled one after another, 1.3 s apart, so a check
    that merely happened to come soon cannot pass for all three."""
    reg = Registry()
    started: dict[int, float] = {}
    stopped: dict[int, float] = {}

    @reg.handler("long")
    async def long(payload: Any) -> None:
        job = current_job().id
        started[job] = time.monotonic()
        try:
            await asyncio.sleep(60)
        finally:
            stopped[job] = time.monotonic()

    jobs = [await enqueue(aconn, "long", {}) for _ in range(3)]
    async with running_worker(
        tx_pooled_dsn, reg, concurrency=3, heartbeat_interval=10.0, heartbeat_timeout=30.0
    ):
        await wait_until(lambda: len(started) == 3, what="the three starts")
        late = {}
        for job in jobs:
            await asyncio.sleep(1.3)
            asked = time.monotonic()
            await cancel_jobs(aconn, "public", [job], actor=Actor("operator@test"))
            await wait_until(lambda j=job: j in stopped, timeout=15, what="the cancel to arrive")
            late[job] = round(stopped[job] - asked, 2)
    assert all(seconds <= 1.0 for seconds in late.values()), late
