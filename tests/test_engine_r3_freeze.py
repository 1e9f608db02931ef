"""Issue 25 items 1 and 2: a worker that freezes mid-claim or mid-tick stops nobody else.

The frozen worker is a real process behind a real TCP proxy (`Freezer`): the moment it sends a
chosen statement, the proxy forwards it, then withholds every byte in both directions on every
one of its connections (a network split), and the process is SIGSTOPped. Other workers
connect directly and must carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps.basic import LEDGER_DDL
from apps.helpers import fetchall, fetchval, wait_until
from psycopg import conninfo
from test_attack_engine import spawn, stop, worker_argv

from jobtui import enqueue
from jobtui.ops import Actor, set_kind_limits

pytestmark = pytest.mark.slow


class Freezer:
    """A TCP proxy to PostgreSQL that freezes every connection through it, for good, right
    after a client sends a statement containing one of `triggers` (forwarded first)."""

    def __init__(self, dsn: str, triggers: list[bytes]) -> None:
        params = conninfo.conninfo_to_dict(dsn)
        self.target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        # A host that is a directory is a Unix socket (the embedded server's DSN).
        self.socket = (
            f"{self.target[0]}/.s.PGSQL.{self.target[1]}"
            if self.target[0].startswith("/")
            else None
        )
        self.dsn = dsn
        self.triggers = triggers
        self.frozen = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.port = 0
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Freezer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for w in self._writers:
            w.close()

    @property
    def proxied_dsn(self) -> str:
        return conninfo.make_conninfo(self.dsn, host="127.0.0.1", port=str(self.port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.socket is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self.socket)
        else:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pipe(reader, up_writer, watch=True),
            self._pipe(up_reader, writer, watch=False),
            return_exceptions=True,
        )

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, watch: bool
    ) -> None:
        while not self.frozen.is_set():
            data = await src.read(65536)
            if not data or self.frozen.is_set():
                return  # frozen: what came after the freeze is never delivered
            dst.write(data)
            await dst.drain()
            if watch and any(t in data for t in self.triggers):
                self.frozen.set()
        await asyncio.Event().wait()  # hold the sockets open, silent


async def _freeze_worker(freezer: Freezer, proc: subprocess.Popen[bytes]) -> None:
    await wait_until(freezer.frozen.is_set, timeout=20, what="the frozen worker's statement")
    os.kill(proc.pid, signal.SIGSTOP)


@contextlib.asynccontextmanager
async def _frozen_worker(dsn: str, options: dict[str, Any], triggers: list[bytes], log: Path):
    async with Freezer(dsn, triggers) as freezer:
        [proc] = spawn([worker_argv(freezer.proxied_dsn, options)], log)
        try:
            await _freeze_worker(freezer, proc)
            yield proc
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            stop([proc])


@pytest.mark.parametrize("pad", [0, 6_000_000])
async def test_a_worker_frozen_mid_claim_of_a_limited_kind_stops_no_other_worker(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path, pad: int
) -> None:
    """`capped` may run 3 at once. A worker (concurrency 1) freezes the moment it sends its
    claim of that kind. Another worker started afterwards must run every job (the frozen one's
    too, once rescued after its 2 s heartbeat timeout), and an operator's `kinds limit` must not
    hang. With 6 MB payloads the claim's reply cannot fit in the sockets' buffers: a server
    that sent it before committing would block, holding the kind's row, on a client that
    reads nothing."""
    await aconn.execute(LEDGER_DDL)
    for i in range(6):
        await enqueue(aconn, "capped", {"sleep": 0.1, "i": i, "pad": "x" * pad})
    frozen_opts = {
        "app": "limited",
        "kinds": ["capped"],
        "concurrency": 1,
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 2.0,
    }
    triggers = [b"FOR UPDATE OF l SKIP LOCKED", b"jobtui_claim_limited"]
    async with _frozen_worker(dsn, frozen_opts, triggers, tmp_path / "frozen.log"):
        healthy = {
            "app": "limited",
            "kinds": ["capped"],
            "concurrency": 3,
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 2.0,
        }
        procs = spawn([worker_argv(dsn, healthy)], tmp_path / "healthy.log")
        try:
            async with asyncio.timeout(5):  # `kinds limit` must not hang
                await set_kind_limits(aconn, "public", "capped", concurrency=3, actor=Actor("t"))
            await wait_until(
                lambda: fetchval(
                    aconn, "SELECT count(*) = 6 FROM ledger WHERE ended_at IS NOT NULL"
                ),
                timeout=20,
                what="all six jobs to run while a worker is frozen mid-claim",
            )
        finally:
            stop(procs)
    over = await fetchall(
        aconn,
        "SELECT a.entry FROM ledger a WHERE (SELECT count(*) FROM ledger b "
        "WHERE b.started_at <= a.started_at AND b.ended_at > a.started_at) > 3",
    )
    assert over == [], over


async def test_a_worker_frozen_mid_tick_stops_no_schedule(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """An every-second schedule. A worker freezes the moment it sends the statement that
    records a tick. Another worker must go on enqueueing one job per second."""
    frozen_opts = {"app": "ticking", "heartbeat_interval": 0.5, "heartbeat_timeout": 2.0}
    async with _frozen_worker(dsn, frozen_opts, [b"schedule_ticks"], tmp_path / "frozen.log"):
        procs = spawn([worker_argv(dsn, frozen_opts)], tmp_path / "healthy.log")
        try:
            await wait_until(
                lambda: fetchval(
                    aconn,
                    "SELECT 1 FROM workers WHERE heartbeat_at > now()"
                    " - interval '1 second' LIMIT 1",
                ),
                what="the healthy worker",
            )
            before = await fetchval(aconn, "SELECT count(*) FROM schedule_ticks")
            await asyncio.sleep(5.0)
            after = await fetchval(aconn, "SELECT count(*) FROM schedule_ticks")
        finally:
            stop(procs)
    assert after - before >= 3, (before, after)
    twice = await fetchall(
        aconn, "SELECT tick FROM schedule_ticks GROUP BY tick HAVING count(*) > 1"
    )
    assert twice == []


async def test_a_worker_frozen_while_its_large_claim_is_sent_stops_no_other_worker(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """The fast claim (a kind without limits) of 6 MB payloads, by a worker that freezes the
    moment it sends it: the server sent a reply before it committed, so it blocked on a full
    socket holding the claimed row locked, skipped by every other worker for as long as the
    freeze lasted. Now a claim's reply carries at most 64 KiB of payload, so the claim
    commits, and the frozen worker's job is rescued after its heartbeat timeout like any
    other (and were a reply to block, the server's tcp_user_timeout, set on worker sessions,
    would end it within half that timeout: seen, 1.5 s, before the budget existed)."""
    await aconn.execute(LEDGER_DDL)
    for _ in range(3):
        await enqueue(aconn, "sleepy", {"sleeps": [0.1], "pad": "x" * 6_000_000})
    frozen_opts = {
        "kinds": ["sleepy"],
        "concurrency": 1,
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 2.0,
    }
    async with _frozen_worker(
        dsn, frozen_opts, [b"SET locked_at = now(), locked_by"], tmp_path / "frozen.log"
    ):
        healthy = {**frozen_opts, "concurrency": 3}
        procs = spawn([worker_argv(dsn, healthy)], tmp_path / "healthy.log")
        try:
            await wait_until(
                lambda: fetchval(
                    aconn,
                    "SELECT count(DISTINCT job_id) = 3 FROM ledger WHERE ended_at IS NOT NULL",
                ),
                timeout=20,
                what="all three jobs to run while a worker is frozen sending its claim",
            )
        finally:
            stop(procs)


async def test_a_worker_frozen_past_its_own_timeout_counts_the_attempt_it_stops_as_lost(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """A worker SIGSTOPped longer than its own heartbeat timeout, with no other worker to
    rescue its job: when it wakes it stops its handler as lost. It used to release the job
    with the attempt given back, so a job whose handler froze its worker every time never
    reached its limit (seen in the chaos run as a job over its max_attempts). The attempt
    counts now, recorded as HeartbeatLost, as a rescue would have recorded it."""
    await aconn.execute(LEDGER_DDL)
    job = await enqueue(aconn, "sleepy", {"sleeps": [30, 0.1]})
    opts = {"kinds": ["sleepy"], "heartbeat_interval": 0.2, "heartbeat_timeout": 1.0}
    [proc] = spawn([worker_argv(dsn, opts)], tmp_path / "worker.log")
    try:
        await wait_until(lambda: fetchval(aconn, "SELECT count(*) = 1 FROM ledger"), what="start")
        os.kill(proc.pid, signal.SIGSTOP)
        await asyncio.sleep(2.0)
        os.kill(proc.pid, signal.SIGCONT)
        await wait_until(
            lambda: fetchval(
                aconn, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = %s", (job,)
            ),
            timeout=15,
            what="the job to end",
        )
    finally:
        stop([proc])
    starts = await fetchall(aconn, "SELECT attempt FROM ledger ORDER BY entry")
    errors = await fetchval(
        aconn, "SELECT jsonb_path_query_array(errors, '$[*].error') FROM jobs WHERE id = %s", (job,)
    )
    assert starts == [(1,), (2,)], starts
    assert len(errors) == 1 and errors[0].startswith("HeartbeatLost"), errors


async def test_a_worker_frozen_while_it_declares_its_limits_stops_no_other_worker(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """Found by the attack pass: at start a worker upserted its declared limits inside
    BEGIN … COMMIT, so one frozen between the upsert and the COMMIT held the kind's row (for
    half its heartbeat timeout; behind a transaction pooler, for good) and no worker could claim
    the kind. The upsert is now one statement the server commits on its own."""
    await aconn.execute(LEDGER_DDL)
    await set_kind_limits(aconn, "public", "capped", concurrency=3, actor=Actor("t"))
    for i in range(6):
        await enqueue(aconn, "capped", {"sleep": 0.1, "i": i})
    frozen_opts = {
        "app": "limited",
        "kinds": ["capped"],
        "heartbeat_interval": 1.0,
        "heartbeat_timeout": 60.0,  # its session's idle-in-transaction limit would be 30 s
    }
    async with _frozen_worker(
        dsn, frozen_opts, [b"(kind, declared_concurrency"], tmp_path / "frozen.log"
    ):
        healthy = {**frozen_opts, "concurrency": 3, "heartbeat_timeout": 2.0}
        procs = spawn([worker_argv(dsn, healthy)], tmp_path / "healthy.log")
        try:
            async with asyncio.timeout(5):  # `kinds limit` must not hang
                await set_kind_limits(aconn, "public", "capped", concurrency=3, actor=Actor("t"))
            await wait_until(
                lambda: fetchval(
                    aconn, "SELECT count(*) = 6 FROM ledger WHERE ended_at IS NOT NULL"
                ),
                timeout=15,
                what="all six jobs to run while a worker is frozen declaring its limits",
            )
        finally:
            stop(procs)


async def test_a_worker_frozen_while_it_declares_its_schedules_stops_no_schedule(
    dsn: str, aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    """The same for the schedules a worker declares at start: the row of an every-second
    schedule must not be held while the frozen worker's upsert waits on it."""
    opts = {"app": "ticking", "heartbeat_interval": 0.5, "heartbeat_timeout": 2.0}
    procs = spawn([worker_argv(dsn, opts)], tmp_path / "healthy.log")
    try:
        await wait_until(
            lambda: fetchval(aconn, "SELECT count(*) > 0 FROM schedule_ticks"),
            what="the healthy worker's first tick",
        )
        frozen_opts = {**opts, "heartbeat_interval": 1.0, "heartbeat_timeout": 60.0}
        trigger = [b"(name, cron, timezone, kind, payload, priority, max_attempts, missed"]
        async with _frozen_worker(dsn, frozen_opts, trigger, tmp_path / "frozen.log"):
            before = await fetchval(aconn, "SELECT count(*) FROM schedule_ticks")
            await asyncio.sleep(5.0)
            after = await fetchval(aconn, "SELECT count(*) FROM schedule_ticks")
    finally:
        stop(procs)
    assert after - before >= 3, (before, after)
