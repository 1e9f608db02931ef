"""Issue 15 item 1: every part of jobtui through a real PgBouncer (Debian's package).

The transaction-pooling fixture has no protocol-level prepared statements (what PgBouncer < 1.21
does, and `max_prepared_statements = 0` on later ones). psycopg prepares a statement after its
fifth execution on a connection (`prepare_threshold = 5`), and PgBouncer then sends the next
Bind to whichever server connection is free: the worker's long-lived connections break.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from apps.helpers import fetchval, running_worker, wait_until
from test_cli_support import assert_ok, run_cli
from topology import quick_registry

from jobtui import enqueue
from jobtui.db import PREPARED_ENV, aconnect, connect

N_JOBS = 2000
DRAIN_TIMEOUT_S = 12.0


class Errors(logging.Handler):
    """Collects the worker's `db_error` / `listen_*` log lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@contextlib.contextmanager
def worker_log() -> Iterator[Errors]:
    handler = Errors()
    logger = logging.getLogger("jobtui")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


async def _drain(direct: str, worker_dsn: str, **settings: Any) -> tuple[int, float, list[str]]:
    """Enqueue N_JOBS, run the worker on `worker_dsn` until they are done or the timeout;
    (drained, seconds, database errors it logged)."""
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT 'quick', '{}' FROM generate_series(1, %s)",
            (N_JOBS,),
        )
    with worker_log() as log:
        t0 = time.monotonic()
        async with (
            running_worker(worker_dsn, quick_registry(), **settings),
            await psycopg.AsyncConnection.connect(direct, autocommit=True) as conn,
        ):
            left = N_JOBS
            while left and time.monotonic() - t0 < DRAIN_TIMEOUT_S:
                await asyncio.sleep(0.1)
                left = await fetchval(conn, "SELECT count(*) FROM jobs WHERE finished_at IS NULL")
        seconds = time.monotonic() - t0
    errors = [line for line in log.lines if "error" in line]
    return N_JOBS - left, seconds, errors


async def _pickup_ms(
    direct: str, worker_dsn: str, n: int = 5, wakeup: str = "listen", **settings: Any
) -> list[float]:
    """Enqueue one job at a time (with jobtui's NOTIFY) to an idle worker, once its probe has
    settled on `wakeup` ('listen' or 'polling'): ms to finished."""
    latencies = []
    async with (
        running_worker(worker_dsn, quick_registry(), **settings) as worker,
        await psycopg.AsyncConnection.connect(direct, autocommit=True) as conn,
    ):

        async def settled() -> bool:
            return bool(
                await fetchval(
                    conn,
                    "SELECT wakeup_mode = %s AND listen_connected FROM workers WHERE id = %s",
                    (wakeup, worker.id),
                )
            )

        await wait_until(settled, timeout=10, what=f"the worker's wake-up mode to be {wakeup}")
        for _ in range(n):
            await asyncio.sleep(0.3)  # idle: the worker waits on LISTEN or its poll
            t0 = time.monotonic()
            job_id = await enqueue(conn, "quick", {})
            while not await fetchval(
                conn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job_id,)
            ):
                await asyncio.sleep(0.005)
            latencies.append((time.monotonic() - t0) * 1000)
    return latencies


# ------------------------------------------------------------------ the worker


async def test_worker_drains_2000_jobs_through_transaction_pooling(
    dsn: str, tx_pooled_dsn: str
) -> None:
    drained, seconds, errors = await _drain(dsn, tx_pooled_dsn)
    print(f"transaction pooling: drained {drained}/{N_JOBS} in {seconds:.1f}s; errors {errors}")
    assert errors == []
    assert drained == N_JOBS


async def test_worker_drains_2000_jobs_through_transaction_pooling_with_prepared_statements(
    dsn: str, tx_prepared_pooled_dsn: str
) -> None:
    """PgBouncer >= 1.21 with max_prepared_statements = 100 (skipped on older PgBouncers)."""
    drained, _seconds, errors = await _drain(dsn, tx_prepared_pooled_dsn)
    assert errors == []
    assert drained == N_JOBS


async def test_worker_drains_2000_jobs_through_session_pooling(
    dsn: str, session_pooled_dsn: str
) -> None:
    drained, _seconds, errors = await _drain(dsn, session_pooled_dsn)
    # Other suites on a shared server may kill 'jobtui worker%' backends; only the
    # prepared-statement family of errors is a failure here.
    assert [e for e in errors if "prepared statement" in e] == []
    assert drained == N_JOBS


