"""The `jobtui` command. Each command group registers its own sub-commands and handlers:

    console     console.py      (also `jobtui` alone; the only module that imports the console)
    demo        demo.py
    jobs        jobs.py  queue.py (enqueue)
    dead        dead.py
    schedules   schedules.py
    kinds       kinds.py
    workers     workers.py (quiet, resume, stop a worker)
    stats check monitoring.py
    serve       serve.py (the console in a browser; the web server is jobtui/web.py)
    worker migrate prune roles  admin.py

Every failure a user can cause becomes one line on stderr and a non-zero exit (errors.py); a
traceback is shown only with `--debug`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Container, Sequence

from jobtui import __version__
from jobtui.cli.args import FORMATTER, Commands, Parser, common_options, epilog
from jobtui.cli.errors import EXIT_INTERRUPTED, EXIT_OK, explain, one_line

# Every command group's module with its top-level commands and their help lines, in `jobtui
# --help` order. Only the module of the command given is imported (most pull in psycopg, 0.2-0.3
# s): `--version` and `--help` import none but the console's, whose options are also `jobtui`'s
# own and which imports nothing heavy until it runs. tests/test_imports.py checks this table
# against what the modules register.
GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("jobtui.cli.console", (("console", "Open the terminal console."),)),
    (
        "jobtui.cli.demo",
        (("demo", "Run a self-contained demo: embedded PostgreSQL, worker, live jobs, console."),),
    ),
    (
        "jobtui.cli.admin",
        (
            ("worker", "Run the bundled worker with your handlers."),
            ("migrate", "Create or upgrade jobtui's tables (safe to run repeatedly)."),
            ("prune", "Delete finished (succeeded or cancelled) jobs older than a window."),
            ("roles", "Least-privilege roles: print the SQL creating monitor/operator/worker."),
        ),
    ),
    ("jobtui.cli.queue", (("enqueue", "Enqueue one job, or many from a JSON-lines file."),)),
    (
        "jobtui.cli.monitoring",
        (
            ("stats", "Print the queue's figures (human, JSON or Prometheus text)."),
            (
                "check",
                "Nagios/Icinga check: a status line, then one line per problem; exit 0 OK, "
                "1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
            ),
        ),
    ),
    ("jobtui.cli.dead", (("dead", "Dead letters: list, show, requeue, delete."),)),
    ("jobtui.cli.jobs", (("jobs", "Jobs: list, show, why, cancel, run now, rerun."),)),
    ("jobtui.cli.schedules", (("schedules", "Periodic jobs: list, pause, resume, run now."),)),
    ("jobtui.cli.kinds", (("kinds", "Job kinds: limits and pauses."),)),
    ("jobtui.cli.workers", (("workers", "List workers; quiet, resume or stop a running worker."),)),
    (
        "jobtui.cli.serve",
        (("serve", "Serve the console to browsers (read-only unless --allow-writes)."),),
    ),
)
CONSOLE = GROUPS[0][0]


def build_parser(load: Container[str] | None = None) -> Parser:
    """The whole command line; only the groups in `load` (module names; all when None) are
    imported, the others stand as their names and help lines."""
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
    assert parser.subcommands is not None
    for module, names in GROUPS:
        if load is None or module in load:
            importlib.import_module(module).register(commands)
        else:  # a stand-in: its arguments are parsed once its module is loaded
            for name, help_ in names:
                parser.subcommands.add_parser(name, help=help_, add_help=False)
    return parser


def _module_of(command: str | None) -> str:
    return next((m for m, names in GROUPS for n, _ in names if n == command), CONSOLE)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; stray arguments are reported by the subcommand they were given to.

    Twice: first with the console's group only, to learn the command (`--help` and `--version`
    end there), then with that command's group loaded."""
    Parser.argv = list(sys.argv[1:] if argv is None else argv)
    first, _ = build_parser({CONSOLE}).parse_known_args(argv)
    parser = build_parser({CONSOLE, _module_of(getattr(first, "command", None))})
    args, extra = parser.parse_known_args(argv)
    if extra:
        target = parser
        for key in (getattr(args, "command", None), getattr(args, "action", None)):
            subs = target.subcommands
            if key and subs is not None and key in subs.choices:
                target = subs.choices[key]
        target.error(f"unrecognized arguments: {' '.join(extra)}{_nearest_option(target, extra)}")
    return args


def _nearest_option(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """`; did you mean '--kind'?` for the first stray option near one of `parser`'s
    (`jobs list --kidn x` said only "unrecognized arguments: --kidn x")."""
    known = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    # `enqueue k --payload '{}'`: the payload is positional, not an option.
    positional = {
        name: action.metavar or action.dest
        for action in parser._actions
        if not action.option_strings and isinstance(action.dest, str)
        for name in {action.dest.replace("_", "-"), str(action.metavar or "").lower()}
    }
    for word in extra:
        if word.startswith("--"):
            option = word.partition("=")[0]
            if option[2:].lower() in positional:
                name = positional[option[2:].lower()]
                return f"; {name} is positional: give it without {option}"
            near = _near(option[2:], [o[2:] for o in known])
            if near:
                return f"; did you mean '--{near}'?"
    return ""


def _near(word: str, names: Sequence[str]) -> str | None:
    """The name `word` is a typo of: two letters swapped (`dns`, `jsno`), else difflib's
    nearest at 0.7. Compared without the `--` every option shares, which made unrelated short
    ones look alike (`--ids` was taken for `--dsn`, `--db` for `--debug`)."""
    import difflib

    for name in names:
        if len(name) == len(word) and sorted(name) == sorted(word):
            diff = [i for i, (a, b) in enumerate(zip(name, word, strict=True)) if a != b]
            if len(diff) == 2 and diff[1] == diff[0] + 1:
                return name
    near = difflib.get_close_matches(word, names, n=1, cutoff=0.7)
    return near[0] if near else None


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
        from jobtui.cli.session import without_passwords

        message, code = explain(exc)
        print(f"jobtui: error: {one_line(without_passwords(message, args))}", file=sys.stderr)
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
