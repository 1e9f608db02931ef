"""Issue 27: the README is a front page a newcomer can follow literally.

The slow test takes the README's "Five minutes" path as written (its install command, its
handler, its enqueue, its worker command) and runs it in a fresh virtual environment against a
fresh database. `pip install ./jobtui` once failed from the repository root; this would have
caught it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLE_DSN = "postgresql://app@db.internal/app"


def blocks(text: str, lang: str) -> list[str]:
    """The fenced code blocks of one language, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def step(text: str, title: str, lang: str) -> str:
    """The first `lang` block after the bold step title (e.g. "**1. Install**")."""
    return blocks(text[text.index(title) :], lang)[0]


def commands(block: str) -> list[list[str]]:
    """Shell lines of a block, comments dropped, as argument lists."""
    found = []
    for line in block.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#") and not line.startswith("export "):
            found.append(shlex.split(line))
    return found


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for needed in ("make demo", "make test", "pip install .", "at-least-once", "idempotent"):
        assert needed in text.replace("At-least", "at-least"), needed
    assert "pip install ./jobtui" not in text
    assert "--print-dsn" in text and '"$(cat ' not in text
    # Every link into the docs points at a page that exists.
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target


@pytest.mark.slow
def test_the_five_minute_path_works_as_written(tmp_path: Path, dsn: str) -> None:
    text = README.read_text()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("JOBTUI_", "PG", "VIRTUAL_ENV"))
    }
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "JOBTUI_DSN": dsn}

    def run(argv: list[str], cwd: Path, timeout: float = 600) -> str:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        return proc.stdout

    # 1. Install, from the repository root, exactly as the README says.
    install = commands(step(text, "**1. Install**", "sh"))
    assert install[0][:2] == ["pip", "install"], install
    for argv in install:
        out = run(argv, ROOT)
    assert out.strip() == "jobtui 0.1.0"
    assert (bin_dir / "jobtui").exists()
    # 2. Migrate, with the DSN the README exports replaced by the test database's.
    migrate = commands(step(text, "**2. Create the tables**", "sh"))
    assert migrate == [["jobtui", "migrate"]], migrate
    run(migrate[0], tmp_path)
    # 3. The handler file, as written.
    handler = step(text, "**3. Write a handler", "python")
    path = tmp_path / handler.splitlines()[0].lstrip("# ").strip()
    path.parent.mkdir(parents=True)
    path.write_text(handler)
    # 4. Enqueue, as written.
    enqueue = step(text, "**4. Enqueue**", "python").replace(EXAMPLE_DSN, dsn)
    assert enqueue != step(text, "**4. Enqueue**", "python")
    run([str(bin_dir / "python"), "-c", enqueue], tmp_path)
    # 5. The worker, as written, until the job is done.
    worker = commands(step(text, "**5. Run a worker**", "sh"))
    assert worker == [["jobtui", "worker", "--app", "myapp.jobs"]], worker
    proc = subprocess.Popen(
        worker[0], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        done = False
        while time.monotonic() < deadline and not done:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT finished_at IS NOT NULL AND cancelled_at IS NULL FROM jobs"
                    " WHERE kind = 'send_receipt'"
                ).fetchone()
            done = bool(row and row[0])
            time.sleep(0.2)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert done, output[-3000:]
    assert "receipt for order 42" in output
    assert sys.executable  # the test's own interpreter made the venv


@pytest.mark.slow
def test_python_m_build_makes_a_wheel_that_installs_a_working_jobtui(tmp_path: Path) -> None:
    """The README says `python -m build` makes a wheel for `pip install`/`pipx install`."""
    builder = tmp_path / "builder"
    venv.create(builder, with_pip=True)
    py = str(builder / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBTUI_", "VIRTUAL_ENV"))}

    def run(argv: list[str], cwd: Path = tmp_path) -> str:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        return proc.stdout

    run([py, "-m", "pip", "install", "-q", "build"])
    # Build from a copy of the sources, as a user's clone: nothing of this work tree's own
    # (its venv, build/ or egg-info) helps, and the build leaves nothing in it.
    src = tmp_path / "src"
    junk = (".venv", ".git", "site", "build", "dist", "*.egg-info", "*_cache", "__pycache__")
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(*junk, ".jobtui-*"))
    run([py, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist")], cwd=src)
    (wheel,) = (tmp_path / "dist").glob("jobtui-*-py3-none-any.whl")
    target = tmp_path / "target"
    venv.create(target, with_pip=True)
    run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    assert run([str(target / "bin" / "jobtui"), "--version"]).strip() == "jobtui 0.1.0"
    # The wheel carries the SQL and the console's styles, not only the Python.
    help_text = run([str(target / "bin" / "jobtui"), "kinds", "--help"])
    assert "jobtui kinds limit" in help_text
    run(
        [
            str(target / "bin" / "python"),
            "-c",
            "from jobtui.sql import queries; assert queries().lookup_kind_known;"
            "import importlib.resources as r;"
            "assert any(p.name.endswith('.tcss') for p in r.files('jobtui.tui').iterdir())",
        ]
    )
