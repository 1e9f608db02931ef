"""`jobtui demo`: a self-contained demo over an embedded PostgreSQL (see `jobtui.demo`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from jobtui.cli import console
from jobtui.cli.args import Args, Commands, duration
from jobtui.cli.errors import CliError
from jobtui.cli.session import out, schema_of
from jobtui.console_config import load_console_config
from jobtui.demo import DemoOptions, default_data_dir, run_demo


def register(commands: Commands) -> None:
    p = commands.add(
        "demo",
        "Run a self-contained demo: embedded PostgreSQL, worker, live jobs, console.",
        cmd_demo,
        "jobtui demo",
        "jobtui demo --reset          # start from a fresh database",
        "jobtui demo --headless 20    # no console: run 20 s and print a summary",
        'jobtui --dsn "$(jobtui demo --print-dsn)" dead list   # from another terminal',
    )
    p.add_argument("--reset", action="store_true", help="wipe the demo database first")
    p.add_argument(
        "--headless",
        type=duration,
        metavar="DURATION",
        help="run without the console for this long, then stop and print figures (0: until "
        "interrupted, as --no-console)",
    )
    p.add_argument(
        "--no-console",
        action="store_true",
        help="run without the console until interrupted (Ctrl-C or SIGTERM)",
    )
    p.add_argument(
        "--data-dir", metavar="PATH", help="demo directory (default: $XDG_DATA_HOME/jobtui/demo)"
    )
    p.add_argument(
        "--print-dsn",
        action="store_true",
        help="print the DSN of the demo running now (for another terminal) and exit",
    )


def cmd_demo(args: Args) -> int:
    if args.print_dsn:
        return _print_dsn(args)
    headless = args.headless if args.headless is not None else (0.0 if args.no_console else None)
    runner = None
    if headless is None:
        config = load_console_config()  # a broken config file fails now, before anything starts
        runner = partial(_console, config=config)
    return run_demo(
        DemoOptions(
            reset=args.reset,
            headless_s=headless,
            data_dir=Path(args.data_dir) if args.data_dir else None,
            schema=schema_of(args),
            console=runner,
        )
    )


def _console(dsn: str, schema: str, *, config: console.ConsoleConfig) -> int:
    return console.run(dsn, schema, config)


def _print_dsn(args: Args) -> int:
    """The running demo's DSN on stdout; exit 1 with one line when no demo is running (no
    DSN file, or one a killed demo left whose server does not answer)."""
    import psycopg

    root = (Path(args.data_dir) if args.data_dir else default_data_dir()).expanduser()
    try:
        dsn = (root / "dsn").read_text().strip()
    except FileNotFoundError:
        dsn = ""
    if dsn:
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
        except psycopg.Error:
            raise CliError(
                f"no demo is running (the DSN in {root / 'dsn'} is left from one that stopped): "
                "start one with `jobtui demo`"
            ) from None
    if not dsn:
        raise CliError(
            f"no demo is running (no DSN in {root / 'dsn'}): start one with `jobtui demo`"
        )
    out(dsn)
    return 0
