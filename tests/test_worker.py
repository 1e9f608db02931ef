"""The bundled worker in-process on a real PostgreSQL: outcomes, retries, dead letters, stats."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchall, fetchval, running_worker, wait_until

from jobtui import enqueue, enqueue_many
from jobtui.registry import Registry
from jobtui.sql import notify_channel
from jobtui.stats import N_BUCKETS
from jobtui.worker import Worker, WorkerSettings, current_job


async def pending(aconn: psycopg.AsyncConnection) -> int:
    return int(await fetchval(aconn, "SELECT count(*) FROM jobs WHERE finished_at IS NULL"))


async def test_async_and_plain_handlers_succeed_and_see_their_job(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    seen: list[tuple[str, Any, int, int, int, str]] = []

    @reg.handler("a")
    async def a(payload: Any) -> None:
        job = current_job()
        seen.append(("a", payload, job.id, job.attempt, job.max_attempts, job.kind))

    @reg.handler("p", max_attempts=7)
    def p(payload: Any) -> None:
        job_id, kind, attempt, max_attempts, cancelled = current_job()
        assert threading.current_thread() is not threading.main_thread()
        assert isinstance(cancelled, threading.Event) and not cancelled.is_set()
        seen.append(("p", payload, job_id, attempt, max_attempts, kind))

    ids = [await enqueue(aconn, "a", {"n": i}) for i in range(5)]
    ids += [await enqueue(aconn, "p", {"n": i}, max_attempts=3) for i in range(5)]
    async with running_worker(dsn, reg) as worker:
        await wait_until(lambda: len(seen) == 10, what="10 handler calls")
        await wait_until(lambda: _zero(aconn), what="outcomes written")
        row = await fetchall(
            aconn, "SELECT kinds, concurrency, pid FROM workers WHERE id = %s", (worker.id,)
        )
        assert row == [(["a", "p"], worker.settings.concurrency, worker.pid)]
        worker_id = worker.id
    rows = await fetchall(
        aconn,
        "SELECT id, attempts, finished_at IS NOT NULL, cancelled_at, locked_by FROM jobs "
        "ORDER BY id",
    )
    assert [r[0] for r in rows] == ids
    assert all(r[1:] == (1, True, None, worker_id) for r in rows)
    assert sorted((s[0], s[1]["n"]) for s in seen) == sorted(
        [("a", i) for i in range(5)] + [("p", i) for i in range(5)]
    )
    by_id = {s[2]: s for s in seen}
    assert {by_id[i][3] for i in ids} == {1}
    assert {by_id[i][4] for i in ids[:5]} == {5}  # the row's max_attempts
    assert {by_id[i][4] for i in ids[5:]} == {7}  # the handler's own max_attempts
    # The worker row is deleted on a clean exit; stats were flushed per kind.
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
    stats = await fetchall(
        aconn, "SELECT kind, sum(done), sum(failed), sum(dead) FROM kind_stats GROUP BY kind"
    )
    assert sorted(stats) == [("a", 5, 0, 0), ("p", 5, 0, 0)]
    hists = await fetchall(aconn, "SELECT hist, runtime_sum_ms FROM kind_stats")
    assert sum(sum(h) for h, _ in hists) == 10
    assert all(len(h) == N_BUCKETS and ms >= 0 for h, ms in hists)
    with pytest.raises(RuntimeError):
        current_job()


async def notify(aconn: psycopg.AsyncConnection, message: str) -> None:
    await aconn.execute("SELECT pg_notify(%s, %s)", (notify_channel("public"), message))


async def _zero(aconn: psycopg.AsyncConnection) -> bool:
    return await pending(aconn) == 0


async def test_an_idle_worker_is_woken_by_notify_not_by_polling(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started: list[float] = []

    @reg.handler("ping")
    async def ping(payload: Any) -> None:
        started.append(time.monotonic())

    async with running_worker(dsn, reg, poll_interval=30.0):
        await asyncio.sleep(0.2)  # idle: the first poll found nothing
        latencies = []
        for i in range(5):
            await enqueue(aconn, "ping", {})
            sent = time.monotonic()
            await wait_until(lambda i=i: len(started) > i, timeout=5, what="pickup")
            latencies.append(started[-1] - sent)
    assert sorted(latencies)[2] < 0.25, latencies


async def test_stats_from_several_flushes_add_up(dsn: str, aconn: psycopg.AsyncConnection) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        await asyncio.sleep(0.003)

    async with running_worker(dsn, reg, stats_flush_interval=0.05):
        for _ in range(3):
            await enqueue_many(aconn, [{"kind": "k"} for _ in range(20)])
            await wait_until(lambda: _zero(aconn), what="jobs done")
            await asyncio.sleep(0.12)
    row = await fetchall(aconn, "SELECT sum(done), sum(runtime_sum_ms) FROM kind_stats")
    assert row[0][0] == 60 and row[0][1] >= 60 * 3
    hists = [h for (h,) in await fetchall(aconn, "SELECT hist FROM kind_stats")]
    total = [sum(col) for col in zip(*hists, strict=True)]
    assert sum(total) == 60 and total[0] == total[1] == 0  # 3 ms sleeps land above 2 ms


async def test_backoff_schedule_then_dead_letter_keeps_id_and_history(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("flaky", backoff_base=60.0, backoff_cap=3600.0, jitter=0.1)
    def flaky(payload: Any) -> None:
        time.sleep(0.2)  # each attempt's run time is kept with its error
        raise ValueError(f"bad input {payload['n']}")

    job_id = await enqueue(aconn, "flaky", {"n": 42}, max_attempts=3)

    async def attempts_done(n: int) -> bool:
        row = await fetchall(
            aconn,
            "SELECT attempts, locked_at FROM jobs WHERE id = %s",
            (job_id,),
        )
        if not row:  # moved to dead letters
            return n == 3
        return row[0][0] == n and row[0][1] is None

    async with running_worker(dsn, reg):
        for attempt, expected in ((1, 60.0), (2, 120.0)):
            await wait_until(lambda a=attempt: attempts_done(a), what=f"attempt {attempt}")
            delay = await fetchval(
                aconn,
                "SELECT extract(epoch FROM run_at - (errors->-1->>'at')::timestamptz) "
                "FROM jobs WHERE id = %s",
                (job_id,),
            )
            assert expected * 0.9 - 0.01 <= float(delay) <= expected * 1.1 + 0.01
            row = await fetchall(
                aconn, "SELECT last_error, locked_by FROM jobs WHERE id = %s", (job_id,)
            )
            assert row == [("ValueError: bad input 42", None)]
            # Force the next attempt now rather than in a minute.
            await aconn.execute("UPDATE jobs SET run_at = now() WHERE id = %s", (job_id,))
            await notify(aconn, "flaky")
        await wait_until(lambda: attempts_done(3), what="attempt 3")
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM dead_letters"), what="dead letter"
        )
    assert await fetchval(aconn, "SELECT count(*) FROM jobs") == 0
    dead = await fetchall(
        aconn,
        "SELECT id, kind, payload, attempts, max_attempts, reason, last_error, errors "
        "FROM dead_letters",
    )
    assert len(dead) == 1
    did, kind, payload, attempts, max_attempts, reason, last_error, errors = dead[0]
    assert (did, kind, payload, attempts, max_attempts, reason) == (
        job_id,
        "flaky",
        {"n": 42},
        3,
        3,
        "failed",
    )
    assert last_error == "ValueError: bad input 42"
    assert [e["attempt"] for e in errors] == [1, 2, 3]
    for entry in errors:
        assert entry["error"] == "ValueError: bad input 42"
        assert entry["traceback"].startswith("Traceback (most recent call last):")
        assert "raise ValueError" in entry["traceback"] and "flaky" in entry["traceback"]
        assert entry["worker"] and entry["at"]
        ran = datetime.fromisoformat(entry["at"]) - datetime.fromisoformat(entry["started"])
        assert 0.2 <= ran.total_seconds() < 5
    stats = await fetchall(aconn, "SELECT sum(done), sum(failed), sum(dead) FROM kind_stats")
    assert stats == [(0, 3, 1)]


async def test_handler_max_attempts_is_written_into_the_row(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("twice", max_attempts=2, backoff_base=0.0)
    async def twice(payload: Any) -> None:
        raise RuntimeError("nope")

    job_id = await enqueue(aconn, "twice", {}, max_attempts=9)
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM dead_letters"), what="dead letter"
        )
    dead = await fetchall(aconn, "SELECT id, attempts, max_attempts FROM dead_letters")
    assert dead == [(job_id, 2, 2)]


async def test_timeouts_of_async_and_plain_handlers_are_failures(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    plain_saw_cancel = threading.Event()

    @reg.handler("slow_async", timeout=0.2, max_attempts=1)
    async def slow_async(payload: Any) -> None:
        await asyncio.sleep(30)

    @reg.handler("slow_plain", timeout=0.2, max_attempts=1)
    def slow_plain(payload: Any) -> None:
        if current_job().cancelled.wait(5):
            plain_saw_cancel.set()

    @reg.handler("own_timeout", timeout=10, max_attempts=1)
    async def own_timeout(payload: Any) -> None:
        raise TimeoutError("upstream did not answer")

    for kind in ("slow_async", "slow_plain", "own_timeout"):
        await enqueue(aconn, kind, {})
    started = time.monotonic()
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 3 FROM dead_letters"), what="3 dead"
        )
    assert time.monotonic() - started < 5
    rows = dict(await fetchall(aconn, "SELECT kind, last_error FROM dead_letters"))
    assert rows["slow_async"] == "TimeoutError: handler exceeded its timeout of 0.2s"
    assert rows["slow_plain"] == "TimeoutError: handler exceeded its timeout of 0.2s"
    assert rows["own_timeout"] == "TimeoutError: upstream did not answer"
    assert plain_saw_cancel.wait(2), "a plain handler past its timeout sees its cancel event"
    reasons = {r for (r,) in await fetchall(aconn, "SELECT reason FROM dead_letters")}
    assert reasons == {"failed"}


class Weird(BaseException):
    pass


async def test_base_exceptions_are_recorded_as_failures_and_the_worker_survives(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("exit_async", max_attempts=1)
    async def exit_async(payload: Any) -> None:
        raise SystemExit(3)

    @reg.handler("exit_plain", max_attempts=1)
    def exit_plain(payload: Any) -> None:
        raise SystemExit("bye")

    @reg.handler("interrupt", max_attempts=1)
    async def interrupt(payload: Any) -> None:
        raise KeyboardInterrupt

    @reg.handler("weird", max_attempts=1)
    def weird(payload: Any) -> None:
        raise Weird("odd")

    @reg.handler("fine")
    async def fine(payload: Any) -> None:
        return None

    for kind in ("exit_async", "exit_plain", "interrupt", "weird"):
        await enqueue(aconn, kind, {})
    async with running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) = 4 FROM dead_letters"), what="4 dead"
        )
        # Still alive: a later job runs.
        ok = await enqueue(aconn, "fine", {})
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (ok,)
            ),
            what="the later job",
        )
    rows = dict(await fetchall(aconn, "SELECT kind, last_error FROM dead_letters"))
    assert rows == {
        "exit_async": "SystemExit: 3",
        "exit_plain": "SystemExit: bye",
        "interrupt": "KeyboardInterrupt",
        "weird": "Weird: odd",
    }


async def test_unknown_kind_stays_pending_until_another_consumer_exhausts_it(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("known")
    async def known(payload: Any) -> None:
        return None

    stranger = await enqueue(aconn, "nobody_handles_this", {})
    # Also one with no attempts left: nothing can ever run it, so any worker moves it to
    # dead_letters, saying another consumer exhausted it (issue 15 item 3).
    spent = await enqueue(aconn, "nobody_handles_this", {}, max_attempts=1)
    await aconn.execute("UPDATE jobs SET attempts = 1 WHERE id = %s", (spent,))
    mine = await enqueue(aconn, "known", {})
    async with running_worker(dsn, reg, prune_interval=0.1):
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (mine,)
            ),
            what="the known job",
        )
        await asyncio.sleep(0.5)  # several heartbeats, rescues and prune rounds
    rows = await fetchall(
        aconn,
        "SELECT id, attempts, locked_at, finished_at FROM jobs WHERE id = ANY(%s) ORDER BY id",
        ([stranger, spent],),
    )
    assert rows == [(stranger, 0, None, None)]
    dead = await fetchall(aconn, "SELECT id, kind, reason, attempts FROM dead_letters")
    assert dead == [(spent, "nobody_handles_this", "exhausted by another consumer", 1)]


async def test_exhausted_rows_of_a_handled_kind_are_buried(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    spent = await enqueue(aconn, "k", {"x": 1}, max_attempts=2)
    await aconn.execute(
        "UPDATE jobs SET attempts = 2, last_error = 'Boom: left by someone else' WHERE id = %s",
        (spent,),
    )
    async with running_worker(dsn, reg, prune_interval=0.1):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM dead_letters"), what="dead letter"
        )
    dead = await fetchall(
        aconn, "SELECT id, attempts, max_attempts, reason, last_error FROM dead_letters"
    )
    assert dead == [(spent, 2, 2, "exhausted", "Boom: left by someone else")]


async def test_pause_stops_claims_of_that_kind_only_and_resume_wakes(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("a")
    async def a(payload: Any) -> None:
        return None

    @reg.handler("b")
    async def b(payload: Any) -> None:
        return None

    await aconn.execute("INSERT INTO paused_kinds (kind, paused_by) VALUES ('a', 'test')")
    await enqueue_many(aconn, [{"kind": "a"}] * 5 + [{"kind": "b"}] * 5)
    async with running_worker(dsn, reg, poll_interval=30.0):
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT count(*) = 5 FROM jobs WHERE kind = 'b' AND finished_at IS NOT NULL"
            ),
            what="kind b done",
        )
        await enqueue(aconn, "b", {})  # a NOTIFY while paused does not release kind a
        await asyncio.sleep(0.3)
        assert (
            await fetchval(
                aconn,
                "SELECT count(*) FROM jobs WHERE kind = 'a' AND attempts = 0 AND locked_at IS NULL",
            )
            == 5
        )
        # Resume: delete the row and notify; the worker wakes at once (polling is 30 s here).
        await aconn.execute("DELETE FROM paused_kinds WHERE kind = 'a'")
        await notify(aconn, "resume")
        await wait_until(lambda: _zero(aconn), timeout=3, what="kind a done after resume")


async def test_cancel_reaches_a_running_async_handler_through_notify(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started = asyncio.Event()
    saw_cancel = asyncio.Event()

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise

    job_id = await enqueue(aconn, "long", {})
    # Heartbeats are slow here, so only the NOTIFY can deliver the cancellation quickly.
    async with running_worker(dsn, reg, heartbeat_interval=20.0, heartbeat_timeout=60.0):
        await asyncio.wait_for(started.wait(), 5)
        t0 = time.monotonic()
        await aconn.execute("UPDATE jobs SET cancel_requested = true WHERE id = %s", (job_id,))
        await notify(aconn, "cancel")
        await asyncio.wait_for(saw_cancel.wait(), 2)
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT cancelled_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ),
            what="row cancelled",
        )
        assert time.monotonic() - t0 < 1.5
    row = await fetchall(
        aconn,
        "SELECT finished_at = cancelled_at, attempts, jsonb_array_length(errors) FROM jobs "
        "WHERE id = %s",
        (job_id,),
    )
    assert row == [(True, 1, 0)]
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0


async def test_cancel_reaches_a_plain_handler_on_the_heartbeat_without_notify(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started = threading.Event()

    @reg.handler("long_plain")
    def long_plain(payload: Any) -> None:
        started.set()
        job = current_job()
        for _ in range(300):
            job.check_cancelled()
            time.sleep(0.01)

    job_id = await enqueue(aconn, "long_plain", {})
    async with running_worker(dsn, reg):
        await wait_until(started.is_set, what="handler start")
        await aconn.execute("UPDATE jobs SET cancel_requested = true WHERE id = %s", (job_id,))
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT cancelled_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ),
            timeout=2,
            what="row cancelled",
        )


async def test_cancel_through_ops_if_available(dsn: str, aconn: psycopg.AsyncConnection) -> None:
    ops = pytest.importorskip("jobtui.ops")
    cancel_jobs = getattr(ops, "cancel_jobs", None)
    if cancel_jobs is None:
        pytest.skip("jobtui.ops.cancel_jobs does not exist yet")
    reg = Registry()
    started = asyncio.Event()

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.set()
        await asyncio.sleep(30)

    job_id = await enqueue(aconn, "long", {})
    async with running_worker(dsn, reg, heartbeat_interval=20.0, heartbeat_timeout=60.0):
        await asyncio.wait_for(started.wait(), 5)
        assert await cancel_jobs(aconn, "public", [job_id], actor=ops.Actor.current()) == 1
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT cancelled_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ),
            timeout=3,
            what="row cancelled",
        )


async def test_graceful_stop_finishes_within_grace_and_releases_the_rest(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started: set[str] = set()
    finished: set[str] = set()

    @reg.handler("job")
    async def job(payload: Any) -> None:
        started.add(payload["name"])
        await asyncio.sleep(payload["sleep"])
        finished.add(payload["name"])

    @reg.handler("plain_job")
    def plain_job(payload: Any) -> None:
        started.add(payload["name"])
        if current_job().cancelled.wait(payload["sleep"]):
            current_job().check_cancelled()
        finished.add(payload["name"])

    short = await enqueue(aconn, "job", {"name": "short", "sleep": 0.3})
    long = await enqueue(aconn, "job", {"name": "long", "sleep": 30})
    long_plain = await enqueue(aconn, "plain_job", {"name": "long_plain", "sleep": 30})
    worker = Worker(
        dsn,
        "public",
        reg,
        WorkerSettings(
            poll_interval=0.1,
            heartbeat_interval=0.2,
            heartbeat_timeout=2.0,
            shutdown_grace=1.0,
        ),
    )
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: len(started) == 3, what="three jobs running")
    t0 = time.monotonic()
    worker.request_stop()
    await asyncio.wait_for(task, 10)
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed < 5.0
    assert finished == {"short"}
    rows = await fetchall(
        aconn,
        "SELECT id, attempts, locked_at, locked_by, finished_at IS NOT NULL FROM jobs ORDER BY id",
    )
    assert rows == [
        (short, 1, rows[0][2], worker.id, True),
        (long, 0, None, None, False),  # released, the attempt given back
        (long_plain, 0, None, None, False),
    ]
    assert await fetchval(aconn, "SELECT count(*) FROM workers") == 0
    # A released job is picked up by the next worker.
    finished.clear()
    await aconn.execute("UPDATE jobs SET payload = jsonb_set(payload, '{sleep}', '0')")
    async with running_worker(dsn, reg):
        await wait_until(lambda: _zero(aconn), what="released jobs done")
    assert finished == {"long", "long_plain"}


async def test_stop_requested_before_run_returns_promptly(dsn: str) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    worker = Worker(dsn, "public", reg, WorkerSettings())
    worker.request_stop()
    await asyncio.wait_for(worker.run(), 5)


def test_settings_and_kinds_are_checked(dsn: str) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    with pytest.raises(ValueError, match="no handler for kind"):
        Worker(dsn, "public", reg, WorkerSettings(kinds=("k", "zzz")))
    with pytest.raises(ValueError, match="concurrency"):
        Worker(dsn, "public", reg, WorkerSettings(concurrency=0))
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        Worker(dsn, "public", reg, WorkerSettings(heartbeat_interval=5, heartbeat_timeout=5))


async def test_prune_deletes_old_finished_jobs_in_batches_never_dead_letters(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    await aconn.execute(
        "INSERT INTO jobs (kind, payload, finished_at) "
        "SELECT 'k', '{}', now() - interval '8 days' FROM generate_series(1, 2500)"
    )
    recent = await enqueue(aconn, "k", {})
    await aconn.execute(
        "UPDATE jobs SET finished_at = now() - interval '6 days' WHERE id = %s", (recent,)
    )
    pending_id = await enqueue(aconn, "other_kind", {}, run_at=None)
    await aconn.execute(
        "INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, "
        "run_at, reason, died_at) VALUES (999999, 'k', '{}', 5, 5, now() - interval '30 days', "
        "now() - interval '30 days', 'failed', now() - interval '30 days')"
    )
    async with running_worker(dsn, reg, prune_interval=0.1, retention=timedelta(days=7)):
        await wait_until(lambda: fetchval(aconn, "SELECT count(*) = 2 FROM jobs"), what="pruning")
    ids = sorted(r[0] for r in await fetchall(aconn, "SELECT id FROM jobs"))
    assert ids == sorted([recent, pending_id])
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 1


async def test_queue_sample_is_written_once_a_minute(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    await enqueue(aconn, "other", {})
    await enqueue(aconn, "other", {}, delay=timedelta(hours=1))
    async with running_worker(dsn, reg), running_worker(dsn, reg):
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) FROM queue_samples"), what="a sample"
        )
        await asyncio.sleep(0.3)
    rows = await fetchall(
        aconn,
        "SELECT ready, scheduled, running, retrying, dead, oldest_ready_age_s FROM queue_samples",
    )
    if len(rows) == 1:
        ready, scheduled, running, retrying, dead, age = rows[0]
        assert (ready, scheduled, running, retrying, dead) == (1, 1, 0, 0, 0)
        assert age is not None and age >= 0
    else:  # the two workers straddled a minute boundary
        assert len(rows) == 2


async def test_reconnects_when_its_connections_are_killed_and_loses_nothing(
    dsn: str, aconn: psycopg.AsyncConnection, caplog: pytest.LogCaptureFixture
) -> None:
    reg = Registry()
    runs: dict[int, int] = {}

    @reg.handler("k")
    async def k(payload: Any) -> None:
        await asyncio.sleep(0.02)
        runs[payload["n"]] = runs.get(payload["n"], 0) + 1

    caplog.set_level(logging.INFO, logger="jobtui.worker")
    await enqueue_many(aconn, [{"kind": "k", "payload": {"n": i}} for i in range(400)])
    killed = 0
    async with running_worker(dsn, reg, concurrency=10, heartbeat_timeout=5.0):
        for _ in range(4):
            await asyncio.sleep(0.2)
            killed += await fetchval(
                aconn,
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name LIKE 'jobtui worker%' AND pid <> pg_backend_pid() "
                "AND datname = current_database()",
            )
        assert killed >= 8
        assert await pending(aconn) > 0, "the kills happened while jobs were flowing"
        await enqueue_many(aconn, [{"kind": "k", "payload": {"n": 400 + i}} for i in range(100)])
        await wait_until(lambda: _zero(aconn), timeout=20, what="all jobs done")
    assert sorted(runs) == list(range(500))
    assert set(runs.values()) == {1}
    assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE finished_at IS NULL") == 0
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0
    assert "event=reconnected" in caplog.text


async def test_a_second_stop_request_skips_the_rest_of_the_grace(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started = asyncio.Event()

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.set()
        await asyncio.sleep(60)

    job_id = await enqueue(aconn, "long", {})
    worker = Worker(dsn, "public", reg, WorkerSettings(poll_interval=0.1, shutdown_grace=60.0))
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    worker.request_stop()
    await asyncio.sleep(0.2)
    assert not task.done()  # draining within a 60 s grace
    worker.request_stop()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - t0 < 3
    row = await fetchall(
        aconn, "SELECT attempts, locked_by, finished_at FROM jobs WHERE id = %s", (job_id,)
    )
    assert row == [(0, None, None)]


async def test_a_job_taken_from_under_a_live_worker_is_stopped_not_completed(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Invariant 2 from the other side: if another worker now owns the attempt (say this one
    was partitioned away past the heartbeat timeout), this worker stops its handler and its
    outcome is refused."""
    reg = Registry()
    started = asyncio.Event()
    stopped = asyncio.Event()

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.set()
            raise

    job_id = await enqueue(aconn, "long", {})
    async with running_worker(dsn, reg):
        await asyncio.wait_for(started.wait(), 5)
        # A live worker (its heartbeat is fresh for the whole test) now holds the next attempt.
        await aconn.execute(
            "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at) "
            "VALUES ('other:1:abc', 'other', 1, '{long}', 1, now() + interval '1 hour')"
        )
        await aconn.execute(
            "UPDATE jobs SET locked_by = 'other:1:abc', attempts = attempts + 1 WHERE id = %s",
            (job_id,),
        )
        await asyncio.wait_for(stopped.wait(), 3)  # at the next heartbeat
        await asyncio.sleep(0.3)
    row = await fetchall(
        aconn, "SELECT locked_by, attempts, finished_at FROM jobs WHERE id = %s", (job_id,)
    )
    assert row == [("other:1:abc", 2, None)]


