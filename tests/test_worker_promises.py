"""Issue 9: the engine keeps its promises in situations an operator meets every day.

Each test sets up one of the issue's items on a real PostgreSQL (different heartbeat settings,
an operator cancelling a job held by a dead worker, locks held by other sessions, a bad outcome
row, an overrunning plain handler, a crash under a handler's own attempt limit, two workers
flushing statistics at once, a job rescued and re-claimed by the same worker, a skewed clock).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import basic
from apps.helpers import fetchall, fetchval, running_worker, wait_until
from test_worker_crash import Procs, started_attempt

from jobtui import enqueue, enqueue_many
from jobtui.ops import Actor, cancel_jobs
from jobtui.registry import Registry
from jobtui.worker import current_job

OPERATOR = Actor("operator@test")
README = Path(__file__).parent.parent / "README.md"


async def _equals(value: Any, expected: Any) -> bool:
    return await value == expected


async def job_row(aconn: psycopg.AsyncConnection, job_id: int) -> tuple[Any, ...]:
    rows = await fetchall(
        aconn,
        "SELECT attempts, locked_by, finished_at IS NOT NULL, cancelled_at IS NOT NULL, errors "
        "FROM jobs WHERE id = %s",
        (job_id,),
    )
    return tuple(rows[0]) if rows else ()


async def lock_by_dead_worker(aconn: psycopg.AsyncConnection, job_id: int) -> None:
    await aconn.execute(
        "INSERT INTO workers (id, host, pid, kinds, concurrency, heartbeat_at) "
        "VALUES ('h:1:dead', 'h', 1, '{k}', 1, now() - interval '1 hour') ON CONFLICT DO NOTHING"
    )
    await aconn.execute(
        "UPDATE jobs SET attempts = attempts + 1, locked_at = now() - interval '1 hour', "
        "locked_by = 'h:1:dead' WHERE id = %s",
        (job_id,),
    )


# ---------------------------------------------------------------- 1. a cancel wins


async def test_cancel_of_a_job_held_by_a_dead_worker_ends_it_cancelled_and_it_never_runs(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    ran: list[int] = []

    @reg.handler("k")
    async def k(payload: Any) -> None:
        ran.append(current_job().id)

    job_id = await enqueue(aconn, "k", {})
    await lock_by_dead_worker(aconn, job_id)
    assert await cancel_jobs(aconn, "public", [job_id], actor=OPERATOR) == 1
    async with running_worker(dsn, reg, heartbeat_interval=0.1, heartbeat_timeout=1.0):
        await wait_until(
            lambda: fetchval(aconn, "SELECT finished_at FROM jobs WHERE id = %s", (job_id,)),
            timeout=5,
            what="the rescue to end the job",
        )
        await asyncio.sleep(0.5)  # a few more claim and rescue rounds
    assert ran == []
    attempts, _locked_by, finished, cancelled, errors = await job_row(aconn, job_id)
    assert (attempts, finished, cancelled) == (1, True, True)
    assert errors[-1]["error"].startswith("WorkerLost:")  # how the attempt ended, in history
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters") == 0
    audit = await fetchall(aconn, "SELECT action, ids FROM audit_log")
    assert audit == [("cancel_jobs", [job_id])]


async def test_a_cancel_committed_while_a_failing_attempt_ends_wins_over_the_retry(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """The cancel commits but has not reached the worker yet (its NOTIFY is in flight, the next
    heartbeat is far) when the handler fails: the retry must not send the job back."""
    reg = Registry()
    runs: list[int] = []
    started = threading.Event()

    @reg.handler("stubborn", max_attempts=5, backoff_base=0.0, jitter=0.0)
    def stubborn(payload: Any) -> None:
        runs.append(current_job().attempt)
        started.set()
        time.sleep(0.8)
        raise RuntimeError("failed anyway")

    job_id = await enqueue(aconn, "stubborn", {})
    async with running_worker(dsn, reg, heartbeat_interval=20.0, heartbeat_timeout=60.0):
        await wait_until(started.is_set, what="the handler to start")
        await asyncio.sleep(0.2)  # the worker's own start-up checks of its jobs are over
        # What ops_cancel_ids commits for a running job, without the NOTIFY that follows it.
        await aconn.execute("UPDATE jobs SET cancel_requested = true WHERE id = %s", (job_id,))
        await wait_until(
            lambda: fetchval(aconn, "SELECT finished_at FROM jobs WHERE id = %s", (job_id,)),
            what="the job to end",
        )
        await asyncio.sleep(0.5)
    assert runs == [1]
    attempts, _locked_by, finished, cancelled, errors = await job_row(aconn, job_id)
    assert (attempts, finished, cancelled) == (1, True, True)
    assert errors[-1]["error"] == "RuntimeError: failed anyway"


async def test_a_cancel_reaches_a_running_handler_at_once_not_at_the_next_heartbeat(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    started = asyncio.Event()
    stopped: list[float] = []

    @reg.handler("long")
    async def long(payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.append(time.monotonic())
            raise

    job_id = await enqueue(aconn, "long", {})
    async with running_worker(dsn, reg, heartbeat_interval=20.0, heartbeat_timeout=60.0):
        await asyncio.wait_for(started.wait(), 10)
        await asyncio.sleep(0.3)  # past the start-up checks
        asked = time.monotonic()
        await cancel_jobs(aconn, "public", [job_id], actor=OPERATOR)
        await wait_until(lambda: stopped, timeout=5, what="the handler to be cancelled")
    assert stopped[0] - asked < 2.0
    assert (await job_row(aconn, job_id))[2:4] == (True, True)


# ----------------------------------------------- 2. liveness by the owner's own settings


async def test_workers_with_different_heartbeat_settings_never_rescue_each_others_live_jobs(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    starts: list[tuple[int, str]] = []

    @reg.handler("long")
    async def long(payload: Any) -> None:
        starts.append((current_job().attempt, current_job().worker_id))
        await asyncio.sleep(3.0)

    async with running_worker(dsn, reg, heartbeat_interval=1.5, heartbeat_timeout=10.0) as slow:
        job_id = await enqueue(aconn, "long", {})
        await wait_until(lambda: starts, what="the first start")
        # A new worker from a rolling deploy, with a much shorter heartbeat timeout.
        async with running_worker(dsn, reg, heartbeat_interval=0.1, heartbeat_timeout=0.5):
            await asyncio.sleep(2.5)
        await wait_until(
            lambda: fetchval(aconn, "SELECT finished_at FROM jobs WHERE id = %s", (job_id,)),
            what="the job to finish",
        )
    assert starts == [(1, slow.id)]
    row = await fetchall(aconn, "SELECT attempts, errors FROM jobs WHERE id = %s", (job_id,))
    assert row == [(1, [])]


# ------------------------------------------ 3. housekeeping never delays the heartbeat


async def test_the_heartbeat_goes_on_while_analyze_and_samples_are_blocked_by_locks(
    dsn: str,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A VACUUM or CREATE INDEX CONCURRENTLY holds SHARE UPDATE EXCLUSIVE on jobs (ANALYZE
    waits for it); another session holds queue_samples. The heartbeat must not wait."""
    import jobtui.worker.dispatcher as dispatcher_module

    caplog.set_level(logging.INFO, logger="jobtui.worker")
    monkeypatch.setattr(dispatcher_module, "SLOW_CLAIM_S", 0.0)  # every full claim asks ANALYZE
    reg = Registry()

    @reg.handler("noop")
    async def noop(payload: Any) -> None:
        return None

    async with await psycopg.AsyncConnection.connect(dsn) as blocker:
        await blocker.execute("LOCK TABLE jobs IN SHARE UPDATE EXCLUSIVE MODE")
        await blocker.execute("LOCK TABLE queue_samples IN ACCESS EXCLUSIVE MODE")
        async with running_worker(
            dsn,
            reg,
            concurrency=2,
            heartbeat_interval=0.2,
            heartbeat_timeout=1.0,
            housekeeping_lock_timeout=0.2,
        ) as worker:
            # One commit for the three, so a claim finds its batch full (the claim a NOTIFY
            # starts at once would otherwise take each job alone, never a full one).
            await enqueue_many(aconn, [{"kind": "noop"} for _ in range(3)])
            beats = []
            for _ in range(4):
                beats.append(
                    await fetchval(
                        aconn, "SELECT heartbeat_at FROM workers WHERE id = %s", (worker.id,)
                    )
                )
                await asyncio.sleep(0.6)
            await wait_until(
                lambda: fetchval(aconn, "SELECT count(*) = 0 FROM jobs WHERE finished_at IS NULL"),
                what="the jobs to run while the locks are held",
            )
        await blocker.rollback()
    assert len(set(beats)) == 4, beats  # a new heartbeat every time we looked
    skipped = [r.getMessage() for r in caplog.records if "event=chore_skipped" in r.getMessage()]
    assert any("chore=analyze" in m and "lock timeout" in m for m in skipped), skipped
    assert any("chore=queue_sample" in m for m in skipped), skipped


