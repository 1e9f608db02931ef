"""What every command group uses to declare its sub-commands: the parser class, the options
common to all, argument types, and `Commands`, which adds a sub-command with its handler.

A sub-command's handler is stored on its parser (`handler=`), so `jobtui.cli.main` calls
`args.handler(args)`: no table of names, no string-built dispatch.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from jobtui.cli.errors import EXIT_USAGE
from jobtui.config import InvalidDuration, parse_duration
from jobtui.console_config import MAX_REFRESH_S, MIN_REFRESH_S, seconds_text
from jobtui.jobspec import MAX_KIND_CHARS

# ASCII digits only: Python's int() also reads '١' (Arabic-Indic one) or '1_000', and an
# operator who pasted such a thing meant something else than job 1 or 1000.
_WHOLE = re.compile(r"\s*[+-]?[0-9]+\s*")

Args = argparse.Namespace
Handler = Callable[[Args], int]
FORMATTER = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """argparse with errors as a single line (usage is one `--help` away)."""

    error_exit_code = EXIT_USAGE
    subcommands: argparse._SubParsersAction | None = None
    argv: Sequence[str] = ()  # the words parsed, whose passwords an error must not print

    def error(self, message: str) -> NoReturn:
        message = _did_you_mean(" ".join(message.split()))
        # `jobtui stats --dns postgresql://u:secret@h/db` printed "unrecognized arguments:
        # --dns postgresql://u:secret@h/db": a DSN given where none is taken is quoted whole.
        from jobtui.targets import passwords

        for word in self.argv:
            for part in {word, word.partition("=")[2]}:
                for secret in sorted(passwords(part) - {""}, key=len, reverse=True):
                    message = message.replace(secret, "***")
        self.exit(
            self.error_exit_code, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n"
        )


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _did_you_mean(message: str) -> str:
    """argparse's "invalid choice: 'stat' (choose from 'console', …)" with the nearest choice
    said first (`jobtui stat`, `jobtui jobs lst`): the list alone left the reader to find it."""
    match = _INVALID_CHOICE.search(message)
    if not match:
        return message
    import difflib

    # 'a', 'b' up to Python 3.12.6; a, b (str, not repr: gh-117766) in 3.12.7+ and 3.13
    choices = [c.strip().strip("'") for c in match[2].split(",")]
    near = difflib.get_close_matches(match[1], choices, n=1, cutoff=0.6)
    return f"{message}; did you mean {near[0]!r}?" if near else message


@dataclass(frozen=True)
class Commands:
    """Adds sub-commands (each with its handler) to one parser."""

    parser: Parser
    common: Parser

    @classmethod
    def under(cls, parser: Parser, common: Parser, dest: str, *, required: bool) -> Commands:
        sub = parser.add_subparsers(
            dest=dest, metavar=dest.upper(), parser_class=Parser, required=required
        )
        parser.subcommands = sub
        return cls(parser, common)

    def add(self, name: str, help_: str, handler: Handler | None, *examples: str) -> Parser:
        """A sub-command; `examples` become its epilog (a line without `jobtui` is prose)."""
        assert self.parser.subcommands is not None
        p = self.parser.subcommands.add_parser(
            name,
            help=help_,
            description=help_,
            parents=[self.common],
            formatter_class=FORMATTER,
            epilog=epilog(*examples),
        )
        assert isinstance(p, Parser)
        if handler is not None:
            p.set_defaults(handler=handler)
        return p

    def group(self, name: str, help_: str, *examples: str) -> Commands:
        """A sub-command that has sub-commands of its own (`jobtui dead list`)."""
        parser = self.add(name, help_, None, *examples)
        return Commands.under(parser, self.common, "action", required=True)


def epilog(*lines: str) -> str:
    """Examples (lines starting with `jobtui`) after any prose lines."""
    prose = [line for line in lines if not line.startswith(("jobtui", "cat "))]
    examples = [line for line in lines if line.startswith(("jobtui", "cat "))]
    text = "examples:\n" + "\n".join("  " + line for line in examples) if examples else ""
    return "\n".join(prose) + "\n\n" + text if prose else text


def common_options() -> Parser:
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
        "--target",
        metavar="NAME",
        action="append",
        default=argparse.SUPPRESS,
        help="a database named in the config file's [targets.NAME] (repeat for several; "
        "stats, check and the console watch them all)",
    )
    g.add_argument(
        "--all-targets",
        action="store_true",
        default=argparse.SUPPRESS,
        help="every target of the config file",
    )
    g.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks instead of one-line errors",
    )
    return p


# --- argument types -------------------------------------------------------------------------


def duration(text: str) -> float:
    """argparse type: a duration in seconds (`30s`, `5m`, `2h`, `7d`)."""
    try:
        return parse_duration(text).total_seconds()
    except InvalidDuration as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_within(low: float, high: float) -> Callable[[str], float]:
    """argparse type: a duration from `low` to `high` seconds. Out of range is an error, not a
    quiet clamp: `--refresh 0` was ignored (0 is falsy) and `--refresh 0.1s` became 0.5 s."""

    def parse(text: str) -> float:
        seconds = duration(text)
        if not low <= seconds <= high:
            raise argparse.ArgumentTypeError(
                f"expected {seconds_text(low)} to {seconds_text(high)}, not {text!r}"
            )
        return seconds

    return parse


# --refresh, of the console and of `jobtui serve`: the range the config file's refresh takes.
REFRESH = duration_within(MIN_REFRESH_S, MAX_REFRESH_S)


def _whole(text: str, what: str = "a whole number") -> int:
    if not _WHOLE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}")
    return int(text)


def non_negative_int(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected zero or more, not {value}")
    return value


def positive_int(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, not {value}")
    return value


# An int4 column's range (priority, max_attempts): beyond it the API said only "priority N is
# out of range", and `type=int` read '1_0' or '١' as numbers.
INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1


def whole_within(low: int, high: int) -> Callable[[str], int]:
    """argparse type: a whole number (ASCII digits) from `low` to `high`, the range said."""

    def parse(text: str) -> int:
        value = _whole(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low} to {high}, not {value}")
        return value

    return parse


def attempts(text: str) -> int:
    """argparse type: --max-attempts, 1 or more and within the int4 column."""
    value = positive_int(text)
    if value > INT4_MAX:
        raise argparse.ArgumentTypeError(f"expected at most {INT4_MAX}, not {value}")
    return value


def job_id(text: str) -> int:
    if not _WHOLE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"job ids are whole numbers, not {text!r}")
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"job ids are positive, not {value}")
    return value


def kind_name(text: str) -> str:
    """argparse type: a kind name as enqueue would accept it (non-empty, at most 200 chars)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a kind name is not empty")
    if len(text) > MAX_KIND_CHARS:
        raise argparse.ArgumentTypeError(
            f"a kind name is at most {MAX_KIND_CHARS} characters, not {len(text)}"
        )
    return text


def filter_text(text: str) -> str:
    """argparse type: a filter's value, not blank. `--kind ""` (a `--kind "$KIND"` of an unset
    variable) was no filter at all: `jobs list` listed every job, and `jobs cancel` said "name
    job ids, a filter (--kind, --error, …) or --all" to someone who had given --kind."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a value or leave the option out")
    return text


def config_path(text: str) -> str:
    """argparse type: `--config PATH`, not blank (`--config "$CFG"` of an unset variable read
    the default file, which may lack the named one's read_only = true or its targets)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a config file or leave --config out")
    return text
