"""`jobtui console` (also `jobtui` alone): the only CLI module that imports the console.

textual is imported when the console starts, never when the command line is parsed, so the
other commands run on machines and in scripts where no terminal UI is wanted.

Deep links open the console somewhere: `--tab NAME [--filter TEXT]` (the filter of the Jobs or
Dead letters tab, in the `/` prompt's syntax; a filter alone applies to Jobs) and `--job ID`
(its detail: the job's, or the dead letter's when the id is in dead letters only). All are
checked before the console starts: a bad tab or filter, or an id in neither table, is one
line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobtui.cli.args import REFRESH, Args, Commands, config_path, job_id
from jobtui.cli.errors import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from jobtui.console_config import ConsoleConfig
    from jobtui.ops import Actor
    from jobtui.targets import Target
    from jobtui.tui.app import DeepLink


def register(commands: Commands) -> None:
    """`jobtui console`, and its options on `jobtui` itself (which opens the console too)."""
    add_options(commands.parser)
    commands.parser.set_defaults(handler=cmd_console)
    p = commands.add(
        "console",
        "Open the terminal console.",
        cmd_console,
        "jobtui console",
        "jobtui console --read-only --refresh 5s",
        "jobtui console --tab dead --filter 'kind:export_crm'",
        "jobtui console --job 123",
    )
    add_options(p)
    # Set by `jobtui serve` for each browser session (see serve.py): the audit log names the
    # web user, and the console talks to the browser through pipes, not a terminal.
    p.add_argument("--web-user", metavar="NAME", default=None, help=argparse.SUPPRESS)


def add_options(p: argparse.ArgumentParser) -> None:
    # Absent options stay absent on `console` too (SUPPRESS), so `jobtui --config X console`
    # keeps the --config given before the command (a default here would replace it).
    default: Any = argparse.SUPPRESS
    p.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS,
        help="never offer write actions",
    )
    p.add_argument(
        "--config",
        type=config_path,
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
        type=REFRESH,
        metavar="DURATION",
        default=default,
        help="refresh interval, 0.5s to 5m, e.g. 2s (default from config: 2s)",
    )
    p.add_argument(
        "--tab",
        metavar="NAME",
        default=default,
        help="open on this tab: overview, jobs, dead, workers, schedules, database",
    )
    p.add_argument(
        "--filter",
        metavar="TEXT",
        default=default,
        help="the filter of --tab jobs or dead, as typed at `/` (e.g. 'kind:email state:ready')",
    )
    p.add_argument(
        "--job",
        type=job_id,
        metavar="ID",
        default=default,
        help="open the detail of this job (or of the dead letter with this id)",
    )


def cmd_console(args: Args) -> int:
    # Imported here: this module is loaded to parse every command line (`jobtui --version`).
    import asyncio

    from jobtui.cli.session import dsn_of, schema_of
    from jobtui.console_config import load_console_config
    from jobtui.db import check_schema, connect

    config_path = getattr(args, "config", None)
    config = load_console_config(Path(config_path) if config_path else None)
    if getattr(args, "read_only", False):
        config = config.with_(read_only=True)
    if getattr(args, "env", None):
        config = config.with_(env=args.env)
    refresh = getattr(args, "refresh", None)
    if refresh is not None:
        config = config.with_(refresh_s=refresh)
    # --- targets (issue 28): several targets open on the targets overview ---
    from jobtui.cli.session import base_schema, one_target, targets_of

    chosen = targets_of(args)
    if len(chosen) > 1:
        if any(getattr(args, k, None) is not None for k in ("tab", "filter", "job")):
            raise CliError(
                "--tab, --filter and --job open one target's console: give one --target",
                EXIT_USAGE,
            )
        if not sys.stdout.isatty() or not sys.stdin.isatty():
            raise CliError("the console needs a terminal (for scripts, see `jobtui stats`)")
        from jobtui.tui.targets_screen import run_targets

        return run_targets(chosen, base_schema(args), config)
    # --- end targets ---
    from jobtui.tui.app import deep_link  # textual is imported here, and only here

    try:
        opening = deep_link(getattr(args, "tab", None), getattr(args, "filter", None))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    dsn, schema = dsn_of(args), schema_of(args)
    with connect(dsn) as conn:  # one clear line now rather than a banner in an empty console
        check_schema(conn, schema)
    wanted = getattr(args, "job", None)
    if wanted is not None:
        what = asyncio.run(_which_table(dsn, schema, wanted))
        if what is None:
            raise CliError(f"--job {wanted}: no job or dead letter has this id")
        opening = dataclasses.replace(opening, detail=(what, wanted))
    web_user = getattr(args, "web_user", None)
    if web_user is None and (not sys.stdout.isatty() or not sys.stdin.isatty()):
        raise CliError("the console needs a terminal (for scripts, see `jobtui stats`)")
    if web_user is not None:
        from jobtui.ops import Actor

        _exit_with_parent()

        note = "served read-only: `jobtui serve` without --allow-writes"
        return run(
            dsn,
            schema,
            config,
            opening,
            actor=Actor.web(web_user),
            read_only_note=note,
            target=one_target(args),
        )
    return run(dsn, schema, config, opening, target=one_target(args))


def _exit_with_parent() -> None:
    """A browser session's console ends when `jobtui serve` does, even when it was killed:
    nothing else would ever stop it (its input ends, but the web driver keeps the app up).
    The parent's death shows as a new parent; SIGTERM then quits the app as the web driver
    does, and a console that still runs a while later is ended."""
    import os
    import signal
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10.0)
        os._exit(1)

    threading.Thread(target=watch, name="jobtui-exit-with-serve", daemon=True).start()


async def _which_table(dsn: str, schema: str, row_id: int) -> str | None:
    """ "job" when `row_id` is in jobs, "dead" when only in dead letters, else None."""
    from jobtui import browse
    from jobtui.db import aconnect

    conn = await aconnect(dsn)
    try:
        if await browse.get_job(conn, schema, row_id) is not None:
            return "job"
        if await browse.get_dead(conn, schema, row_id) is not None:
            return "dead"
        return None
    finally:
        await conn.close()


def run(
    dsn: str,
    schema: str,
    config: ConsoleConfig,
    opening: DeepLink | None = None,
    *,
    actor: Actor | None = None,
    read_only_note: str = "--read-only or config",
    target: Target | None = None,
) -> int:
    """Run the console until the operator quits; returns the exit code."""
    from jobtui.tui.app import run_console

    return int(
        run_console(
            dsn,
            schema,
            config=config,
            env=config.env,
            env_danger_pattern=config.env_danger_pattern,
            opening=opening,
            actor=actor,
            read_only_note=read_only_note,
            target=target,
        )
        or 0
    )
