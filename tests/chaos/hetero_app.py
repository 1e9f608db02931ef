"""Handlers of the heterogeneous chaos run: plain and async, well-behaved and not.

Every execution writes a ledger row from its own connection: which job and attempt, which
worker process, when the handler started (its own clock, taken before anything else, so a
write delayed by a database restart does not move it) and ended, and two readings taken from
the database independently of whether this worker still holds the row: the attempt's
`locked_at` if it does (NULL otherwise), and the job's `cancelled_at` and `cancel_requested`
whatever holds it. The run is judged from this ledger, not from what workers report.

- `h_plain`: plain, polls its cancel event, fails at random; handler limit 3 (rows say 5).
- `h_async`: async, fails at random; no handler limit (rows are enqueued with 4).
- `h_overrun`: plain with a 0.25 s timeout; a third of the time sleeps 0.5 s ignoring its
  cancel event, so its thread is abandoned while its job is retried; handler limit 3.
- `h_stubborn`: async, swallows its first cancellation and carries on; handler limit 2.
- `h_capped`: plain, at most 2 at once across every worker (a concurrency limit); a fifth of
  the time its thread overruns its 0.2 s timeout.
- `h_metered`: async, at most RATE starts a second across every worker (a rate limit).
- `h_tick`: async; enqueued by an every-second schedule (`chaos_tick`), not by the run.

Issue 25: with `CHAOS_LOWERED=1` (the second half of the run: a deploy) `h_plain` declares
max_attempts 2 instead of 3; with `CHAOS_FREEZE_IN_CLAIM=p` a worker SIGSTOPs itself, with
probability p, right after a claim's reply arrived and before its jobs start (the run's
parent sends SIGCONT later): a freeze mid-claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from chaos_app import _write  # the ledger writer that rides out a database restart

from jobtui.registry import Registry
from jobtui.worker import current_job

registry = Registry()
FAIL_RATE = float(os.environ.get("CHAOS_FAIL_RATE", "0.2"))
MAX_SLEEP_S = float(os.environ.get("CHAOS_MAX_SLEEP", "0.1"))
LOWERED = os.environ.get("CHAOS_LOWERED") == "1"
# The most counted attempts a job of each kind may have (h_plain: 3 before the deploy that
# lowers it to 2; a job counted 3 before it never runs a fourth).
LIMITS = {
    "h_plain": 3,
    "h_async": 4,
    "h_overrun": 3,
    "h_stubborn": 2,
    "h_capped": 4,
    "h_metered": 4,
    "h_tick": 5,
}
ROW_MAX = {
    "h_plain": 5,
    "h_async": 4,
    "h_overrun": 5,
    "h_stubborn": 5,
    "h_capped": 4,
    "h_metered": 4,
    "h_tick": 5,
}  # at enqueue
CAPPED = 2  # h_capped's concurrency limit
RATE = 20  # h_metered's starts per second
FREEZE_IN_CLAIM = float(os.environ.get("CHAOS_FREEZE_IN_CLAIM", "0"))

LEDGER_DDL = """
CREATE TABLE hetero_ledger (
  entry      bigserial primary key,
  job_id     bigint not null,
  attempt    int not null,
  kind       text not null,
  pid        int not null,
  worker     text not null,
  claimed_at timestamptz,
  cancelled_at timestamptz,
  started_at timestamptz not null,
  ended_at   timestamptz
)"""


def start(job_id: int, attempt: int, kind: str, worker: str) -> int:
    at = datetime.now(UTC)
    return _write(
        "INSERT INTO hetero_ledger (job_id, attempt, kind, pid, worker, started_at, claimed_at, "
        "cancelled_at) VALUES (%s, %s, %s, %s, %s, %s, (SELECT locked_at FROM jobs WHERE id = %s "
        "AND attempts = %s AND locked_by = %s), (SELECT cancelled_at FROM jobs WHERE id = %s)) "
        "RETURNING entry",
        (job_id, attempt, kind, os.getpid(), worker, at, job_id, attempt, worker, job_id),
    )


def end(entry: int) -> None:
    _write(
        "UPDATE hetero_ledger SET ended_at = clock_timestamp() WHERE entry = %s RETURNING entry",
        (entry,),
    )


def _begin() -> int:
    job = current_job()
    return start(job.id, job.attempt, job.kind, job.worker_id)


@contextlib.asynccontextmanager
async def _ledgered() -> AsyncIterator[None]:
    """The start and end rows of an async handler. The start is written in a thread; a
    cancel that comes while it is written must not leave the row without its end (the row
    would say the handler never ended, and every later attempt ran beside it)."""
    job = current_job()
    started = asyncio.ensure_future(
        asyncio.to_thread(start, job.id, job.attempt, job.kind, job.worker_id)
    )
    try:
        await asyncio.shield(started)
        yield
    finally:
        await asyncio.shield(_end_after(started))


async def _end_after(started: asyncio.Future[int]) -> None:
    await asyncio.to_thread(end, await started)


def _maybe_fail() -> None:
    if random.random() < FAIL_RATE:
        raise RuntimeError(f"chaos: simulated failure of job {current_job().id}")


@registry.handler("h_plain", max_attempts=2 if LOWERED else 3, backoff_base=0.05, backoff_cap=0.3)
def h_plain(payload: dict[str, Any]) -> None:
    entry = _begin()
    try:
        if current_job().cancelled.wait(random.random() * MAX_SLEEP_S):
            current_job().check_cancelled()
        _maybe_fail()
    finally:
        end(entry)


@registry.handler("h_async", backoff_base=0.05, backoff_cap=0.3)
async def h_async(payload: dict[str, Any]) -> None:
    async with _ledgered():
        await asyncio.sleep(random.random() * MAX_SLEEP_S)
        _maybe_fail()


@registry.handler("h_overrun", max_attempts=3, timeout=0.25, backoff_base=0.05, backoff_cap=0.3)
def h_overrun(payload: dict[str, Any]) -> None:
    entry = _begin()
    try:
        time.sleep(0.5 if random.random() < 0.33 else random.random() * 0.1)
        _maybe_fail()
    finally:
        end(entry)


@registry.handler("h_stubborn", max_attempts=2, backoff_base=0.05, backoff_cap=0.3)
async def h_stubborn(payload: dict[str, Any]) -> None:
    async with _ledgered():
        try:
            await asyncio.sleep(random.random() * MAX_SLEEP_S * 2)
        except asyncio.CancelledError:  # ignores its cancellation (once) and carries on
            await asyncio.sleep(0.2)
        _maybe_fail()


@registry.handler("h_capped", concurrency=CAPPED, timeout=0.2, backoff_base=0.05, backoff_cap=0.3)
def h_capped(payload: dict[str, Any]) -> None:
    entry = _begin()
    try:  # a fifth of the time its thread overruns the timeout: it must still hold its slot
        time.sleep(0.4 if random.random() < 0.2 else random.random() * MAX_SLEEP_S)
        _maybe_fail()
    finally:
        end(entry)


@registry.handler("h_metered", rate=RATE, backoff_base=0.05, backoff_cap=0.3)
async def h_metered(payload: dict[str, Any]) -> None:
    async with _ledgered():
        _maybe_fail()


@registry.periodic("* * * * * *", name="chaos_tick")
@registry.handler("h_tick")
async def h_tick(payload: dict[str, Any]) -> None:
    return None


if FREEZE_IN_CLAIM:
    from jobtui.worker import statements

    _decode_rows = statements.decode_rows

    async def _freezing_decode(rows: Any, *args: Any) -> Any:
        if rows and random.random() < FREEZE_IN_CLAIM:
            os.kill(os.getpid(), signal.SIGSTOP)  # mid-claim: committed, nothing started
        return await _decode_rows(rows, *args)

    statements.decode_rows = _freezing_decode
