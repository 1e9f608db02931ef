"""Errors and exit codes of the `jobtui` command; every CLI module may import this one.

A failure the user can cause becomes one line on stderr (`jobtui: error: …`) and a non-zero
exit; `explain` decides the line and the code, `one_line` makes it inert.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1  # the command could not do what was asked
EXIT_USAGE = 2  # the arguments were wrong (argparse's convention)
EXIT_TEMPFAIL = 75  # nothing was done and trying later may work (sysexits' EX_TEMPFAIL)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)

# `jobtui check` speaks the Nagios/Icinga plugin protocol instead (usage errors are UNKNOWN).
CHECK_OK, CHECK_WARNING, CHECK_CRITICAL, CHECK_UNKNOWN = 0, 1, 2, 3


class CliError(Exception):
    """A failure the user can fix; printed as one line, exit `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: str) -> str:
    """Collapse a message to one inert line."""
    from jobtui.inert import clean

    return clean(" ".join(str(text).split())) or "failed"


def explain(exc: BaseException) -> tuple[str, int]:
    """(one-line message, exit code) for an exception a user may have caused."""
    import psycopg

    from jobtui.db import SchemaMissing, describe_error

    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, psycopg.Error | SchemaMissing):
        return describe_error(exc), EXIT_FAILURE
    if isinstance(exc, _user_errors()):
        return str(exc), EXIT_FAILURE
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in str(exc):
        return "an argument or input is not valid UTF-8", EXIT_FAILURE
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}", EXIT_FAILURE
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}", EXIT_FAILURE
    return (
        f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)",
        EXIT_FAILURE,
    )


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions of the layers below that carry a message meant for the user."""
    from jobtui.browse import InvalidFilter
    from jobtui.config import InvalidDuration, InvalidSetting
    from jobtui.console_config import ConfigError
    from jobtui.demo import DemoError
    from jobtui.embedded import EmbeddedUnavailable
    from jobtui.enqueue import InvalidJob
    from jobtui.limits import InvalidLimit
    from jobtui.registry import RegistryImportError
    from jobtui.roles import InvalidRolePrefix
    from jobtui.schedules import InvalidSchedule
    from jobtui.schema import MigrationRefused
    from jobtui.sql import InvalidSchemaName

    return (
        InvalidFilter,  # and ops.InvalidAction
        InvalidLimit,
        InvalidSetting,
        InvalidSchedule,
        InvalidDuration,
        ConfigError,
        DemoError,
        EmbeddedUnavailable,
        InvalidJob,
        InvalidRolePrefix,
        MigrationRefused,
        InvalidSchemaName,
        RegistryImportError,
    )