async def test_start_up_errors_are_raised(empty_dsn: str) -> None:
    from jobtui.db import SchemaMissing

    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    with pytest.raises(SchemaMissing, match="jobtui migrate"):
        await Worker(empty_dsn, "public", reg, WorkerSettings()).run()
    with pytest.raises(psycopg.OperationalError):
        await Worker(
            "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2",
            "public",
            reg,
            WorkerSettings(),
        ).run()


async def test_a_slow_full_claim_makes_the_worker_refresh_the_statistics(
    dsn: str, aconn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stale statistics (a batch scheduled for one moment has come due) make the planner sort
    the whole backlog on every claim; a slow full claim triggers ANALYZE of jobs."""
    import jobtui.worker.dispatcher as dispatcher_module

    monkeypatch.setattr(dispatcher_module, "SLOW_CLAIM_S", 0.0)  # every full claim counts as slow
    reg = Registry()

    @reg.handler("noop")
    async def noop(payload: Any) -> None:
        return None

    analyzed = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'jobs'"
    before = await fetchval(aconn, analyzed)
    await enqueue_many(aconn, [{"kind": "noop"} for _ in range(50)])
    async with running_worker(dsn, reg, concurrency=5):
        await wait_until(
            lambda: fetchval(aconn, analyzed + " AND analyze_count > %s", (before,)),
            what="ANALYZE of jobs",
        )

        async def drained() -> bool:
            return await pending(aconn) == 0

        await wait_until(drained, what="drain")


async def test_at_most_concurrency_handlers_run_while_claims_overlap(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Two claims may be in flight at once; together they never exceed the free slots, and
    every job runs exactly once."""
    reg = Registry()
    running: set[int] = set()
    peak = 0
    runs: list[int] = []

    @reg.handler("j")
    async def j(payload: Any) -> None:
        nonlocal peak
        job = current_job().id
        assert job not in running
        running.add(job)
        peak = max(peak, len(running))
        runs.append(job)
        await asyncio.sleep(0.002 * (payload["n"] % 7))
        running.discard(job)

    await enqueue_many(aconn, [{"kind": "j", "payload": {"n": i}} for i in range(300)])
    ids = [r[0] for r in await fetchall(aconn, "SELECT id FROM jobs")]
    async with running_worker(dsn, reg, concurrency=8):

        async def drained() -> bool:
            return await pending(aconn) == 0

        await wait_until(drained, what="drain")
    assert sorted(runs) == sorted(ids)
    assert 1 < peak <= 8
    assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE attempts <> 1") == 0


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
async def test_outcome_writes_find_their_rows_by_id_whatever_the_statistics_say(
    aconn: psycopg.AsyncConnection, plan_mode: str
) -> None:
    """Statistics taken while no job was locked say `locked_by = me` matches no row; the
    writes that end attempts must still go by id, not scan the table (40 ms per 200 jobs at
    20 000 rows, growing with the table, was seen in the drain benchmark)."""
    from jobtui.sql import queries
    from jobtui.worker.flusher import GROUPS
    from jobtui.worker.outcomes import Outcomes
    from jobtui.worker.statements import WorkerDB

    await aconn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'k', '{}' FROM generate_series(1, 20000)"
    )
    await aconn.execute("ANALYZE jobs")
    await aconn.execute(f"SET plan_cache_mode = {plan_mode}")
    q, db = queries("public"), WorkerDB("public", "host:1:abc")
    # Batches as large as a busy worker's: with a few ids any plan is cheap.
    batch = Outcomes(
        done=[(i, 1) for i in range(1, 501)],
        cancelled=[(i, 1) for i in range(1001, 1501)],
        released=[(i, 1) for i in range(2001, 2501)],
        retry=[(i, 1, 1.5, "E: x", None) for i in range(3001, 3501)],
        bury=[(i, 1, "E: y", "tb") for i in range(4001, 4501)],
    )
    # The parameters worker_db sends, captured from a link that explains instead of running.
    plans: dict[str, str] = {}

    class Explaining:
        async def fetch(self, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
            name = next(
                n
                for n in ("complete", "cancelled", "release", "retry", "bury")
                if sql == getattr(q, f"worker_{n}")
            )
            cur = await aconn.execute("EXPLAIN " + sql, params)
            plans[name] = "\n".join(r[0] for r in await cur.fetchall())
            return []

    for group in GROUPS:
        await db.write_group(Explaining(), group, getattr(batch, group))  # type: ignore[arg-type]
    assert set(plans) == {"complete", "cancelled", "release", "retry", "bury"}
    for name, plan in plans.items():
        assert "Seq Scan on jobs" not in plan, f"worker_{name}:\n{plan}"


async def test_the_workers_row_says_how_it_is_woken(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """Issues 12 and 15: LISTEN connected and proven by the probe, the last wake-up, the poll.
    A LISTEN DSN that cannot connect makes it poll, and say why."""
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    async with running_worker(dsn, reg, poll_interval=1.5) as worker:

        async def row() -> Any:
            return await fetchall(
                aconn,
                "SELECT wakeup_mode, wakeup_note, listen_connected, last_wakeup_at, "
                "poll_interval_s FROM workers WHERE id = %s",
                (worker.id,),
            )

        # The probe's own echo is the first wake-up.
        await wait_until(lambda: _first(row(), lambda r: r[3] is not None), what="a wake-up")
        mode, note, connected, _, poll = (await row())[0]
        assert (mode, note, connected, poll) == ("listen", None, True, 1.5)
    bad = "postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=1"
    async with running_worker(dsn, reg, poll_interval=1.5, listen_dsn=bad) as worker:

        async def polling() -> Any:
            return await fetchval(
                aconn,
                "SELECT wakeup_mode = 'polling' AND NOT listen_connected "
                "AND wakeup_note LIKE 'LISTEN connection lost%%' AND poll_interval_s = 0.25 "
                "FROM workers WHERE id = %s",
                (worker.id,),
            )

        await wait_until(polling, what="the worker to say it polls")
        t0 = time.monotonic()
        job = await enqueue(aconn, "k", {})
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job,)
            ),
            what="the job, picked up by polling",
        )
        assert time.monotonic() - t0 < 1.0


async def _first(rows: Any, test: Any) -> bool:
    got = await rows
    return bool(got) and test(got[0])
