"""Issue 25 items 5 and 8: one rule for the attempt limit, and a move to dead letters that is
never refused; `jobs why` and the console's job detail tell the same story as the engine."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, fetchval, running_worker, wait_until

from jobtui import enqueue
from jobtui.browse import get_job
from jobtui.registry import Registry
from jobtui.why import explain

pytestmark = pytest.mark.slow


def _flaky(limit: int) -> Registry:
    reg = Registry()

    @reg.handler("flaky", max_attempts=limit, backoff_base=30.0, jitter=0.0)
    async def flaky(payload: Any) -> None:
        raise RuntimeError("transient")

    return reg


async def test_a_lowered_handler_limit_sends_a_waiting_retry_to_dead_letters(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Deploy `max_attempts=1` while a job with attempts 1 and a stored limit of 5 waits for
    its retry. Before, the claim skipped it (the handler's limit), the sweep left it (the
    row's) and `why` called it ready, for ever. Now the one rule (the declaration of the last
    worker started, else the row's) says exhausted everywhere: `why`, the console's detail
    ("attempts 1 of 1"), and the sweep moves it to dead letters with reason `exhausted`."""
    job = await enqueue(aconn, "flaky", {})
    async with running_worker(dsn, _flaky(5)):
        await wait_until(
            lambda: fetchall(
                aconn,
                "SELECT 1 FROM jobs WHERE id = %s AND attempts = 1 AND locked_by IS NULL "
                "AND max_attempts = 5",
                (job,),
            ),
            what="the first attempt to fail and wait for its retry, limit 5 in the row",
        )
    await aconn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job,))  # retry due
    # The first sweep runs min(5 s, prune_interval) after the start: time to look first.
    async with running_worker(dsn, _flaky(1), prune_interval=60.0):
        # The worker registers before it writes its declarations: the deploy is done once
        # kind_handlers says 1 (without this wait `why` could ask first and find 5).
        await wait_until(
            lambda: fetchall(
                aconn, "SELECT 1 FROM kind_handlers WHERE kind = 'flaky' AND max_attempts = 1"
            ),
            what="the new worker's declaration of max_attempts 1",
        )
        answer = await explain(aconn, "public", job)
        assert answer is not None and answer.state == "exhausted", answer
        assert "1 of 1" in answer.headline and "row says 5" in answer.headline, answer
        assert "moves it to dead letters" in answer.headline
        row = await get_job(aconn, "public", job)
        assert row is not None and (row.state, row.attempts, row.max_attempts) == (
            "exhausted",
            1,
            1,
        )
        await wait_until(
            lambda: fetchval(aconn, "SELECT reason FROM dead_letters WHERE id = %s", (job,)),
            timeout=15,
            what="the sweep to move the job to dead letters",
        )
    assert await fetchval(aconn, "SELECT reason FROM dead_letters WHERE id = %s", (job,)) == (
        "exhausted"
    )


async def test_a_rolling_deploy_that_raises_the_limit_is_not_undone_by_an_old_worker(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """An old worker (limit 1) runs; a new one (limit 5) starts, so the newest declaration is
    5, for every worker. The new worker's first attempt fails and waits for its retry; the old
    worker's sweep must not bury it, nor its claim refuse it."""
    job = await enqueue(aconn, "flaky", {})
    await aconn.execute("UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = %s", (job,))
    async with running_worker(dsn, _flaky(1), prune_interval=0.2):
        async with running_worker(dsn, _flaky(5)):
            await aconn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job,))
            await wait_until(
                lambda: fetchall(
                    aconn,
                    "SELECT 1 FROM jobs WHERE id = %s AND attempts >= 1 AND locked_by IS NULL",
                    (job,),
                ),
                what="a first attempt to fail",
            )
        await asyncio.sleep(1.5)  # several sweeps of the old worker
    assert await fetchall(aconn, "SELECT reason FROM dead_letters WHERE id = %s", (job,)) == []


async def test_a_job_whose_id_a_dead_letter_holds_still_moves_to_dead_letters(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """After TRUNCATE jobs RESTART IDENTITY, new jobs get ids that dead letters hold. A last
    attempt that fails, and an exhausted row the sweep finds, must still move to dead letters
    (under a new id, their old one in their history), the older dead letters untouched, and
    `why` must say what the sweep will do; later jobs no longer collide."""
    reg = Registry()

    @reg.handler("once", max_attempts=1)
    async def once(payload: Any) -> None:
        raise RuntimeError("no good")

    @reg.handler("other")
    async def other(payload: Any) -> None:
        return None

    burial = await enqueue(aconn, "once", {})
    swept = await enqueue(aconn, "other", {})
    await aconn.execute("UPDATE jobs SET attempts = max_attempts WHERE id = %s", (swept,))
    for clash in (burial, swept):
        await aconn.execute(
            "INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, "
            "run_at, reason) VALUES (%s, 'old', '{}', 1, 1, now(), now(), 'failed')",
            (clash,),
        )
    answer = await explain(aconn, "public", swept)
    assert answer is not None and "no worker is running to sweep it" in answer.headline, answer
    async with running_worker(dsn, reg, prune_interval=60.0):  # first sweep after 5 s
        answer = await explain(aconn, "public", swept)
        assert answer is not None and "under a new id" in answer.headline, answer
    async with running_worker(dsn, reg, prune_interval=0.2):
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT count(*) = 0 FROM jobs WHERE id = ANY(%s)", ([burial, swept],)
            ),
            timeout=15,
            what="both jobs to leave `jobs`",
        )
    old = await fetchall(
        aconn, "SELECT kind FROM dead_letters WHERE id = ANY(%s)", ([burial, swept],)
    )
    assert old == [("old",), ("old",)]
    moved = await fetchall(
        aconn,
        "SELECT kind, reason, errors::text FROM dead_letters WHERE kind IN ('once', 'other') "
        "ORDER BY kind",
    )
    assert [(k, r) for k, r, _ in moved] == [("once", "failed"), ("other", "exhausted")], moved
    assert (
        f"Renumbered: job {burial} " in moved[0][2] and f"Renumbered: job {swept} " in moved[1][2]
    )
    fresh = await enqueue(aconn, "other", {})
    assert fresh > await fetchval(aconn, "SELECT max(id) FROM dead_letters WHERE kind = 'old'")
