"""Write docs/reference/cli.md from the `jobtui` argparse parser, so the reference cannot drift.

    python tools/cli_reference.py            # rewrite docs/reference/cli.md
    python tools/cli_reference.py --check    # exit 1 when the committed file is stale

Every command and sub-command gets a heading (its anchor is stable: `jobtui-dead-requeue`) and
its `--help` text, as the command prints it at 100 columns. tests/test_docs_cli_reference.py
fails when the committed file differs from what this writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "reference" / "cli.md"
COLUMNS = "100"

HEADER = """# CLI reference

Every `jobtui` command with its `--help`, generated from the command's own parser by
`python tools/cli_reference.py` (`make docs` runs it; a test fails when this page is stale).
Guides: [the command line](../operating/cli.md), [monitoring](../monitoring.md).
"""


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of each direct sub-command, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases share a parser
                    seen.add(id(sub))
                    yield name, sub


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for name, sub in _subcommands(parser):
        yield from _walk(sub, (*path, name))


def render() -> str:
    """The whole page, from the parser as it is now."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS  # argparse wraps help to the terminal's width
    try:
        from jobtui.cli import build_parser

        parser = build_parser()
        parts = [HEADER]
        commands = list(_walk(parser, ("jobtui",)))
        parts.append("")
        for path, _ in commands[1:]:
            name = " ".join(path)
            indent = "    " * (len(path) - 2)
            parts.append(f"{indent}- [`{name}`](#{'-'.join(path)})")
        for path, sub in commands:
            name = " ".join(path)
            level = "#" * min(len(path) + 1, 4)
            parts += ["", f"{level} `{name}` {{#{'-'.join(path)}}}", "", "```text"]
            parts.append(sub.format_help().rstrip())
            parts.append("```")
        return "\n".join(parts) + "\n"
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="tools/cli_reference.py", description=__doc__.split("\n")[0])
    cli.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    cli.add_argument("--output", type=Path, default=TARGET)
    args = cli.parse_args(argv)
    text = render()
    if args.check:
        if not args.output.exists() or args.output.read_text() != text:
            print(f"{args.output} is stale: run `python tools/cli_reference.py`", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"{args.output}: {text.count('```text')} commands")
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
