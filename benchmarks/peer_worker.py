"""A worker process for a peer queue (PgQueuer or procrastinate) with the benchmark's handlers.

`python -m benchmarks.peer_worker pgqueuer|procrastinate DSN --concurrency N --poll S`.
Handlers as in bench_app: `noop` does nothing; `latency` records enqueue → handler start. Prints
`ready` once its handlers are registered, and (PgQueuer) `listening` once PgQueuer's own listener
set-up has returned: the harness's readiness signal, since PgQueuer's LISTEN shares its
connection with its dequeues and no table shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from datetime import timedelta
from typing import Any

from benchmarks.bench_app import record_latency


def announce_pgqueuer_listening() -> None:
    """Print `listening` when PgQueuer's listener set-up returns (its LISTEN is then issued).

    QueueManager.run calls `listeners.initialize_notice_event_listener` through the module, so
    wrapping the module's function sees exactly its own set-up. If PgQueuer moves it, this
    raises at start (the harness then fails loudly) rather than guessing readiness."""
    from pgqueuer.core import listeners

    original: Any = listeners.initialize_notice_event_listener

    async def announced(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        print("listening", flush=True)
        return result

    setattr(listeners, "initialize_notice_event_listener", announced)  # noqa: B010


async def run_pgqueuer(dsn: str, concurrency: int, poll: float) -> None:
    from pgqueuer import Queries, QueueManager
    from pgqueuer.models import Job

    announce_pgqueuer_listening()

    qm = QueueManager(Queries(await pgqueuer_driver(dsn)))

    @qm.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    @qm.entrypoint("latency")
    async def latency(job: Job) -> None:
        now = time.time()
        record_latency(float(job.payload or b"0"), now)

    print("ready", flush=True)
    # batch_size is PgQueuer's claim batch; its dequeue uses it as-is. dequeue_timeout is its
    # polling fall-back, the same for every system.
    await qm.run(batch_size=concurrency, dequeue_timeout=timedelta(seconds=poll))


async def pgqueuer_driver(dsn: str) -> Any:
    """asyncpg (PgQueuer's primary driver) when installed, else its psycopg driver
    (JOBTUI_BENCH_PGQ_DRIVER=psycopg forces the latter)."""
    try:
        if os.environ.get("JOBTUI_BENCH_PGQ_DRIVER") == "psycopg":
            raise ImportError("psycopg driver asked for")
        import asyncpg
    except ImportError:
        import psycopg
        from pgqueuer import PsycopgDriver

        return PsycopgDriver(await psycopg.AsyncConnection.connect(dsn, autocommit=True))
    from pgqueuer import AsyncpgDriver
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    names = {
        "host": "host",
        "port": "port",
        "user": "user",
        "password": "password",
        "dbname": "database",
    }
    kwargs = {names[k]: v for k, v in params.items() if k in names and v not in (None, "")}
    return AsyncpgDriver(await asyncpg.connect(**kwargs))


async def run_procrastinate(dsn: str, concurrency: int, poll: float) -> None:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop(**kwargs: object) -> None:
        return None

    @app.task(name="latency")
    async def latency(t: float) -> None:
        record_latency(t, time.time())

    async with app.open_async():
        print("ready", flush=True)
        await app.run_worker_async(
            concurrency=concurrency, fetch_job_polling_interval=poll, install_signal_handlers=True
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["pgqueuer", "procrastinate"])
    parser.add_argument("dsn")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--poll", type=float, default=1.0, help="polling fall-back (s)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        if args.system == "pgqueuer":
            # As `pgq run` does: uvloop when installed (it is one of PgQueuer's dependencies).
            try:
                import uvloop
            except ImportError:
                asyncio.run(run_pgqueuer(args.dsn, args.concurrency, args.poll))
            else:
                uvloop.run(run_pgqueuer(args.dsn, args.concurrency, args.poll))
        else:
            asyncio.run(run_procrastinate(args.dsn, args.concurrency, args.poll))
    print(json.dumps({"stopped": args.system}), flush=True)


if __name__ == "__main__":
    main()