async def test_worker_with_a_session_listen_dsn_is_woken_by_notify_behind_a_transaction_pooler(
    dsn: str, tx_pooled_dsn: str, session_pooled_dsn: str
) -> None:
    latencies = await _pickup_ms(
        dsn, tx_pooled_dsn, poll_interval=2.0, listen_dsn=session_pooled_dsn
    )
    print(f"pickup through transaction pooling, LISTEN via session pooling (ms): {latencies}")
    assert statistics.median(latencies) < 300, latencies


async def test_worker_behind_a_transaction_pooler_without_listen_dsn_picks_up_within_its_poll(
    dsn: str, tx_pooled_dsn: str
) -> None:
    """LISTEN hears nothing there: the probe finds out and the worker polls every 0.25 s
    instead of its 2 s poll interval."""
    latencies = await _pickup_ms(dsn, tx_pooled_dsn, wakeup="polling", poll_interval=2.0)
    print(f"pickup through transaction pooling, polling (ms): {latencies}")
    assert max(latencies) < 600, latencies


async def test_worker_says_it_polls_when_listen_through_a_transaction_pooler_hears_nothing(
    dsn: str, tx_pooled_dsn: str
) -> None:
    with worker_log() as log:
        async with (
            running_worker(tx_pooled_dsn, quick_registry(), poll_interval=0.5) as worker,
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn,
        ):
            said: Any = None
            deadline = time.monotonic() + 10
            while not said and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                said = await fetchval(
                    conn,
                    "SELECT wakeup_mode = 'polling' AND wakeup_note ILIKE '%%listen%%' "
                    "AND poll_interval_s <= 0.25 FROM workers WHERE id = %s",
                    (worker.id,),
                )
    warned = [
        line
        for line in log.lines
        if line.startswith("WARNING") and "listen" in line.lower() and "poll" in line.lower()
    ]
    assert warned, log.lines
    assert said, "the workers row does not say that this worker polls"


# ------------------------------------------------------------------ LISTEN itself


def _notified(listen_dsn: str, notify_dsn: str) -> bool:
    """Whether a LISTEN on `listen_dsn` hears a NOTIFY sent on `notify_dsn` within 1 s."""
    with psycopg.connect(listen_dsn, autocommit=True, prepare_threshold=None) as listener:
        listener.execute("LISTEN jobtui_topology_probe")
        with psycopg.connect(notify_dsn, autocommit=True, prepare_threshold=None) as sender:
            sender.execute("NOTIFY jobtui_topology_probe, 'x'")
        return any(True for _ in listener.notifies(timeout=1.0, stop_after=1))


def test_listen_through_transaction_pooling_is_silently_lost_and_session_pooling_keeps_it(
    dsn: str, tx_pooled_dsn: str, session_pooled_dsn: str
) -> None:
    """What the worker's self-NOTIFY probe has to detect: no error, just no notification."""
    assert _notified(dsn, dsn)
    assert _notified(session_pooled_dsn, dsn)
    assert not _notified(tx_pooled_dsn, dsn)


# ------------------------------------------------------------------ producers and the CLI


class Neighbour:
    """Another application on the same pooler, holding server connections in short
    transactions, so one client's statements are spread over several server connections
    (as they are in production)."""

    def __init__(self, pooled: str) -> None:
        self.pooled = pooled
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(3)]

    def _run(self) -> None:
        with psycopg.connect(self.pooled, autocommit=True, prepare_threshold=None) as conn:
            while not self.stop.is_set():
                with conn.transaction():
                    conn.execute("SELECT pg_sleep(0.01)")

    def __enter__(self) -> Neighbour:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)


async def test_enqueue_from_a_long_lived_producer_connection_through_transaction_pooling(
    dsn: str, tx_pooled_dsn: str
) -> None:
    """A producer's own connection is the producer's: behind a transaction pooler it must be
    opened with prepared statements off (as the README says), or through jobtui.db."""
    with Neighbour(tx_pooled_dsn):
        async with await psycopg.AsyncConnection.connect(
            tx_pooled_dsn, autocommit=True, prepare_threshold=None
        ) as conn:
            for i in range(20):
                await enqueue(conn, "quick", {"i": i})
        async with await aconnect(tx_pooled_dsn) as conn:
            for i in range(20):
                await enqueue(conn, "quick", {"i": i})
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (40,)


