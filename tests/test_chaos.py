"""The short chaos run: SIGKILLed workers and a PostgreSQL restart lose nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).parent / "chaos" / "run.py"


@pytest.mark.slow
def test_short_chaos_run_loses_nothing_and_never_runs_a_job_twice_at_once() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(CHAOS),
            "--jobs",
            "1500",
            "--workers",
            "3",
            "--kill-every",
            "1.5",
            "--max-sleep",
            "0.25",
            "--timeout",
            "150",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "lost jobs: 0" in out
    assert "jobs run concurrently with themselves: 0" in out
    assert "dead letters with attempts <> max_attempts: 0" in out
    assert "workers killed: " in out and "workers killed: 0" not in out
    assert "restarting PostgreSQL" in out


HETERO = Path(__file__).parent / "chaos" / "hetero.py"


@pytest.mark.slow
def test_short_heterogeneous_chaos_run_keeps_every_promise() -> None:
    """Rolling restarts with changed heartbeat settings, overrunning and stubborn handlers,
    operators acting, locks held, SIGKILLs and a PostgreSQL restart (tests/chaos/hetero.py)."""
    result = subprocess.run(
        [sys.executable, str(HETERO), "--jobs", "600", "--seconds", "15", "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=150,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for figure in (
        "lost: 0",
        "started after cancel: 0",
        "over effective max_attempts: 0",
        "overlapping (violations): 0",
        "pending at the end: 0",
    ):
        assert f"  {figure}\n" in out, out
    assert "restarting PostgreSQL" in out
    assert (
        "workers killed: 0\n" not in out
        and "workers rolled (SIGTERM, new settings): 0\n" not in out
    )
    assert "operator cancels: 0\n" not in out
