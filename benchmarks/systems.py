"""The queues the drain and latency scenarios run side by side: jobtui, PgQueuer, procrastinate.

Each system gets the same treatment: its own fresh database, its schema installed by its own
tool, N jobs loaded in one statement with a start time an hour ahead, `ANALYZE`, two worker
processes started and seen ready, then one `UPDATE … SET <start time> = now()` (plus a NOTIFY
where the system wakes on one) as the release. The clock runs from the release's commit until a
poll (every ~10 ms) finds no unfinished job.

The release transaction also runs `ANALYZE` on the queue table before it commits. Statistics
taken while every start time lay an hour ahead say "nothing is due", and with them a planner may
sort the whole backlog on every claim (jobtui's claim did: 130 ms a claim at 200 000 jobs,
5 ms after ANALYZE). That is worth knowing (a big batch scheduled for midnight does the same)
but it is not the throughput being measured, so every system gets fresh statistics, inside the
release, before its workers can see a due job.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.common import SCHEMA, ScenarioSkipped, spawn, tail, wait_for
from benchmarks.peer_worker import pgqueuer_driver

Proc = tuple[subprocess.Popen[bytes], Path]


# Every system falls back to polling after this long without a notification: jobtui's worker
# polls every WorkerSettings.poll_interval (1 s, its default; the CLI has no option for it), and
# the peers are given the same (PgQueuer's dequeue_timeout, procrastinate's
# fetch_job_polling_interval).
POLL_FALLBACK_S = 1.0


class System:
    name = ""
    # Worker processes' concurrency (jobtui: in-flight jobs; PgQueuer: claim batch;
    # procrastinate: sub-workers).
    concurrency = 100
    # Where the settings come from (printed with them and kept in the results JSON).
    settings_source = ""
    # Drain runs in a full run when --runs is not given (fewer for a slow system).
    drain_runs = 3
    # A drain still going after this many seconds is stopped and rated on what it finished;
    # the figure's note says so.
    drain_cap_s = 300.0

    def unavailable(self) -> str | None:
        return None

    @property
    def label(self) -> str:
        """The name shown in the figures (with what it ran on, where that matters)."""
        return self.name

    def settings(self) -> dict[str, Any]:
        """What this system runs with: printed before the runs and kept in the results JSON."""
        return {"concurrency": self.concurrency, "poll_fallback_s": POLL_FALLBACK_S}

    def describe(self) -> str:
        text = ", ".join(f"{k}={v}" for k, v in self.settings().items())
        source = f" ({self.settings_source})" if self.settings_source else ""
        return f"{self.label}: {text}{source}"

    def install(self, dsn: str) -> None:
        """Create the system's tables in a fresh, empty database."""

    def load(self, dsn: str, n: int, kind: str = "noop") -> None:
        raise NotImplementedError

    def worker_cmd(self, dsn: str) -> list[str]:
        raise NotImplementedError

    def wait_ready(self, dsn: str, procs: Sequence[Proc], timeout: float = 60) -> None:
        raise NotImplementedError

    def release(self, conn: psycopg.Connection, before_commit: Callable[[], None]) -> None:
        """Make every loaded job due now and wake the workers, in one transaction;
        `before_commit` runs in it just before the commit (the drain's CPU window starts there,
        so the UPDATE of the whole backlog, set-up rather than the drain, is not counted)."""
        raise NotImplementedError

    def unfinished_sql(self) -> str:
        """Count of jobs not yet done (for a drain stopped at its cap)."""
        raise NotImplementedError

    def any_unfinished_sql(self) -> str:
        """Whether any job is not yet done: the 10 ms poll. EXISTS stops at the first row the
        partial index gives, where count(*) would walk every pending entry and, polled this
        often on two cores, slow the workers it measures."""
        return f"SELECT EXISTS ({self.unfinished_sql().replace('count(*)', '1', 1)})"

    async def enqueue_timed(self, dsn: str, call_ms: list[float], interval: float) -> None:
        """Enqueue one `latency` job per entry, every `interval` s; the payload carries the
        time taken just before the call, and each entry becomes that call's duration (ms)."""
        raise NotImplementedError

    def start_workers(self, dsn: str, n: int, logdir: Path, env: dict[str, str]) -> list[Proc]:
        procs = []
        for i in range(n):
            log = logdir / f"{self.name}-worker-{i}-{time.time_ns()}.log"
            procs.append((spawn(self.worker_cmd(dsn), log, **env), log))
        return procs


def _log_says(procs: Sequence[Proc], word: bytes) -> bool:
    return all(log.exists() and word in log.read_bytes() for _, log in procs)


