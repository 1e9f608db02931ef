"""Issue 24, CLI start: `jobtui stats` imports only what it prints with.

Its whole-process time (benchmarks/scale.py --counts) is mostly imports: psycopg's own, then
jobtui's. Rich (the console's text objects), tomllib (read only when a config file exists) and
jobtui.ops (the operator actions, with getpass, browse and limits) are not needed to print the
figures, and each cost milliseconds of every cron or monitoring run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_NEEDED = ("rich", "textual", "tomllib", "jobtui.ops", "getpass")
REPORT = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: open({out!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "sys.argv = ['jobtui', *{argv!r}]\n"
    "from jobtui.cli import main\n"
    "sys.exit(main())\n"
)


def modules_of(tmp_path: Path, *argv: str) -> set[str]:
    out = tmp_path / "modules.json"
    code = REPORT.replace("{out!r}", repr(str(out))).replace("{argv!r}", repr(list(argv)))
    env = {"XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [["--json"], ["--prometheus"], []])
def test_stats_imports_nothing_it_does_not_print_with(
    tmp_path: Path, dsn: str, fmt: list[str]
) -> None:
    loaded = modules_of(tmp_path, "stats", *fmt, "--dsn", dsn)
    assert "psycopg" in loaded and "jobtui.metrics" in loaded  # it did read the figures
    assert not [m for m in NOT_NEEDED if m in loaded], sorted(m for m in NOT_NEEDED if m in loaded)
