"""Pickup from an idle queue (issue 14): a NOTIFY launches the claim at once, from the poke,
without waiting for the claim loop's next turn, and never where the loop itself would not claim
(fenced, backing off after a failed claim, stopping, no free slot)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from apps.helpers import fetchval, running_worker, wait_until

from jobtui import enqueue
from jobtui.registry import Registry
from jobtui.worker.dispatcher import Dispatcher

QUIET = {"poll_interval": 30.0, "concurrency": 4}  # the loop claims only when woken


def registry(started: list[Any]) -> Registry:
    reg = Registry()

    @reg.handler("p")
    async def p(payload: Any) -> None:
        started.append(payload["n"])

    return reg


async def idle(d: Dispatcher) -> None:
    await wait_until(lambda: not d._claims and d.free_slots() == 4, what="no claim in flight")


@asynccontextmanager
async def idle_worker(dsn: str, started: list[Any]) -> AsyncIterator[Dispatcher]:
    """A worker whose handler of kind `p` appends its payload's `n` to `started`; its
    dispatcher, once no claim is in flight."""
    async with running_worker(dsn, registry(started), **QUIET) as worker:
        d = worker._dispatcher
        assert d is not None
        await idle(d)
        yield d


async def test_a_poke_launches_the_claim_itself_and_the_job_runs(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    started: list[Any] = []
    async with idle_worker(dsn, started) as d:
        job = await enqueue(aconn, "p", {"n": 1})
        await wait_until(lambda: started == [1], what="the NOTIFY's job to start")
        await idle(d)
        # Synchronously, before any await: the claim task exists and holds the free slots.
        d.poke()
        assert len(d._claims) == 1
        assert d.free_slots() == 0
        d.poke()  # no slot left: no second claim
        assert len(d._claims) == 1
        await idle(d)
    assert await fetchval(aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job,))


async def test_a_poke_claims_nothing_while_fenced_backing_off_or_stopping(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    started: list[Any] = []
    async with idle_worker(dsn, started) as d:
        fenced = d.fenced
        d.fenced = lambda: True
        await enqueue(aconn, "p", {"n": 1})  # its NOTIFY pokes too
        d.poke()
        assert not d._claims
        await asyncio.sleep(0.3)
        assert started == []
        assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE locked_by IS NULL") == 1
        d.fenced = fenced

        # A failed claim may have committed with its reply lost: the loop releases orphans
        # before any claim, so a poke must not claim first.
        d._check_orphans = True
        d.poke()
        assert not d._claims
        d._check_orphans = False
        d._resume_at = time.monotonic() + 60.0  # backing off
        d.poke()
        assert not d._claims
        d._resume_at = 0.0
        d.poke()  # now it may
        assert len(d._claims) == 1
        await wait_until(lambda: started == [1], what="the job to start once claiming is allowed")
        await idle(d)
        d.stop()
        d.poke()
        assert not d._claims


async def test_the_periodic_limits_read_follows_the_claim_and_still_finds_a_new_limit(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    started: list[Any] = []
    async with idle_worker(dsn, started) as d:
        assert d.limited == set()
        calls: list[str] = []
        db = d.db
        claim, limited_kinds = db.claim, db.limited_kinds

        async def traced_claim(*args: Any, **kwargs: Any) -> Any:
            calls.append("claim")
            return await claim(*args, **kwargs)

        async def traced_limited_kinds(*args: Any, **kwargs: Any) -> Any:
            calls.append("limited_kinds")
            return await limited_kinds(*args, **kwargs)

        db.claim = traced_claim  # type: ignore[method-assign]
        db.limited_kinds = traced_limited_kinds  # type: ignore[method-assign]

        # The read is due: the job is claimed (and started) first, the limits read after.
        d._limits_read_at = time.monotonic() - 60.0
        await enqueue(aconn, "p", {"n": 1})
        await wait_until(lambda: started == [1], what="the job to start")
        await wait_until(lambda: "limited_kinds" in calls, what="the limits read")
        assert calls[:2] == ["claim", "limited_kinds"]

        # An operator limits the kind without a NOTIFY: the fast claim leaves it out by itself,
        # and the periodic read that follows the claim finds the limit, so claim_limited
        # takes the job at the loop's next turn, within the limit.
        await aconn.execute(
            "INSERT INTO kind_limits (kind, overridden, override_concurrency, overridden_by, "
            "overridden_at) VALUES ('p', true, 1, 'test', now()) ON CONFLICT (kind) DO UPDATE "
            "SET overridden = true, override_concurrency = 1, overridden_by = 'test', "
            "overridden_at = now()"
        )
        await idle(d)
        calls.clear()
        d._limits_read_at = time.monotonic() - 60.0
        await enqueue(aconn, "p", {"n": 2})
        await wait_until(lambda: started == [1, 2], what="the newly limited kind's job to start")
        assert d.limited == {"p"}
        assert calls[:2] == ["claim", "limited_kinds"]
