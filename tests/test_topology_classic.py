"""Issue 15 item 3: a consumer written from the article, running alongside the bundled worker.

`topology.classic_consume` runs the article's claim query verbatim, completes with
`finished_at = now()`, retries in 2^attempts minutes and, when `attempts >= max_attempts`,
gives up: the row is left unlocked and unfinished for a person to look at.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import psycopg
from apps.helpers import fetchval, running_worker, wait_until
from test_cli_support import assert_ok, run_cli
from topology import classic_consume, quick_registry


def _fails(payload: Any) -> None:
    raise RuntimeError("legacy handler failed")


def _give_up_three(dsn: str, conn: psycopg.Connection) -> list[int]:
    """Three 'legacy' rows the classic consumer gave up on (one attempt allowed each)."""
    conn.execute(
        "INSERT INTO jobs (kind, payload, max_attempts, run_at) "
        "SELECT 'legacy', '{}', 1, now() - interval '1 min' FROM generate_series(1, 3)"
    )
    tally = classic_consume(dsn, {"legacy": _fails}, max_claims=3)
    assert len(tally.given_up) == 3
    return tally.given_up


def test_rows_given_up_by_a_classic_consumer_are_exhausted_not_ready(
    dsn: str, conn: psycopg.Connection
) -> None:
    _give_up_three(dsn, conn)
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
    assert data["totals"]["ready"] == 0, data["totals"]
    assert data["totals"].get("exhausted") == 3, data["totals"]


async def test_the_worker_moves_rows_exhausted_by_another_consumer_of_any_kind_to_dead_letters(
    dsn: str, conn: psycopg.Connection, aconn: psycopg.AsyncConnection
) -> None:
    given_up = await asyncio.to_thread(_give_up_three, dsn, conn)

    async def buried() -> int:
        return int(await fetchval(aconn, "SELECT count(*) FROM dead_letters"))

    async with running_worker(dsn, quick_registry(), prune_interval=0.3):
        # Housekeeping runs every prune_interval; the 'legacy' kind is not the worker's.
        await wait_until(buried, timeout=5, what="exhausted 'legacy' rows in dead_letters")
    rows = conn.execute("SELECT id, kind, reason FROM dead_letters ORDER BY id").fetchall()
    assert rows == [(i, "legacy", "exhausted by another consumer") for i in sorted(given_up)]


def test_throughput_says_it_counts_the_bundled_worker_only(
    dsn: str, conn: psycopg.Connection
) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'legacy', '{}' FROM generate_series(1, 10)"
    )
    assert len(classic_consume(dsn, {"legacy": lambda p: None}).done) == 10
    data = json.loads(assert_ok(run_cli("stats", "--json", dsn=dsn)))
    # Throughput counts the bundled worker's completions only, and says so.
    assert data["throughput_source"] == "bundled worker only", data


async def test_a_classic_consumer_and_the_bundled_worker_share_the_queue(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Both drain one queue; every job finishes exactly once (works today, a guard)."""
    await aconn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'quick', '{}' FROM generate_series(1, 400)"
    )
    stop = threading.Event()
    result: dict[str, Any] = {}

    def consumer() -> None:
        result["tally"] = classic_consume(
            dsn, {"quick": lambda p: None}, max_claims=10_000, idle_exit=False, stop=stop.is_set
        )

    thread = threading.Thread(target=consumer)
    thread.start()
    try:
        async with running_worker(dsn, quick_registry()):

            async def drained() -> bool:
                return not await fetchval(
                    aconn, "SELECT count(*) FROM jobs WHERE finished_at IS NULL"
                )

            await wait_until(drained, timeout=15, what="both consumers to drain the queue")
    finally:
        stop.set()
        thread.join(10)
    tally = result["tally"]
    by_worker = await fetchval(
        aconn, "SELECT count(*) FROM jobs WHERE locked_by IS NOT NULL AND attempts = 1"
    )
    assert len(set(tally.done)) == len(tally.done)
    assert tally.retried == [] and tally.given_up == []
    assert len(tally.done) + by_worker == 400
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0
