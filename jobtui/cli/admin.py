"""`jobtui worker`, `migrate`, `prune` and `roles`: running and maintaining a deployment."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

import psycopg

from jobtui import ops
from jobtui.cli.args import Args, Commands, duration, non_negative_int, positive_int
from jobtui.cli.errors import EXIT_TEMPFAIL, EXIT_USAGE, CliError, one_line
from jobtui.cli.progress import progress
from jobtui.cli.session import dsn_of, err, out, plural, run_with_connection, schema_of
from jobtui.config import format_duration
from jobtui.db import check_schema, connect

if TYPE_CHECKING:
    from jobtui.schema import Stall

DAY_S = 86400.0


def register(commands: Commands) -> None:
    _register_worker(commands)
    p = commands.add(
        "migrate",
        "Create or upgrade jobtui's tables (safe to run repeatedly).",
        cmd_migrate,
        "jobtui migrate",
        "jobtui migrate --schema queue --dry-run",
        "jobtui migrate --lock-timeout 5s --lock-retries 10   # a busy table: wait longer",
    )
    p.add_argument("--dry-run", action="store_true", help="print the SQL instead of running it")
    p.add_argument(
        "--lock-timeout",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="how long each try may wait for a lock on jobtui's tables; producers' INSERTs and "
        "workers' claims queue behind a waiting migrate (default 2s; 0 waits as long as it takes)",
    )
    p.add_argument(
        "--lock-retries",
        type=non_negative_int,
        default=5,
        metavar="N",
        help="tries again N times, 1s, 2s, 4s … apart, before giving up with nothing applied "
        f"(default 5; exit {EXIT_TEMPFAIL})",
    )

    p = commands.add(
        "prune",
        "Delete finished (succeeded or cancelled) jobs older than a window.",
        cmd_prune,
        "jobtui prune",
        "jobtui prune --older-than 30d",
    )
    p.add_argument(
        "--older-than",
        type=duration,
        default=7 * DAY_S,
        metavar="DURATION",
        help="default 7d; dead letters are never pruned",
    )

    p = commands.add(
        "roles",
        "Least-privilege roles: print the SQL creating monitor/operator/worker.",
        cmd_roles,
        'jobtui roles --print-sql | psql "$DATABASE_URL"',
        "jobtui roles --print-sql --schema queue --prefix myapp_jobs_",
    )
    p.add_argument(
        "--print-sql",
        action="store_true",
        required=True,
        help="print the SQL (required: it is run by a DBA, never by jobtui)",
    )
    p.add_argument("--prefix", default="jobtui_", help="role-name prefix (default jobtui_)")


def _register_worker(commands: Commands) -> None:
    p = commands.add(
        "worker",
        "Run the bundled worker with your handlers.",
        cmd_worker,
        "jobtui worker --app myapp.jobs",
        "jobtui worker --app myapp.jobs:registry --concurrency 20 --kinds email,report",
    )
    p.add_argument(
        "--app",
        required=True,
        metavar="MODULE[:ATTR]",
        help="module holding a jobtui Registry (attribute default: registry)",
    )
    p.add_argument("--concurrency", type=positive_int, default=10, help="jobs at once (default 10)")
    p.add_argument("--kinds", help="comma-separated kinds to handle (default: all registered)")
    for flag, default, help_ in (
        ("--heartbeat", 5.0, "heartbeat interval (default 5s)"),
        (
            "--heartbeat-timeout",
            30.0,
            "a worker silent this long is dead and its jobs are rescued (default 30s)",
        ),
        ("--shutdown-grace", 30.0, "on SIGTERM, wait this long for running jobs (default 30s)"),
        ("--retention", 7 * DAY_S, "prune finished jobs older than this (default 7d)"),
    ):
        p.add_argument(flag, type=duration, default=default, metavar="DURATION", help=help_)
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="the worker's log level (default INFO)",
    )
    p.add_argument(
        "--listen-dsn",
        default=None,
        metavar="DSN",
        help="session-mode DSN for LISTEN when --dsn goes through a transaction pooler "
        "(env JOBTUI_LISTEN_DSN)",
    )


_WORKER_FLAGS = {
    "concurrency": "--concurrency",
    "heartbeat_interval": "--heartbeat",
    "heartbeat_timeout": "--heartbeat-timeout",
    "shutdown_grace": "--shutdown-grace",
    "retention": "--retention",
}


def cmd_worker(args: Args) -> int:
    from jobtui.registry import load_registry  # the worker is imported by this command only
    from jobtui.worker import WorkerSettings, run_worker
    from jobtui.worker.supervisor import LISTEN_DSN_ENV

    registry = load_registry(args.app)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    if args.kinds is not None and not kinds:
        # `--kinds "$KINDS"` with KINDS unset: handling every kind is not what was asked.
        raise CliError(
            "--kinds names no kind: give comma-separated kinds, or leave it out to handle "
            "every registered kind",
            EXIT_USAGE,
        )
    if kinds:
        missing = [k for k in kinds if k not in registry]
        if missing:
            raise CliError(
                f"--kinds names kinds with no handler in {args.app}: {', '.join(missing)}"
            )
    if args.listen_dsn is not None and not args.listen_dsn.strip():
        # As --dsn "": LISTEN would quietly go through --dsn, the pooler it was meant to avoid.
        raise CliError(
            "--listen-dsn is empty: give a session-mode connection string, or leave it out",
            EXIT_USAGE,
        )
    if not (os.environ.get(LISTEN_DSN_ENV, "x").strip()):
        raise CliError(
            f"{LISTEN_DSN_ENV} is set but empty: set it to a connection string or unset it",
            EXIT_USAGE,
        )
    settings = WorkerSettings(
        listen_dsn=args.listen_dsn,
        concurrency=args.concurrency,
        kinds=tuple(kinds) if kinds else None,
        heartbeat_interval=args.heartbeat,
        heartbeat_timeout=args.heartbeat_timeout,
        shutdown_grace=args.shutdown_grace,
        retention=timedelta(seconds=args.retention),
    )
    try:  # a bad flag is a usage error before the database is reached (it said 'not migrated')
        settings.check()
    except ValueError as exc:
        # Said with the flags given, not WorkerSettings' field names (heartbeat_interval…).
        raise CliError(
            re.sub(r"\b[a-z_]+\b", lambda m: _WORKER_FLAGS.get(m[0], m[0]), str(exc)), EXIT_USAGE
        ) from None
    dsn, schema = dsn_of(args), schema_of(args)
    with connect(dsn) as conn:
        check_schema(conn, schema)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    asyncio.run(run_worker(dsn, schema, registry, settings))
    return 0


def cmd_migrate(args: Args) -> int:
    from jobtui.schema import (
        LockWait,
        MigrationBlocked,
        applied_versions,
        migrate_report,
        pending_sql,
    )

    schema, dsn = schema_of(args), dsn_of(args)
    with connect(dsn) as conn:
        if args.dry_run:
            pending = pending_sql(conn, schema)
            if not pending:
                out(f"-- schema {schema} is up to date; nothing to apply")
            for migration, sql in pending:
                out(f"-- migration {migration.version:04d}_{migration.name}")
                out(sql.rstrip() + "\n")
            return 0
        lock = LockWait(
            timeout_s=args.lock_timeout,
            retries=args.lock_retries,
            watch=lambda: connect(dsn, app="jobtui migrate (lock watch)"),
            on_retry=_note_retry if sys.stderr.isatty() else None,
        )
        try:
            result = migrate_report(conn, schema, lock)
        except MigrationBlocked as exc:
            raise CliError(str(exc), EXIT_TEMPFAIL) from None
        version = max(applied_versions(conn, schema), default=0)
    if result.recognised is not None:
        out(result.recognised.message(schema))
    if result.applied:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in result.applied)
        out(f"migrated schema {schema} to version {version} (applied {names})")
    else:
        out(f"schema {schema} is up to date (version {version})")
    if not result.analyzed:
        err(
            f"note: ANALYZE of {schema}.jobs could not get its lock within --lock-timeout (a "
            "VACUUM?); autovacuum will analyse it, or run ANALYZE yourself"
        )
    return 0


def _note_retry(tries: int, pause_s: float, stall: Stall | None) -> None:
    """On a terminal, say why migrate is waiting between tries (a script sees only the end)."""
    who = ""
    if stall is not None and stall.holders:
        who = f": blocked by {stall.holders[0].describe(stall.target)}"
    err(one_line(f"migrate: try {tries} ran out of lock time{who}; trying again in {pause_s:g}s"))


def cmd_prune(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        with progress("pruning finished jobs", None) as update:
            n = await ops.prune_finished(
                conn,
                schema,
                timedelta(seconds=args.older_than),
                actor=ops.Actor.current(),
                on_progress=update,
            )
        out(f"pruned {plural(n, 'finished job')} older than {format_duration(args.older_than)}")
        return 0

    return run_with_connection(args, body)


def cmd_roles(args: Args) -> int:
    from jobtui.roles import roles_sql

    sys.stdout.write(roles_sql(schema_of(args), args.prefix))
    return 0
