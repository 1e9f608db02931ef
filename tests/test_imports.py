"""Nothing outside jobtui/tui imports textual: the engine, CLI and ops work without a UI."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

import jobtui

ROOT = Path(__file__).resolve().parent.parent


def engine_modules() -> list[str]:
    """Every jobtui module except the console package (found on disk, so new ones count)."""
    names = ["jobtui"]
    for info in pkgutil.walk_packages(jobtui.__path__, "jobtui."):
        if info.name == "jobtui.tui" or info.name.startswith("jobtui.tui."):
            continue
        if info.name.endswith(".__main__"):  # importing it would run the CLI
            continue
        names.append(info.name)
    return sorted(names)


def test_engine_modules_are_found() -> None:
    names = engine_modules()
    for expected in ("jobtui.ops", "jobtui.browse", "jobtui.metrics", "jobtui.export"):
        assert expected in names
    assert not any(n.startswith("jobtui.tui") for n in names)


def import_and_report(names: list[str]) -> str:
    """Import `names` in a fresh interpreter; "CLEAN" or "TEXTUAL [...]" for what it pulled in."""
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print('TEXTUAL' if bad else 'CLEAN', bad[:5])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_no_module_outside_tui_imports_textual() -> None:
    out = import_and_report(engine_modules())
    assert out.startswith("CLEAN"), out


def test_the_check_sees_textual_when_it_is_imported() -> None:
    assert import_and_report(["jobtui.ops", "textual"]).startswith("TEXTUAL")


# --- what each command imports (issue 24: the CLI imports only what a command needs) ---------

HEAVY = ("psycopg", "textual")
RUN_CLI = (
    "import atexit, json, sys\n"
    "def report():\n"
    "    loaded = sorted({m.split('.')[0] for m in sys.modules} & {'psycopg', 'textual'})\n"
    "    with open({out!r}, 'w') as f:\n"
    "        json.dump(loaded, f)\n"
    "atexit.register(report)\n"
    "sys.argv = ['jobtui', *{argv!r}]\n"
    "from jobtui.cli import main\n"
    "sys.exit(main())\n"
)


def command(tmp_path: Path, *argv: str) -> tuple[list[str], str]:
    """The command's code to run in a fresh interpreter, and where it writes what it loaded."""
    out = str(tmp_path / f"modules-{len(list(tmp_path.iterdir()))}.json")
    code = RUN_CLI.replace("{out!r}", repr(out)).replace("{argv!r}", repr(list(argv)))
    return [sys.executable, "-c", code], out


def loaded_by(tmp_path: Path, *argv: str) -> list[str]:
    """Which of psycopg and textual `jobtui ARGV` imported, run to its end."""
    cmd, out = command(tmp_path, *argv)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return list(json.loads(Path(out).read_text()))


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["stats", "--help"],
        ["jobs", "list", "--help"],
        ["serve", "--help"],
    ],
)
def test_version_and_help_import_neither_psycopg_nor_textual(
    tmp_path: Path, argv: list[str]
) -> None:
    loaded = loaded_by(tmp_path, *argv)
    if argv[0].startswith("--"):
        assert loaded == [], loaded
    else:  # a command's own help loads its module (which may use psycopg), still no console
        assert "textual" not in loaded, loaded


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["stats", "--json"], ["check"], ["jobs", "list"]])
def test_monitoring_commands_import_no_textual(tmp_path: Path, dsn: str, argv: list[str]) -> None:
    assert loaded_by(tmp_path, *argv, "--dsn", dsn) == ["psycopg"]


@pytest.mark.slow
def test_serve_imports_no_textual_itself(tmp_path: Path, dsn: str) -> None:
    """`jobtui serve`'s web server runs without the console: each browser session's process
    imports it. (Refused here, without tokens, after its web server's modules are loaded.)"""
    assert "textual" not in loaded_by(tmp_path, "serve", "--host", "0.0.0.0", "--dsn", dsn)


@pytest.mark.slow
def test_the_worker_imports_no_textual(tmp_path: Path, dsn: str) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "tiny.py").write_text(
        "from jobtui import Registry\nregistry = Registry()\n\n"
        "@registry.handler('noop')\ndef noop(payload):\n    return None\n"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('noop', '{}')")
        cmd, out = command(tmp_path, "worker", "--app", "tiny", "--dsn", dsn)
        proc = subprocess.Popen(
            cmd,
            cwd=tmp_path / "apps",
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(tmp_path / "apps")},
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                row = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL")
                if row.fetchone() == (1,):
                    break
                time.sleep(0.1)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(Path(out).read_text()) == ["psycopg"]


def test_help_without_the_modules_is_the_whole_help() -> None:
    from jobtui.cli import CONSOLE, build_parser

    assert build_parser({CONSOLE}).format_help() == build_parser().format_help()
