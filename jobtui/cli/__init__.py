"""The `jobtui` command: argument parsing, connection settings and exit codes; nothing else.

Each subcommand's work lives in `jobtui.cli_commands`; this module turns every failure a user
can cause into one line on stderr (`jobtui: error: …`) and a non-zero exit, and shows a
traceback only with `--debug`. Nothing here imports textual: the console is imported by its
subcommand only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from jobtui import __version__
from jobtui.config import InvalidDuration, parse_duration


class CliError(Exception):
    """A failure the user can fix; printed as one line, exit `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse with errors as a single line (usage is one `--help` away)."""

    error_exit_code = 2
    subcommands: argparse._SubParsersAction | None = None

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())
        self.exit(
            self.error_exit_code, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n"
        )


def duration(text: str) -> float:
    """argparse type: a duration in seconds (`30s`, `5m`, `2h`, `7d`)."""
    try:
        return parse_duration(text).total_seconds()
    except InvalidDuration as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, not {value}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, not {value}")
    return value


def job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"job ids are whole numbers, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"job ids are positive, not {value}")
    return value


def _common() -> Parser:
    """Options every subcommand takes; SUPPRESS lets them appear before or after it."""
    p = Parser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help="PostgreSQL DSN (default: $JOBTUI_DSN, $DATABASE_URL, then libpq's PG* variables)",
    )
    g.add_argument(
        "--schema",
        default=argparse.SUPPRESS,
        help="schema holding jobtui's tables (default: $JOBTUI_SCHEMA or public)",
    )
    g.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks instead of one-line errors",
    )
    return p


def _console_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    default: Any = argparse.SUPPRESS if suppress else None
    p.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="never offer write actions",
    )
    p.add_argument(
        "--config",
        metavar="PATH",
        default=default,
        help="console config file (default: $JOBTUI_CONFIG or ~/.config/jobtui/config.toml)",
    )
    p.add_argument(
        "--refresh",
        type=duration,
        metavar="DURATION",
        default=default,
        help="refresh interval, e.g. 2s (default from config: 2s)",
    )


def _ex(*lines: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in lines)


def _filters(p: argparse.ArgumentParser, *, dead: bool) -> None:
    p.add_argument("--kind", help="only this kind")
    if dead:
        p.add_argument("--error", help="error text contains this (case-insensitive)")
        p.add_argument("--signature", help="exactly this error signature (one failure group)")
        p.add_argument("--text", help="payload text contains this, or an id")
    else:
        p.add_argument(
            "--state",
            action="append",
            metavar="STATE",
            help="ready, scheduled, retrying, running, succeeded or cancelled "
            "(repeat or comma-separate)",
        )
        p.add_argument("--error", help="error or payload text contains this")


def build_parser() -> Parser:
    """The whole command line."""
    common = _common()
    fmt = argparse.RawDescriptionHelpFormatter
    parser = Parser(
        prog="jobtui",
        description="A PostgreSQL job queue with a bundled worker and a terminal console. "
        "Without a subcommand, opens the console.",
        parents=[common],
        formatter_class=fmt,
        epilog=_ex(
            "jobtui demo                      # a live console over a demo database",
            "jobtui --dsn postgresql://app@db/app migrate",
            "jobtui worker --app myapp.jobs   # run the handlers in myapp/jobs.py",
            "jobtui check --max-oldest-age 10m --max-dead 0",
        ),
    )
    parser.add_argument("--version", action="version", version=f"jobtui {__version__}")
    _console_options(parser, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    parser.subcommands = sub

    def add(name: str, help_: str, epilog: str) -> Parser:
        p = sub.add_parser(
            name,
            help=help_,
            description=help_,
            parents=[common],
            formatter_class=fmt,
            epilog=epilog,
        )
        assert isinstance(p, Parser)
        return p

    p = add(
        "console",
        "Open the terminal console.",
        _ex("jobtui console", "jobtui console --read-only --refresh 5s"),
    )
    _console_options(p, suppress=False)

    p = add(
        "demo",
        "Run a self-contained demo: embedded PostgreSQL, worker, live jobs, console.",
        _ex(
            "jobtui demo",
            "jobtui demo --reset          # start from a fresh database",
            "jobtui demo --headless 20    # no console: run 20 s and print a summary",
        ),
    )
    p.add_argument("--reset", action="store_true", help="wipe the demo database first")
    p.add_argument(
        "--headless",
        type=duration,
        metavar="DURATION",
        help="run without the console for this long, then stop and print figures",
    )
    p.add_argument(
        "--no-console",
        action="store_true",
        help="run without the console until interrupted (Ctrl-C or SIGTERM)",
    )
    p.add_argument(
        "--data-dir", metavar="PATH", help="demo directory (default: $XDG_DATA_HOME/jobtui/demo)"
    )

    p = add(
        "worker",
        "Run the bundled worker with your handlers.",
        _ex(
            "jobtui worker --app myapp.jobs",
            "jobtui worker --app myapp.jobs:registry --concurrency 20 --kinds email,report",
        ),
    )
    p.add_argument(
        "--app",
        required=True,
        metavar="MODULE[:ATTR]",
        help="module holding a jobtui Registry (attribute default: registry)",
    )
    p.add_argument("--concurrency", type=positive_int, default=10, help="jobs at once (default 10)")
    p.add_argument("--kinds", help="comma-separated kinds to handle (default: all registered)")
    p.add_argument(
        "--heartbeat",
        type=duration,
        default=5.0,
        metavar="DURATION",
        help="heartbeat interval (default 5s)",
    )
    p.add_argument(
        "--heartbeat-timeout",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="a worker silent this long is dead and its jobs are rescued (default 30s)",
    )
    p.add_argument(
        "--shutdown-grace",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="on SIGTERM, wait this long for running jobs (default 30s)",
    )
    p.add_argument(
        "--retention",
        type=duration,
        default=7 * 86400.0,
        metavar="DURATION",
        help="prune finished jobs older than this (default 7d)",
    )
    p.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )

    p = add(
        "migrate",
        "Create or upgrade jobtui's tables (safe to run repeatedly).",
        _ex("jobtui migrate", "jobtui migrate --schema queue --dry-run"),
    )
    p.add_argument("--dry-run", action="store_true", help="print the SQL instead of running it")

    p = add(
        "enqueue",
        "Enqueue one job, or many from a JSON-lines file.",
        _ex(
            'jobtui enqueue send_email \'{"to": "ann@example.com"}\'',
            "jobtui enqueue generate_report '{\"id\": 7}' --delay 10m --priority 5",
            'jobtui enqueue --file jobs.jsonl   # one {"kind":…, "payload":…} per line',
            "cat jobs.jsonl | jobtui enqueue --file -",
        ),
    )
    p.add_argument("kind", nargs="?", help="job kind")
    p.add_argument(
        "payload", nargs="?", metavar="PAYLOAD_JSON", help="payload as JSON (default {})"
    )
    p.add_argument(
        "--file",
        metavar="PATH",
        help="JSON lines: kind, payload and optionally run_at, delay, max_attempts, "
        "priority; - reads stdin",
    )
    p.add_argument("--delay", type=duration, metavar="DURATION", help="run after this long")
    p.add_argument("--run-at", metavar="ISO8601", help="run at this time (with a UTC offset)")
    p.add_argument("--max-attempts", type=positive_int, default=None)
    p.add_argument("--priority", type=int, default=None, help="higher runs first (default 0)")

    p = add(
        "stats",
        "Print the queue's figures (human, JSON or Prometheus text).",
        _ex(
            "jobtui stats",
            "jobtui stats --json | jq .totals",
            "jobtui stats --prometheus --output /var/lib/node_exporter/textfile/jobtui.prom",
        ),
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="JSON for scripts")
    g.add_argument("--prometheus", action="store_true", help="Prometheus text exposition format")
    p.add_argument(
        "--output",
        metavar="PATH",
        help="write to PATH atomically (for a textfile collector) instead of stdout",
    )
    p.add_argument(
        "--window",
        type=duration,
        default=900.0,
        metavar="DURATION",
        help="window for rates and percentiles (default 15m)",
    )

    p = add(
        "check",
        "Nagios/Icinga check: one status line, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.",
        "A value above a --max-* threshold is WARNING; above the matching --crit-* "
        "threshold (default: twice\nthe --max-* value) it is CRITICAL. "
        "Unreachable database or missing schema: UNKNOWN.\n\n"
        + _ex(
            "jobtui check --max-oldest-age 10m --max-dead 0 --max-ready 10000",
            "jobtui check --max-oldest-age 5m --crit-oldest-age 30m",
        ),
    )
    p.error_exit_code = 3
    p.add_argument("--max-oldest-age", type=duration, metavar="DURATION")
    p.add_argument("--crit-oldest-age", type=duration, metavar="DURATION")
    p.add_argument("--max-dead", type=non_negative_int, metavar="N")
    p.add_argument("--crit-dead", type=non_negative_int, metavar="N")
    p.add_argument("--max-ready", type=non_negative_int, metavar="N")
    p.add_argument("--crit-ready", type=non_negative_int, metavar="N")

    p = add(
        "dead",
        "Dead letters: list, show, requeue, delete.",
        _ex(
            "jobtui dead list --kind export_crm",
            "jobtui dead show 123",
            "jobtui dead requeue 123 124",
            "jobtui dead requeue --kind export_crm --error timeout",
            "jobtui dead delete --all",
        ),
    )
    dsub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser, required=True)
    p.subcommands = dsub
    _listing(dsub, common, fmt, dead=True)
    _show(dsub, common, fmt, "dead letter")
    for action, verb in (
        ("requeue", "Put dead letters back in the queue (same ids)."),
        ("delete", "Delete dead letters for good."),
    ):
        a = dsub.add_parser(
            action,
            help=verb,
            description=verb,
            parents=[common],
            formatter_class=fmt,
            epilog=_ex(
                f"jobtui dead {action} 17 18",
                f"jobtui dead {action} --kind export_crm --error 'HTTP 503'",
                f"jobtui dead {action} --all",
            ),
        )
        a.add_argument("ids", nargs="*", type=job_id, metavar="ID")
        _filters(a, dead=True)
        a.add_argument(
            "--all", action="store_true", help="every dead letter (when no id or filter)"
        )

    p = add(
        "jobs",
        "Jobs: list, show, cancel, run now.",
        _ex(
            "jobtui jobs list --state ready --kind send_email",
            "jobtui jobs show 42",
            "jobtui jobs cancel --kind generate_report --state scheduled",
            "jobtui jobs run-now 42 43",
        ),
    )
    jsub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser, required=True)
    p.subcommands = jsub
    _listing(jsub, common, fmt, dead=False)
    _show(jsub, common, fmt, "job")
    for action, verb in (
        ("cancel", "Cancel pending jobs; running ones are asked to stop."),
        ("run-now", "Make scheduled or retrying jobs ready now."),
    ):
        a = jsub.add_parser(
            action,
            help=verb,
            description=verb,
            parents=[common],
            formatter_class=fmt,
            epilog=_ex(
                f"jobtui jobs {action} 42 43",
                f"jobtui jobs {action} --kind send_email --state scheduled",
            ),
        )
        a.add_argument("ids", nargs="*", type=job_id, metavar="ID")
        _filters(a, dead=False)
        a.add_argument(
            "--all", action="store_true", help="every pending job (when no id or filter)"
        )

    p = add(
        "prune",
        "Delete finished (succeeded or cancelled) jobs older than a window.",
        _ex("jobtui prune", "jobtui prune --older-than 30d"),
    )
    p.add_argument(
        "--older-than",
        type=duration,
        default=7 * 86400.0,
        metavar="DURATION",
        help="default 7d; dead letters are never pruned",
    )

    p = add(
        "roles",
        "Least-privilege roles: print the SQL creating monitor/operator/worker.",
        _ex(
            'jobtui roles --print-sql | psql "$DATABASE_URL"',
            "jobtui roles --print-sql --schema queue --prefix myapp_jobs_",
        ),
    )
    p.add_argument("--print-sql", action="store_true", required=True)
    p.add_argument("--prefix", default="jobtui_", help="role-name prefix (default jobtui_)")
    return parser


def _listing(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg,unused-ignore]
    common: Parser,
    fmt: type[argparse.HelpFormatter],
    *,
    dead: bool,
) -> None:
    what = "dead letters" if dead else "jobs"
    p = sub.add_parser(
        "list",
        help=f"List {what}, newest first.",
        description=f"List {what}, newest first.",
        parents=[common],
        formatter_class=fmt,
        epilog=_ex(
            f"jobtui {'dead' if dead else 'jobs'} list --kind send_email --limit 20",
            f"jobtui {'dead' if dead else 'jobs'} list --json",
        ),
    )
    _filters(p, dead=dead)
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many (default 50)")
    p.add_argument("--json", action="store_true", help="JSON array for scripts")


def _show(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg,unused-ignore]
    common: Parser,
    fmt: type[argparse.HelpFormatter],
    what: str,
) -> None:
    group = "dead" if what == "dead letter" else "jobs"
    p = sub.add_parser(
        "show",
        help=f"Show one {what} with its error history and tracebacks.",
        description=f"Show one {what} with its error history and tracebacks.",
        parents=[common],
        formatter_class=fmt,
        epilog=_ex(f"jobtui {group} show 42", f"jobtui {group} show 42 --json"),
    )
    p.add_argument("id", type=job_id)
    p.add_argument("--json", action="store_true")


def one_line(text: str) -> str:
    """Collapse a message to one inert line."""
    from jobtui.cli_format import clean

    return clean(" ".join(str(text).split())) or "failed"


def explain(exc: BaseException) -> tuple[str, int]:
    """(one-line message, exit code) for an exception a user may have caused."""
    import psycopg

    from jobtui.db import SchemaMissing, describe_error

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, psycopg.Error | SchemaMissing):
        return describe_error(exc), 1
    if isinstance(exc, _user_errors()):
        return str(exc), 1
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in str(exc):
        return "an argument or input is not valid UTF-8", 1
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", 1
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}", 1
    return f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)", 1


def _user_errors() -> tuple[type[BaseException], ...]:
    from jobtui.config import InvalidDuration
    from jobtui.console_config import ConfigError
    from jobtui.embedded import EmbeddedUnavailable
    from jobtui.enqueue import InvalidJob
    from jobtui.roles import InvalidRolePrefix
    from jobtui.schema import MigrationRefused
    from jobtui.sql import InvalidSchemaName

    found: list[type[BaseException]] = [
        InvalidDuration,
        ConfigError,
        EmbeddedUnavailable,
        InvalidJob,
        InvalidRolePrefix,
        MigrationRefused,
        InvalidSchemaName,
    ]
    try:
        from jobtui.registry import RegistryImportError

        found.append(RegistryImportError)
    except ImportError:  # pragma: no cover - the worker module is part of the package
        pass
    return tuple(found)


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
    from jobtui import cli_commands

    try:
        return cli_commands.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        if debug:
            raise
        message, code = explain(exc)
        print(f"jobtui: error: {one_line(message)}", file=sys.stderr)
        return code


def _silence_stdout() -> None:
    """After a closed pipe (`jobtui jobs list | head`), exit without a second error."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