async def test_worker_connections_have_keepalives_and_a_statement_timeout(dsn: str) -> None:
    from jobtui.worker.link import Link

    link = Link(dsn, "test", statement_timeout=1.5, lock_timeout=0.25)
    try:
        conn = await link.connection()
        cur = await conn.execute(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
        )
        assert await cur.fetchone() == ("1500ms", "250ms")
        options = {o.keyword.decode(): o.val for o in conn.pgconn.info}
        assert options["keepalives"] == b"1" and options["keepalives_idle"] == b"10"
        with pytest.raises(psycopg.errors.QueryCanceled):
            await link.fetch("SELECT pg_sleep(5)")
    finally:
        await link.close()


# ------------------------------------------------ 4. one bad outcome row blocks nothing


async def test_an_outcome_the_database_refuses_is_set_aside_and_the_others_are_written(
    dsn: str, aconn: psycopg.AsyncConnection, caplog: pytest.LogCaptureFixture
) -> None:
    """A trigger of the operator's refuses one job's burial (an id collision once did, until
    migration 0023 moved such a job under a new id); the burial behind it, a cancel and a
    success must still be written."""
    caplog.set_level(logging.INFO, logger="jobtui.worker")
    reg = Registry()
    long_started = asyncio.Event()

    @reg.handler("fail1", max_attempts=1)
    async def fail1(payload: Any) -> None:
        await asyncio.sleep(payload["delay"])
        raise ValueError("no good")

    @reg.handler("long")
    async def long(payload: Any) -> None:
        long_started.set()
        await asyncio.sleep(60)

    @reg.handler("ok")
    async def ok(payload: Any) -> None:
        await asyncio.sleep(payload["delay"])

    await aconn.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
        "IF NEW.payload ? 'refuse' THEN RAISE EXCEPTION 'refused by the operator'; END IF; "
        "RETURN NEW; END$$"
    )
    await aconn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON dead_letters FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    clash = await enqueue(aconn, "fail1", {"delay": 0, "refuse": True})
    later = await enqueue(aconn, "fail1", {"delay": 0.4})
    cancelled = await enqueue(aconn, "long", {})
    done = await enqueue(aconn, "ok", {"delay": 0.6})
    async with running_worker(dsn, reg) as worker:
        await asyncio.wait_for(long_started.wait(), 10)
        await asyncio.sleep(0.2)  # the clashing burial has been tried
        await cancel_jobs(aconn, "public", [cancelled], actor=OPERATOR)

        async def written() -> bool:
            rows = await fetchall(
                aconn,
                "SELECT (SELECT count(*) FROM dead_letters WHERE id = %s), "
                "(SELECT cancelled_at IS NOT NULL FROM jobs WHERE id = %s), "
                "(SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s)",
                (later, cancelled, done),
            )
            return rows[0] == (1, True, True)

        await wait_until(written, timeout=10, what="the other outcomes to be written")
        await asyncio.sleep(0.3)  # a heartbeat writes the count into the workers row
        row = await fetchall(
            aconn,
            "SELECT outcome_errors, last_outcome_error FROM workers WHERE id = %s",
            (worker.id,),
        )
    assert row[0][0] == 1
    assert f"job {clash} attempt 1 (bury)" in row[0][1] and "refused by" in row[0][1]
    # The refused job is neither lost nor half-moved: still in jobs, not a dead letter.
    assert (await job_row(aconn, clash))[2] is False
    assert await fetchval(aconn, "SELECT count(*) FROM dead_letters WHERE id = %s", (clash,)) == 0
    messages = [r.getMessage() for r in caplog.records]
    failed = [m for m in messages if "event=outcome_write_failed" in m]
    assert len(failed) == 1 and "refused by" in failed[0], failed
    assert not any("unreachable" in m or "final_flush_failed" in m for m in messages)


