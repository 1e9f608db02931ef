"""The demo's background worker: a `jobtui worker` subprocess running the demo handlers.

It dies with the demo (SIGTERM via PR_SET_PDEATHSIG on Linux) and is found again by its command
line if a crashed demo left it behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from jobtui.demo.server import alive, cmdline, terminate

WORKER_STOP_WAIT_S = 8.0
LEFTOVER_STOP_WAIT_S = 3.0  # a leftover worker may have lost its database: do not wait long
WORKER_SHUTDOWN_GRACE = "5s"
HANDLERS = "jobtui.demo.handlers"


def leftover_workers(root: Path) -> list[int]:
    """Demo workers bound to this directory's server (from the pid file and /proc)."""
    marker = str(root / "pg").encode()
    found: set[int] = set()
    pidfile = root / "worker.pid"
    with contextlib.suppress(OSError, ValueError):
        found.add(int(pidfile.read_text().strip()))
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if entry.name.isdigit():
                found.add(int(entry.name))
    mine = os.getpid()
    return sorted(
        pid
        for pid in found
        if pid != mine
        and HANDLERS.encode() in (cmd := cmdline(pid))
        and marker in cmd
        and alive(pid)
    )


def stop_leftover_workers(root: Path) -> int:
    pids = leftover_workers(root)
    for pid in pids:
        terminate(pid, LEFTOVER_STOP_WAIT_S)
    (root / "worker.pid").unlink(missing_ok=True)
    return len(pids)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """In the worker: get SIGTERM if the demo dies, so a crash leaves no worker behind."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_worker(dsn: str, schema: str, root: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "jobtui",
        "worker",
        "--app",
        HANDLERS,
        "--dsn",
        dsn,
        "--schema",
        schema,
        "--concurrency",
        "16",
        "--heartbeat",
        "2s",
        "--shutdown-grace",
        WORKER_SHUTDOWN_GRACE,
    ]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C in the terminal is ours to handle, not the worker's
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    (root / "worker.pid").write_text(str(proc.pid))
    return proc


def stop_worker(proc: subprocess.Popen[bytes], root: Path) -> None:
    """SIGTERM (graceful: running jobs finish or are released), wait, then SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(WORKER_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    (root / "worker.pid").unlink(missing_ok=True)


def open_log(path: Path) -> IO[bytes]:
    if path.exists() and path.stat().st_size > 5_000_000:
        path.replace(path.with_suffix(".log.1"))
    return open(path, "ab")