def test_jobtui_connections_turn_prepared_statements_off_behind_the_pooler_only(
    dsn: str, tx_pooled_dsn: str, session_pooled_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """auto (the default) detects PgBouncer by the backend pid it fakes; on and off force it."""
    monkeypatch.delenv(PREPARED_ENV, raising=False)
    with connect(dsn) as direct, connect(tx_pooled_dsn) as tx, connect(session_pooled_dsn) as ss:
        assert direct.prepare_threshold is not None
        assert tx.prepare_threshold is None and ss.prepare_threshold is None
    monkeypatch.setenv(PREPARED_ENV, "off")
    with connect(dsn) as direct:
        assert direct.prepare_threshold is None
    monkeypatch.setenv(PREPARED_ENV, "on")
    with connect(tx_pooled_dsn) as tx:
        assert tx.prepare_threshold is not None
    monkeypatch.setenv(PREPARED_ENV, "sometimes")
    with pytest.raises(ValueError, match="JOBTUI_PREPARED_STATEMENTS must be auto, on or off"):
        connect(dsn)


def test_cli_commands_through_transaction_pooling(dsn: str, tx_pooled_dsn: str) -> None:
    """Each CLI run is a fresh connection with few statements: it works today. Kept as a
    guard while the connection code changes."""
    with Neighbour(tx_pooled_dsn):
        assert_ok(run_cli("enqueue", "quick", '{"a": 1}', dsn=tx_pooled_dsn))
        assert "ready 1" in assert_ok(run_cli("stats", dsn=tx_pooled_dsn))
        assert '"ready": 1' in assert_ok(run_cli("stats", "--json", dsn=tx_pooled_dsn))
        assert "jobtui_jobs" in assert_ok(run_cli("stats", "--prometheus", dsn=tx_pooled_dsn))
        assert assert_ok(run_cli("check", "--max-ready", "10", dsn=tx_pooled_dsn)).startswith(
            "JOBTUI OK"
        )
        assert_ok(run_cli("jobs", "list", dsn=tx_pooled_dsn))
        assert_ok(run_cli("dead", "list", dsn=tx_pooled_dsn))
        assert_ok(run_cli("migrate", dsn=tx_pooled_dsn))
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


# ------------------------------------------------------------------ the console


async def test_console_through_transaction_pooling_shows_no_database_error(
    dsn: str, tx_pooled_dsn: str
) -> None:
    from jobtui.console_config import ConsoleConfig
    from jobtui.tui.app import JobtuiApp

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('quick', '{}'), ('slow', '{}')")
    app = JobtuiApp(tx_pooled_dsn, "public", config=ConsoleConfig(refresh_s=0.1))
    errors: set[str] = set()
    with Neighbour(tx_pooled_dsn):
        async with app.run_test(size=(120, 40)) as pilot:
            for key in "1234" * 2:
                await pilot.press(key)
                target = app.polls + 3
                deadline = time.monotonic() + 5
                while app.polls < target and time.monotonic() < deadline:
                    if app.db_error:
                        errors.add(app.db_error)
                    await pilot.pause(0.05)
            # A failed refresh is one error notification per distinct message.
            errors.update(n.message for n in app._notifications if n.severity == "error")
    assert errors == set()
    assert app.polls >= 8


@pytest.mark.parametrize(
    "pooler", ["tx_pooled_dsn", "tx_prepared_pooled_dsn", "session_pooled_dsn"]
)
async def test_kind_screen_reads_in_one_pipeline_through_each_pooler(
    dsn: str, pooler: str, request: pytest.FixtureRequest
) -> None:
    """The kind screen sends its statements at once (pipeline mode, in one transaction): through
    each pooling mode it reads what a direct connection reads, many times on one connection
    (past psycopg's prepare threshold) and with other clients' reads between."""
    from jobtui import kindinfo

    pooled = request.getfixturevalue(pooler)
    with connect(dsn) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload, attempts, last_error, run_at) SELECT 'crm', '{}',"
            " g % 2, CASE WHEN g % 2 = 1 THEN 'E: boom' END, now() - interval '1 minute' * g"
            " FROM generate_series(1, 30) g"
        )
    async with await aconnect(dsn) as direct:
        want = await kindinfo.load(direct, "public", "crm", "hour")
    async with await aconnect(pooled) as one, await aconnect(pooled) as other:
        for _ in range(8):
            got = await kindinfo.load(one, "public", "crm", "hour")
            await kindinfo.load(other, "public", "crm", "day")
            assert (got.unfinished, got.ready, got.retrying) == (30, 30, 15)
            assert [b.depth for b in got.buckets] == [b.depth for b in want.buckets]
            assert got.retry_errors == want.retry_errors and got.workers == want.workers
