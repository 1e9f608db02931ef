"""Nothing outside jobtui/tui imports textual: the engine, CLI and ops work without a UI."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

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
