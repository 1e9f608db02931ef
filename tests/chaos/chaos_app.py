"""Handlers for the chaos run: they sleep, fail at random and write every execution to a ledger.

The ledger is written from each handler thread's own connection, so it records what really ran
even when the worker that ran it is killed before it can report back.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import psycopg

from jobtui.registry import Registry

registry = Registry()
_local = threading.local()
FAIL_RATE = float(os.environ.get("CHAOS_FAIL_RATE", "0.2"))
MAX_SLEEP_S = float(os.environ.get("CHAOS_MAX_SLEEP", "0.03"))


def _ledger() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["CHAOS_DSN"], autocommit=True, connect_timeout=3)
        _local.conn = conn
    return conn


def _write(sql: str, params: tuple[Any, ...]) -> int:
    """Write to the ledger, retrying through a database restart for up to 20 s."""
    deadline = time.monotonic() + 20
    while True:
        try:
            row = _ledger().execute(sql, params).fetchone()
            return int(row[0]) if row else 0
        except psycopg.OperationalError:
            _local.conn = None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _run(payload: dict[str, Any]) -> None:
    n = int(payload["n"])
    entry = _write(
        "INSERT INTO chaos_ledger (n, pid, started_at) VALUES (%s, %s, clock_timestamp()) "
        "RETURNING entry",
        (n, os.getpid()),
    )
    time.sleep(random.random() * MAX_SLEEP_S)
    failed = random.random() < FAIL_RATE
    _write(
        "UPDATE chaos_ledger SET ended_at = clock_timestamp(), ok = %s WHERE entry = %s "
        "RETURNING entry",
        (not failed, entry),
    )
    if failed:
        raise RuntimeError(f"chaos: simulated failure of job {n}")


@registry.handler("chaos_a", max_attempts=3, backoff_base=0.05, backoff_cap=0.5)
def chaos_a(payload: dict[str, Any]) -> None:
    _run(payload)


@registry.handler("chaos_b", max_attempts=4, backoff_base=0.05, backoff_cap=0.5)
def chaos_b(payload: dict[str, Any]) -> None:
    _run(payload)


@registry.handler("chaos_c", max_attempts=5, backoff_base=0.05, backoff_cap=0.5)
def chaos_c(payload: dict[str, Any]) -> None:
    _run(payload)
