"""The `jobtui` command. Each command group registers its own sub-commands and handlers:

    console     console.py      (also `jobtui` alone; the only module that imports the console)
    demo        demo.py
    jobs        jobs.py  queue.py (enqueue)
    dead        dead.py
    schedules   schedules.py
    kinds       kinds.py
    workers     workers.py (quiet, resume, stop a worker)
    stats check monitoring.py
    worker migrate prune roles  admin.py

Every failure a user can cause becomes one line on stderr and a non-zero exit (errors.py); a
traceback is shown only with `--debug`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from jobtui import __version__
from jobtui.cli import (
    admin,
    console,
    dead,
    demo,
    jobs,
    kinds,
    monitoring,
    queue,
    schedules,
    workers,
)
from jobtui.cli.args import FORMATTER, Commands, Parser, common_options, epilog
from jobtui.cli.errors import EXIT_INTERRUPTED, EXIT_OK, explain, one_line

GROUPS = (
    console,
    demo,
    admin,
    queue,
    monitoring,
    dead,
    jobs,
    schedules,
    kinds,
    workers,
)  # in `jobtui --help` order


def build_parser() -> Parser:
    """The whole command line."""
    common = common_options()
    parser = Parser(
        prog="jobtui",
        description="A PostgreSQL job queue with a bundled worker and a terminal console. "
        "Without a subcommand, opens the console.",
        parents=[common],
        formatter_class=FORMATTER,
        epilog=epilog(
            "jobtui demo                      # a live console over a demo database",
            "jobtui --dsn postgresql://app@db/app migrate",
            "jobtui worker --app myapp.jobs   # run the handlers in myapp/jobs.py",
            "jobtui check --max-oldest-age 10m --max-dead 0",
        ),
    )
    parser.add_argument("--version", action="version", version=f"jobtui {__version__}")
    commands = Commands.under(parser, common, "command", required=False)
    for group in GROUPS:
        group.register(commands)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; stray arguments are reported by the subcommand they were given to."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        target = parser
        for key in (getattr(args, "command", None), getattr(args, "action", None)):
            subs = target.subcommands
            if key and subs is not None and key in subs.choices:
                target = subs.choices[key]
        target.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `jobtui` script; returns the exit code."""
    args = parse(argv)
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:
        if debug:
            raise
        message, code = explain(exc)
        print(f"jobtui: error: {one_line(message)}", file=sys.stderr)
        return code


def _silence_stdout() -> None:
    """After a closed pipe (`jobtui jobs list | head`), exit without a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
