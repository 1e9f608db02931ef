"""`jobtui console` (also `jobtui` alone): the only CLI module that imports the console.

textual is imported when the console starts, never when the command line is parsed, so the
other commands run on machines and in scripts where no terminal UI is wanted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from jobtui.cli.args import Args, Commands, duration
from jobtui.cli.errors import CliError
from jobtui.cli.session import dsn_of, schema_of
from jobtui.console_config import ConsoleConfig, load_console_config
from jobtui.db import check_schema, connect

MIN_REFRESH_S = 0.5


def register(commands: Commands) -> None:
    """`jobtui console`, and its options on `jobtui` itself (which opens the console too)."""
    add_options(commands.parser, suppress=True)
    commands.parser.set_defaults(handler=cmd_console)
    p = commands.add(
        "console",
        "Open the terminal console.",
        cmd_console,
        "jobtui console",
        "jobtui console --read-only --refresh 5s",
    )
    add_options(p, suppress=False)


def add_options(p: argparse.ArgumentParser, suppress: bool) -> None:
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
        "--env",
        metavar="NAME",
        default=default,
        help="environment name shown as a banner, red when it matches [console] "
        "env_danger_pattern (default prod*)",
    )
    p.add_argument(
        "--refresh",
        type=duration,
        metavar="DURATION",
        default=default,
        help="refresh interval, e.g. 2s (default from config: 2s)",
    )


def cmd_console(args: Args) -> int:
    config_path = getattr(args, "config", None)
    config = load_console_config(Path(config_path) if config_path else None)
    if getattr(args, "read_only", False):
        config = config.with_(read_only=True)
    if getattr(args, "env", None):
        config = config.with_(env=args.env)
    refresh = getattr(args, "refresh", None)
    if refresh:
        config = config.with_(refresh_s=max(MIN_REFRESH_S, refresh))
    dsn, schema = dsn_of(args), schema_of(args)
    with connect(dsn) as conn:  # one clear line now rather than a banner in an empty console
        check_schema(conn, schema)
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CliError("the console needs a terminal (for scripts, see `jobtui stats`)")
    return run(dsn, schema, config)


def run(dsn: str, schema: str, config: ConsoleConfig) -> int:
    """Run the console until the operator quits; returns the exit code."""
    from jobtui.tui.app import run_console  # textual is imported here, and only here

    return int(
        run_console(
            dsn, schema, config=config, env=config.env, env_danger_pattern=config.env_danger_pattern
        )
        or 0
    )