async def test_a_job_row_locked_by_another_session_delays_only_its_own_outcome(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """An operator's open transaction holds one running job's row: the others' outcomes must
    be written meanwhile, and that one once the lock is gone."""
    reg = Registry()
    started = asyncio.Event()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        if payload["held"]:
            started.set()
        await asyncio.sleep(payload["delay"])

    held = await enqueue(aconn, "k", {"held": True, "delay": 0.3})
    others = [await enqueue(aconn, "k", {"held": False, "delay": 0.6}) for _ in range(4)]
    finished = "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL AND id = ANY(%s)"
    async with running_worker(dsn, reg) as worker:
        await asyncio.wait_for(started.wait(), 10)
        async with await psycopg.AsyncConnection.connect(dsn) as operator:
            await operator.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (held,))
            await wait_until(
                lambda: _equals(fetchval(aconn, finished, (others,)), 4),
                timeout=8,
                what="the other jobs' outcomes while one row is held",
            )
            assert await fetchval(aconn, finished, ([held],)) == 0
            await operator.rollback()
        await wait_until(
            lambda: fetchval(aconn, finished, ([held],)), timeout=10, what="the held job"
        )
        assert worker.running_count == 0
    assert await fetchval(aconn, "SELECT count(*) FROM jobs WHERE attempts <> 1") == 0


