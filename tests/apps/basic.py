"""Handlers that write what really ran to a ledger table, from their own connection.

The ledger survives the worker being SIGKILLed, so tests can check that a job ran again and
never at the same time as itself. `JOBTUI_TEST_LEDGER_DSN` names the database.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg

from jobtui.registry import Registry
from jobtui.worker import current_job

registry = Registry()

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS ledger (
  entry      bigserial primary key,
  job_id     bigint not null,
  attempt    int not null,
  pid        int not null,
  worker     text not null,
  started_at timestamptz not null default clock_timestamp(),
  ended_at   timestamptz
)
"""

_local = threading.local()


def _ledger() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["JOBTUI_TEST_LEDGER_DSN"], autocommit=True)
        _local.conn = conn
    return conn


def ledger_start() -> int:
    job = current_job()
    row = (
        _ledger()
        .execute(
            "INSERT INTO ledger (job_id, attempt, pid, worker) VALUES (%s, %s, %s, %s) "
            "RETURNING entry",
            (job.id, job.attempt, os.getpid(), job.worker_id),
        )
        .fetchone()
    )
    assert row is not None
    return int(row[0])


def ledger_end(entry: int) -> None:
    _ledger().execute("UPDATE ledger SET ended_at = clock_timestamp() WHERE entry = %s", (entry,))


@registry.handler("sleepy", backoff_base=0.0, jitter=0.0)
def sleepy(payload: dict[str, Any]) -> None:
    """Sleeps `sleeps[attempt - 1]` seconds (the last value for later attempts)."""
    job = current_job()
    sleeps = payload.get("sleeps", [0.1])
    entry = ledger_start()
    seconds = float(sleeps[min(job.attempt, len(sleeps)) - 1])
    # Poll the cancel event so a graceful stop can interrupt a long sleep.
    if job.cancelled.wait(seconds):
        job.check_cancelled()
    ledger_end(entry)


@registry.handler("quick")
async def quick(payload: dict[str, Any]) -> None:
    return None


@registry.handler("once", max_attempts=1, backoff_base=0.0, jitter=0.0)
def once(payload: dict[str, Any]) -> None:
    """`sleepy` with a handler limit of one attempt, whatever the row says."""
    sleepy(payload)
