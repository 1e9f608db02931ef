"""Issue 27: the CLI reference in the docs is generated from the parser and cannot drift."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import cli_reference  # noqa: E402


def test_the_committed_cli_reference_is_what_the_parser_says() -> None:
    committed = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert committed == cli_reference.render(), (
        "docs/reference/cli.md is stale: run `python tools/cli_reference.py`"
    )


def test_every_command_has_a_heading_and_its_help(tmp_path: Path) -> None:
    text = cli_reference.render()
    for command in ("jobtui workers list", "jobtui jobs why", "jobtui demo", "jobtui check"):
        anchor = command.replace(" ", "-")
        assert f"`{command}` {{#{anchor}}}" in text
    assert "jobtui demo --print-dsn" in text and "--force" in text
    stale = tmp_path / "cli.md"
    stale.write_text(text.replace("--print-dsn", "--old-flag", 1))
    assert cli_reference.main(["--check", "--output", str(stale)]) == 1
    assert cli_reference.main(["--output", str(stale)]) == 0
    assert cli_reference.main(["--check", "--output", str(stale)]) == 0
