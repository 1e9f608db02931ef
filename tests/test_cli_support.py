"""Helpers shared by the CLI tests: run the real `jobtui` executable as a subprocess.

(This module holds no tests; it is named test_cli_* so it sits with the files it serves.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "jobtui"
# The console script pip installs; `python -m jobtui` is the same entry point if it is missing.
JOBTUI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "jobtui"]

_DROP = (
    "JOBTUI_DSN",
    "DATABASE_URL",
    "JOBTUI_SCHEMA",
    "JOBTUI_CONFIG",
    "PGHOST",
    "PGPORT",
    "PGDATABASE",
    "PGUSER",
    "PGPASSWORD",
    "PGSERVICE",
    "PGCONNECT_TIMEOUT",
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any connection settings of the developer's own."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    env["COLUMNS"] = "200"
    # A developer's own console config must not leak in: point at a directory with none.
    env["XDG_CONFIG_HOME"] = os.path.join(tempfile.gettempdir(), "jobtui-tests-no-config")
    env.update(extra)
    return env


def run_cli(
    *args: str,
    dsn: str | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `jobtui ARGS` (with `--dsn` first when given) and capture its output."""
    cmd = [*JOBTUI, *(["--dsn", dsn] if dsn else []), *args]
    return subprocess.run(
        cmd,
        input=input,
        capture_output=True,
        text=True,
        env=env or clean_env(),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def assert_ok(proc: subprocess.CompletedProcess[str]) -> str:
    """Exit 0 and nothing on stderr; returns stdout."""
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def assert_one_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Exit `code`, exactly one line on stderr containing every needle, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
