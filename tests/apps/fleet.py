"""Worker processes for tests (tests/apps/run_worker.py), and the ledger their handlers
write: fixtures `procs` and `ledger`, imported by the test modules that start workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from apps import basic

RUN_WORKER = Path(__file__).parent / "run_worker.py"


class Procs:
    """Worker subprocesses started by a test; whatever is left is killed at the end."""

    def __init__(self, dsn: str, log_dir: Path) -> None:
        self.dsn = dsn
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, **options: Any) -> subprocess.Popen[bytes]:
        settings = {
            "poll_interval": 0.1,
            "heartbeat_interval": 0.2,
            "heartbeat_timeout": 1.0,
            "kinds": ["sleepy"],
            **options,
        }
        log = open(self.log_dir / f"worker{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, str(RUN_WORKER), self.dsn, json.dumps(settings)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent.parent)},
        )
        log.close()
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.log")))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)


@pytest.fixture(name="procs")
def procs_fixture(dsn: str, tmp_path: Path) -> Iterator[Procs]:
    p = Procs(dsn, tmp_path)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(name="ledger")
def ledger_fixture(dsn: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> str:
    conn.execute(basic.LEDGER_DDL)
    monkeypatch.setenv("JOBTUI_TEST_LEDGER_DSN", dsn)
    return dsn