# ------------------------------------- 5. an overrunning plain handler keeps its slot


async def test_an_overrunning_plain_handler_holds_its_slot_and_later_jobs_are_not_charged(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    quick_runs: list[int] = []

    @reg.handler("overrun", max_attempts=1, timeout=0.3)
    def overrun(payload: Any) -> None:
        time.sleep(1.2)  # ignores its cancel event

    @reg.handler("quick", max_attempts=1, timeout=0.5)
    def quick(payload: Any) -> None:
        quick_runs.append(current_job().id)
        time.sleep(0.05)

    slow = await enqueue(aconn, "overrun", {}, priority=10)
    quick_ids = [await enqueue(aconn, "quick", {"n": i}) for i in range(3)]
    abandoned_seen: list[int] = []
    async with running_worker(dsn, reg, concurrency=1, heartbeat_interval=0.1) as worker:

        async def all_done() -> bool:
            abandoned_seen.append(
                await fetchval(aconn, "SELECT abandoned FROM workers WHERE id = %s", (worker.id,))
            )
            return bool(
                await fetchval(aconn, "SELECT count(*) = 0 FROM jobs WHERE finished_at IS NULL")
            )

        await wait_until(all_done, timeout=15, interval=0.05, what="every job to end")
    assert sorted(quick_runs) == sorted(quick_ids)
    rows = await fetchall(aconn, "SELECT id, finished_at IS NOT NULL FROM jobs ORDER BY id")
    assert rows == [(i, True) for i in quick_ids]  # all three succeeded
    dead = await fetchall(aconn, "SELECT id, last_error FROM dead_letters")
    assert dead == [(slow, "TimeoutError: handler exceeded its timeout of 0.3s")]
    assert 1 in abandoned_seen  # the workers row showed the abandoned thread


# ------------------------------------------ 6. the handler's limit holds in a rescue


@pytest.mark.slow
async def test_a_handlers_max_attempts_holds_when_its_worker_crashes(
    dsn: str,
    aconn: psycopg.AsyncConnection,
    conn: psycopg.Connection,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn.execute(basic.LEDGER_DDL)
    monkeypatch.setenv("JOBTUI_TEST_LEDGER_DSN", dsn)
    procs = Procs(dsn, tmp_path)
    try:
        job_id = await enqueue(aconn, "once", {"sleeps": [30, 0.1]})  # the row says 5
        victim = procs.start(kinds=["once"])
        await wait_until(lambda: started_attempt(aconn, job_id, 1), timeout=15, what="run 1")
        victim.send_signal(signal.SIGKILL)
        victim.wait(5)
        async with running_worker(dsn, basic.registry, kinds=("once",), heartbeat_timeout=1.0):
            await wait_until(
                lambda: fetchval(aconn, "SELECT 1 FROM dead_letters WHERE id = %s", (job_id,)),
                timeout=15,
                what="the job to be dead-lettered",
            )
            await asyncio.sleep(0.5)
    finally:
        procs.close()
    runs = await fetchall(aconn, "SELECT attempt FROM ledger WHERE job_id = %s", (job_id,))
    assert runs == [(1,)]
    dead = await fetchall(
        aconn, "SELECT attempts, max_attempts, reason FROM dead_letters WHERE id = %s", (job_id,)
    )
    assert dead == [(1, 1, "worker_lost")]


# ------------------------------------------------ 7. statistics upserts never deadlock


async def test_two_workers_flushing_the_same_cells_in_opposite_orders_do_not_deadlock(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    """A trigger slows each row's update so both flushes are in flight together: written in
    dictionary order, the one that saw kind b first and the one that saw a first deadlock."""
    from jobtui.worker.link import Link
    from jobtui.worker.statements import WorkerDB
    from jobtui.worker.stats import StatsBuffer

    await aconn.execute(
        "CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
    )
    await aconn.execute(
        "CREATE TRIGGER slow_row BEFORE UPDATE ON kind_stats "
        "FOR EACH ROW EXECUTE FUNCTION slow_row()"
    )
    buffers = [StatsBuffer(), StatsBuffer()]
    for buffer, kinds in zip(buffers, (("b", "a"), ("a", "b")), strict=True):
        for kind in kinds:
            buffer.done(kind, 1.0)
    cells = [b.take() for b in buffers]
    db = WorkerDB("public", "w")
    first = Link(dsn, "one", statement_timeout=30)
    await db.write_stats(first, cells[0])  # the rows exist now
    for buffer, kinds in zip(buffers, (("b", "a"), ("a", "b")), strict=True):
        for kind in kinds:
            buffer.done(kind, 1.0)
    links = [first, Link(dsn, "two", statement_timeout=30)]
    try:
        results = await asyncio.gather(
            *(db.write_stats(link, b.take()) for link, b in zip(links, buffers, strict=True)),
            return_exceptions=True,
        )
    finally:
        for link in links:
            await link.close()
    assert results == [None, None]
    rows = await fetchall(aconn, "SELECT kind, sum(done) FROM kind_stats GROUP BY kind ORDER BY 1")
    assert rows == [("a", 3), ("b", 3)]


# -------------------------------------------- 8. running jobs keyed by (id, attempt)


async def test_a_job_rescued_from_under_a_worker_and_claimed_again_by_it_finishes(
    dsn: str, aconn: psycopg.AsyncConnection
) -> None:
    reg = Registry()
    runs: list[tuple[int, float]] = []
    first_started = threading.Event()

    @reg.handler("slowish")
    def slowish(payload: Any) -> None:
        attempt = current_job().attempt
        runs.append((attempt, time.monotonic()))
        if attempt == 1:
            first_started.set()
            time.sleep(0.8)  # a stalled first attempt that ignores being stopped
        else:
            time.sleep(1.5)

    job_id = await enqueue(aconn, "slowish", {})
    async with running_worker(dsn, reg, concurrency=2, heartbeat_interval=0.1):
        await wait_until(first_started.is_set, what="attempt 1")
        # What another worker's rescue does to a stalled worker's job, then wake the claim.
        await aconn.execute(
            "UPDATE jobs SET locked_at = NULL, locked_by = NULL WHERE id = %s", (job_id,)
        )
        await aconn.execute("SELECT pg_notify('jobtui_public', 'slowish')")
        await wait_until(
            lambda: fetchval(aconn, "SELECT finished_at FROM jobs WHERE id = %s", (job_id,)),
            timeout=10,
            what="attempt 2 to be recorded",
        )
    assert [r[0] for r in runs] == [1, 2]
    attempts, _locked_by, finished, cancelled, _errors = await job_row(aconn, job_id)
    assert (attempts, finished, cancelled) == (2, True, False)


# ------------------------------------------------ 9. statistics by the server's clock


async def test_statistics_land_in_the_servers_minute_whatever_the_workers_clock_says(
    dsn: str, aconn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = Registry()

    @reg.handler("k")
    async def k(payload: Any) -> None:
        return None

    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 600)  # this machine is 10 minutes ahead
    async with running_worker(dsn, reg):
        await enqueue(aconn, "k", {})
        await wait_until(lambda: fetchval(aconn, "SELECT sum(done) FROM kind_stats"), what="stats")
    monkeypatch.setattr(time, "time", real)
    row = await fetchall(
        aconn,
        "SELECT minute, minute BETWEEN date_trunc('minute', now() - interval '10 seconds') "
        "AND date_trunc('minute', now()) FROM kind_stats",
    )
    assert len(row) == 1 and row[0][1], row


# --------------------------------------------------------- 10. the guarantee, stated


def test_the_readme_states_at_least_once_and_what_is_guaranteed() -> None:
    text = README.read_text()
    assert "without ever running one twice" not in text
    assert "at-least-once" in text.lower()
    assert "idempotent" in text
    section = text[text.index("### Delivery guarantees") :]
    section = section[: section.index("\n## ", 1) if "\n## " in section else len(section)]
    for promise in ("at the same time", "cancel", "max_attempts", "heartbeat"):
        assert promise in section, promise
    # The README states them in three lines; the docs page states them exactly (issue 27).
    page = (README.parent / "docs" / "guarantees.md").read_text()
    assert "at-least-once" in page and "idempotent" in page
    for promise in ("at the same time", "cancel", "max_attempts", "heartbeat", "Nothing lost"):
        assert promise in page, promise