def listening_sessions(conn: psycopg.Connection) -> int:
    """Sessions in this database whose last statement was a LISTEN and that sit idle in it:
    a worker's dedicated listener connection once it is listening."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND state = 'idle' AND query ILIKE 'LISTEN %%'"
    ).fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------------------------------------


class Jobtui(System):
    name = "jobtui"
    concurrency = 200
    settings_source = "jobtui's own choice for a throughput run; poll fall-back is its default"

    def settings(self) -> dict[str, Any]:
        from jobtui.worker import WorkerSettings  # its poll interval is not a CLI option

        poll = WorkerSettings().poll_interval
        return {"concurrency": self.concurrency, "poll_fallback_s": poll, "driver": "psycopg"}

    def unavailable(self) -> str | None:
        for module in ("jobtui.registry", "jobtui.worker"):
            if importlib.util.find_spec(module) is None:
                return f"{module} does not exist yet"
        return None

    def load(self, dsn: str, n: int, kind: str = "noop") -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO jobs (kind, payload, run_at) "
                "SELECT %s, '{}'::jsonb, now() + interval '1 hour' FROM generate_series(1, %s)",
                (kind, n),
            )

    def worker_cmd(self, dsn: str) -> list[str]:
        return worker_command(dsn, self.concurrency)

    def wait_ready(self, dsn: str, procs: Sequence[Proc], timeout: float = 60) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:

            def ready() -> bool:
                # Registered (heartbeat row) and listening (its LISTEN connection is up): the
                # heartbeat is written before the listener starts, so both are needed.
                row = conn.execute(
                    "SELECT count(*) FROM workers WHERE heartbeat_at > now() - interval '30 s'"
                ).fetchone()
                beating = bool(row and row[0] >= len(procs))
                return beating and listening_sessions(conn) >= len(procs)

            wait_for(ready, timeout, "jobtui workers heartbeat and listen", procs=procs)

    def release(self, conn: psycopg.Connection, before_commit: Callable[[], None]) -> None:
        from jobtui.sql import notify_channel

        with conn.transaction():
            conn.execute("UPDATE jobs SET run_at = now() WHERE finished_at IS NULL")
            conn.execute("ANALYZE jobs")  # see the module docstring
            conn.execute("SELECT pg_notify(%s, 'noop')", (notify_channel(SCHEMA),))
            before_commit()

    def unfinished_sql(self) -> str:
        return (
            "SELECT (SELECT count(*) FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL)"
            " + (SELECT count(*) FROM jobs WHERE finished_at IS NULL AND locked_at IS NOT NULL)"
        )

    def any_unfinished_sql(self) -> str:
        # Since migration 0020 no index holds every unfinished row: one for waiting rows, one for
        # running rows. `finished_at IS NULL` alone is a sequential scan, which at 2M rows polled
        # every 10 ms took a core from the workers being measured.
        return (
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL)"
            " OR EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL AND locked_at IS NOT NULL)"
        )

    async def enqueue_timed(self, dsn: str, call_ms: list[float], interval: float) -> None:
        from jobtui.enqueue import enqueue

        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            for i in range(len(call_ms)):
                t = time.time()
                await enqueue(conn, "latency", {"t": t})
                call_ms[i] = (time.time() - t) * 1000
                await asyncio.sleep(max(0.0, interval - (time.time() - t)))
        finally:
            await conn.close()


def worker_command(dsn: str, concurrency: int, extra: Sequence[str] = ()) -> list[str]:
    """`jobtui worker` with the benchmark's handlers, through the CLI's entry point
    (`jobtui.cli:main`, the console script), whatever module layout is behind it."""
    argv = ["worker", "--app", "benchmarks.bench_app:registry", "--concurrency", str(concurrency)]
    argv += ["--dsn", dsn, *extra]
    code = f"import sys; from jobtui.cli import main; sys.exit(main({argv!r}))"
    return [sys.executable, "-c", code]


# ---------------------------------------------------------------------------------------------


class PgQueuer(System):
    name = "pgqueuer"
    # Its batch_size: jobs fetched per dequeue round trip. Its docs (guides/performance-tuning:
    # "Increase batch_size when jobs are short-lived (< 1 s)") give no number; 100 for no-op jobs,
    # overridable with --concurrency pgqueuer=N.
    concurrency = 100
    settings_source = (
        "docs/guides/performance-tuning.md: larger batch_size for short jobs, asyncpg, a single "
        "connection for the QueueManager, `pgq autovac` applied, durability durable (default), "
        "max_concurrent_tasks unset (its default, no cap); uvloop as `pgq run`"
    )

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("pgqueuer") is None:
            return "pgqueuer is not installed (pip install pgqueuer asyncpg)"
        return None

    @property
    def label(self) -> str:
        # Its psycopg driver is ~10x slower than asyncpg here: say which one ran.
        return f"pgqueuer ({'asyncpg' if self.driver == 'asyncpg' else 'psycopg driver, slow'})"

    def settings(self) -> dict[str, Any]:
        return {
            "batch_size": self.concurrency,
            "max_concurrent_tasks": None,
            "dequeue_timeout_s": POLL_FALLBACK_S,
            "driver": self.driver,
            "autovac": True,
            "durability": "durable",
        }

    @property
    def driver(self) -> str:
        forced = os.environ.get("JOBTUI_BENCH_PGQ_DRIVER") == "psycopg"
        return "asyncpg" if importlib.util.find_spec("asyncpg") and not forced else "psycopg"

    def install(self, dsn: str) -> None:
        async def go() -> None:
            from pgqueuer import Queries

            q = Queries(await pgqueuer_driver(dsn))
            await q.install()
            # Its performance guide's checklist: "Run `pgq autovac` after installation".
            await q.optimize_autovacuum()

        asyncio.run(go())

    def load(self, dsn: str, n: int, kind: str = "noop") -> None:
        async def go() -> None:
            from datetime import timedelta

            from pgqueuer import Queries

            q = Queries(await pgqueuer_driver(dsn))
            step = 5000
            for start in range(0, n, step):
                m = min(step, n - start)
                await q.enqueue([kind] * m, [None] * m, [0] * m, [timedelta(hours=1)] * m)

        asyncio.run(go())

    def worker_cmd(self, dsn: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.peer_worker",
            "pgqueuer",
            dsn,
            "--concurrency",
            str(self.concurrency),
            "--poll",
            str(POLL_FALLBACK_S),
        ]

    def wait_ready(self, dsn: str, procs: Sequence[Proc], timeout: float = 60) -> None:
        # peer_worker prints `listening` when PgQueuer's own listener setup has returned (its
        # LISTEN shares the connection with its dequeues, so pg_stat_activity cannot show it).
        wait_for(
            lambda: _log_says(procs, b"listening"),
            timeout,
            "pgqueuer workers listen",
            procs=procs,
        )

    def release(self, conn: psycopg.Connection, before_commit: Callable[[], None]) -> None:
        from pgqueuer.domain.settings import db_settings

        channel = db_settings().channel
        with conn.transaction():
            conn.execute("UPDATE pgqueuer SET execute_after = now() WHERE status = 'queued'")
            conn.execute("ANALYZE pgqueuer")  # see the module docstring
            # Its trigger is statement-level and stays silent on UPDATE; send what it sends
            # on INSERT so the workers wake as they would for new jobs.
            conn.execute(
                "SELECT pg_notify(%(ch)s, json_build_object('channel', %(ch)s::text, "
                "'operation', 'insert', 'sent_at', now(), 'table', 'pgqueuer', "
                "'type', 'table_changed_event')::text)",
                {"ch": channel},
            )
            before_commit()

    def unfinished_sql(self) -> str:
        return "SELECT count(*) FROM pgqueuer"

    async def enqueue_timed(self, dsn: str, call_ms: list[float], interval: float) -> None:
        from pgqueuer import Queries

        q = Queries(await pgqueuer_driver(dsn))
        for i in range(len(call_ms)):
            t = time.time()
            await q.enqueue("latency", repr(t).encode())
            call_ms[i] = (time.time() - t) * 1000
            await asyncio.sleep(max(0.0, interval - (time.time() - t)))


class Procrastinate(System):
    name = "procrastinate"
    # Its sub-workers per process. Its docs (howto/production/concurrency: "Procrastinate
    # supports asynchronous tasks … launch multiple asynchronous sub-workers") show
    # concurrency=30 as the example and give no ceiling; for no-op async tasks it gets the same
    # number of jobs in flight as jobtui (200), overridable with --concurrency procrastinate=N.
    concurrency = 200
    settings_source = (
        "docs howto/production/concurrency: concurrency for async tasks (example 30, no ceiling "
        "given); psycopg (its only async connector), listen_notify on"
    )
    drain_runs = 1  # ~20x slower than the others: one run keeps `make bench` short
    drain_cap_s = 60.0

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("procrastinate") is None:
            return "procrastinate is not installed (pip install procrastinate)"
        return None

    def _app(self, dsn: str) -> Any:
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

        @app.task(name="latency")
        async def latency(t: float) -> None:
            return None

        return app

    def install(self, dsn: str) -> None:
        async def go() -> None:
            app = self._app(dsn)
            async with app.open_async():
                await app.schema_manager.apply_schema_async()

        asyncio.run(go())

    def load(self, dsn: str, n: int, kind: str = "noop") -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO procrastinate_jobs (queue_name, task_name, args, scheduled_at) "
                "SELECT 'default', %s, '{}'::jsonb, now() + interval '1 hour' "
                "FROM generate_series(1, %s)",
                (kind, n),
            )

    def worker_cmd(self, dsn: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.peer_worker",
            "procrastinate",
            dsn,
            "--concurrency",
            str(self.concurrency),
            "--poll",
            str(POLL_FALLBACK_S),
        ]

    def wait_ready(self, dsn: str, procs: Sequence[Proc], timeout: float = 60) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:

            def ready() -> bool:
                # Registered and listening (its listener is a connection of its own).
                row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
                registered = bool(row and row[0] >= len(procs))
                return registered and listening_sessions(conn) >= len(procs)

            wait_for(ready, timeout, "procrastinate workers register and listen", procs=procs)

    def release(self, conn: psycopg.Connection, before_commit: Callable[[], None]) -> None:
        with conn.transaction():
            conn.execute("UPDATE procrastinate_jobs SET scheduled_at = now() WHERE status = 'todo'")
            conn.execute("ANALYZE procrastinate_jobs")  # see the module docstring
            # What its insert trigger sends; any worker hearing it starts fetching.
            conn.execute(
                "SELECT pg_notify('procrastinate_any_queue_v1', "
                "json_build_object('type', 'job_inserted', 'job_id', 0)::text)"
            )
            before_commit()

    def settings(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "fetch_job_polling_interval_s": POLL_FALLBACK_S,
            "listen_notify": True,
            "driver": "psycopg",
        }

    def unfinished_sql(self) -> str:
        return "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"

    async def enqueue_timed(self, dsn: str, call_ms: list[float], interval: float) -> None:
        app = self._app(dsn)
        async with app.open_async():
            task = app.tasks["latency"]
            for i in range(len(call_ms)):
                t = time.time()
                await task.defer_async(t=t)
                call_ms[i] = (time.time() - t) * 1000
                await asyncio.sleep(max(0.0, interval - (time.time() - t)))


PEER_NAMES = ("pgqueuer", "procrastinate")


def systems(with_peers: bool, names: Sequence[str] = ()) -> list[System]:
    """jobtui, then the peers (only those in `names` when it is not empty)."""
    found: list[System] = [Jobtui()]
    if with_peers:
        found += [p for p in (PgQueuer(), Procrastinate()) if not names or p.name in names]
    return found


def runnable(bench: Any) -> list[System]:
    """The systems this run measures, their settings noted in `bench.settings`.

    A system that cannot run is a failure of the run (`bench.fail`), except a peer whose package
    is not installed when the run allows it (--allow-missing-peers): that one is only noted.
    """
    found = []
    for system in systems(bench.peers, bench.peer_names):
        reason = system.unavailable()
        if reason is None:
            found.append(system)
            bench.settings.setdefault(
                system.name,
                {"label": system.label, **system.settings(), "source": system.settings_source},
            )
        elif system.name != "jobtui" and bench.allow_missing_peers and "not installed" in reason:
            print(f"  {system.name}: not run ({reason}; --allow-missing-peers)", flush=True)
        else:
            bench.fail(f"{system.name}: {reason}")
    return found


def rotated(items: Sequence[System], round_no: int) -> list[System]:
    """Round r starts with the (r mod n)-th system: no system always goes first."""
    if not items:
        return []
    k = round_no % len(items)
    return [*items[k:], *items[:k]]


def set_concurrency(spec: str) -> None:
    """Apply `jobtui=200,pgqueuer=100` to the system classes (for this run)."""
    classes = {cls.name: cls for cls in (Jobtui, PgQueuer, Procrastinate)}
    for part in spec.split(","):
        name, _, value = part.partition("=")
        cls = classes.get(name.strip())
        if cls is None or not value.strip().isdigit() or int(value) < 1:
            raise ValueError(
                f"--concurrency: expected SYSTEM=N with SYSTEM one of {', '.join(classes)}, "
                f"got {part!r}"
            )
        cls.concurrency = int(value)


def describe_failure(system: System, procs: Sequence[Proc], exc: BaseException) -> str:
    logs = "; ".join(dict.fromkeys(tail(log, 1) for _, log in procs))
    return f"{system.name}: {exc} {logs}".strip()


def raise_unavailable(system: System) -> None:
    reason = system.unavailable()
    if reason:
        raise ScenarioSkipped(reason)
