"""What each `jobtui` subcommand does, once `jobtui.cli` has parsed the arguments.

Reads and operator actions go through `browse`, `metrics` and `ops` (the same code the console
uses); this module only connects, calls and prints. Database text is printed inert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from jobtui import cli_format as fmt
from jobtui.cli import CliError
from jobtui.config import resolve_dsn, resolve_schema
from jobtui.db import acheck_schema, aconnect, check_schema, connect, describe_error
from jobtui.models import JOB_STATES, PENDING_STATES, DeadFilter, JobFilter

Args = argparse.Namespace


def run(args: Args) -> int:
    """Dispatch to the subcommand; returns the exit code."""
    command = args.command or "console"
    if command in ("dead", "jobs"):
        command = f"{command}_{args.action.replace('-', '_')}"
    handler: Callable[[Args], int] = COMMANDS[command]
    return handler(args)


def _dsn(args: Args) -> str:
    return resolve_dsn(getattr(args, "dsn", None))


def _schema(args: Args) -> str:
    from jobtui.sql import quote_schema

    schema = resolve_schema(getattr(args, "schema", None))
    quote_schema(schema)  # an invalid name fails here, with one line
    return schema


async def _with_conn(
    args: Args, body: Callable[[psycopg.AsyncConnection, str], Awaitable[int]]
) -> int:
    schema = _schema(args)
    conn = await aconnect(_dsn(args))
    try:
        await acheck_schema(conn, schema)
        return await body(conn, schema)
    finally:
        await conn.close()


def _arun(args: Args, body: Callable[[psycopg.AsyncConnection, str], Awaitable[int]]) -> int:
    return asyncio.run(_with_conn(args, body))


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


# --- console and demo -----------------------------------------------------------------------


def cmd_console(args: Args) -> int:
    from jobtui.console_config import load_console_config

    config_path = getattr(args, "config", None)
    config = load_console_config(Path(config_path) if config_path else None)
    if getattr(args, "read_only", False):
        config = config.with_(read_only=True)
    refresh = getattr(args, "refresh", None)
    if refresh:
        config = config.with_(refresh_s=max(0.5, refresh))
    dsn, schema = _dsn(args), _schema(args)
    with connect(dsn) as conn:  # one clear line now rather than a banner in an empty console
        check_schema(conn, schema)
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CliError("the console needs a terminal (for scripts, see `jobtui stats`)")
    from jobtui.tui.app import run_console  # textual is imported here, and only here

    return int(run_console(dsn, schema, config=config) or 0)


def cmd_demo(args: Args) -> int:
    from jobtui.demo import DemoOptions, run_demo

    headless = args.headless
    return run_demo(
        DemoOptions(
            reset=args.reset,
            headless_s=headless if headless is not None else (0.0 if args.no_console else None),
            data_dir=Path(args.data_dir) if args.data_dir else None,
            schema=_schema(args),
        )
    )


# --- worker and migrate ---------------------------------------------------------------------


def cmd_worker(args: Args) -> int:
    import logging

    from jobtui.registry import load_registry
    from jobtui.worker import WorkerSettings, run_worker

    registry = load_registry(args.app)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    if kinds:
        missing = [k for k in kinds if k not in registry]
        if missing:
            raise CliError(
                f"--kinds names kinds with no handler in {args.app}: {', '.join(missing)}"
            )
    dsn, schema = _dsn(args), _schema(args)
    with connect(dsn) as conn:
        check_schema(conn, schema)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    settings = WorkerSettings(
        concurrency=args.concurrency,
        kinds=tuple(kinds) if kinds else None,
        heartbeat_interval=args.heartbeat,
        heartbeat_timeout=args.heartbeat_timeout,
        shutdown_grace=args.shutdown_grace,
        retention=timedelta(seconds=args.retention),
    )
    try:
        settings.check()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    asyncio.run(run_worker(dsn, schema, registry, settings))
    return 0


def cmd_migrate(args: Args) -> int:
    from jobtui.schema import applied_versions, migrate, pending_sql

    schema = _schema(args)
    with connect(_dsn(args)) as conn:
        if args.dry_run:
            pending = pending_sql(conn, schema)
            if not pending:
                _out(f"-- schema {schema} is up to date; nothing to apply")
            for migration, sql in pending:
                _out(f"-- migration {migration.version:04d}_{migration.name}")
                _out(sql.rstrip() + "\n")
            return 0
        applied = migrate(conn, schema)
        version = max(applied_versions(conn, schema), default=0)
    if applied:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied)
        _out(f"migrated schema {schema} to version {version} (applied {names})")
    else:
        _out(f"schema {schema} is up to date (version {version})")
    return 0


# --- enqueue --------------------------------------------------------------------------------


def _json_error(what: str, exc: json.JSONDecodeError) -> str:
    return f"{what}: {exc.msg} at line {exc.lineno}, column {exc.colno}"


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(_json_error("invalid JSON payload", exc)) from None
    except RecursionError:
        raise CliError("invalid JSON payload: nested too deeply") from None


def _parse_time(text: str, where: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"{where}: {text!r} is not an ISO 8601 time, e.g. 2030-01-31T09:00:00+00:00"
        ) from None
    if value.tzinfo is None:
        raise CliError(f"{where}: {text!r} has no UTC offset; add one, e.g. +00:00 or Z")
    return value


def _line_spec(lineno: int, raw: str, path: str) -> Any:
    from jobtui.config import InvalidDuration, parse_duration
    from jobtui.enqueue import InvalidJob, JobSpec

    where = f"{path}: line {lineno}"
    try:
        item = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise CliError(f"{where}: invalid JSON: nested too deeply") from None
    if not isinstance(item, dict):
        raise CliError(f'{where}: expected an object with "kind" and "payload"')
    unknown = set(item) - {"kind", "payload", "run_at", "delay", "max_attempts", "priority"}
    if unknown:
        raise CliError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    if "kind" not in item:
        raise CliError(f'{where}: missing "kind"')
    fields = dict(item)
    fields.setdefault("payload", {})
    try:
        if isinstance(fields.get("run_at"), str):
            fields["run_at"] = _parse_time(fields["run_at"], f"{where}: run_at")
        if fields.get("delay") is not None:
            fields["delay"] = parse_duration(str(fields["delay"]))
        for key in ("max_attempts", "priority"):
            if key in fields and fields[key] is None:
                del fields[key]
        return JobSpec(**fields).validated()
    except CliError:
        raise
    except (InvalidJob, InvalidDuration, TypeError) as exc:
        raise CliError(f"{where}: {exc}") from None


def _read_specs(path: str) -> list[Any]:
    if path == "-":
        lines = sys.stdin.read().splitlines()
        name = "<stdin>"
    else:
        try:
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except UnicodeDecodeError as exc:
            raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        name = path
    return [_line_spec(n, raw, name) for n, raw in enumerate(lines, 1) if raw.strip()]


def cmd_enqueue(args: Args) -> int:
    from jobtui.cli_progress import progress
    from jobtui.enqueue import enqueue, enqueue_many

    schema = _schema(args)
    if args.file:
        if args.kind or args.payload:
            raise CliError("give either KIND [PAYLOAD_JSON] or --file, not both")
        if args.delay is not None or args.run_at or args.max_attempts or args.priority is not None:
            raise CliError("with --file, put run_at/delay/max_attempts/priority in each line")
        specs = _read_specs(args.file)
        with connect(_dsn(args), autocommit=False) as conn:
            check_schema(conn, schema)
            conn.rollback()
            with progress("enqueueing", len(specs)) as update:
                n = enqueue_many(conn, specs, schema=schema, on_progress=update)
            conn.commit()
        _out(f"enqueued {n} job{'s' if n != 1 else ''}")
        return 0
    if not args.kind:
        raise CliError("give a job KIND (and optionally PAYLOAD_JSON), or --file PATH")
    payload = _parse_payload(args.payload)
    options: dict[str, Any] = {"schema": schema}
    if args.delay is not None:
        options["delay"] = timedelta(seconds=args.delay)
    if args.run_at:
        options["run_at"] = _parse_time(args.run_at, "--run-at")
    if args.max_attempts is not None:
        options["max_attempts"] = args.max_attempts
    if args.priority is not None:
        options["priority"] = args.priority
    with connect(_dsn(args), autocommit=False) as conn:
        check_schema(conn, schema)
        job = enqueue(conn, args.kind, payload, **options)
        conn.commit()
    _out(str(job))
    return 0


# --- stats and check ------------------------------------------------------------------------


def cmd_stats(args: Args) -> int:
    from jobtui.metrics import snapshot

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        snap = await snapshot(conn, schema, window_minutes=max(1, round(args.window / 60)))
        if args.prometheus:
            text = fmt.prometheus_text(snap)
        elif args.json:
            text = fmt.dumps(snap) + "\n"
        else:
            text = fmt.stats_text(snap) + "\n"
        if args.output:
            _write_atomically(Path(args.output), text)
        else:
            sys.stdout.write(text)
        return 0

    return _arun(args, body)


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a collector never reads half a file."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_check(args: Args) -> int:
    from jobtui import cli_check as chk

    limits = chk.CheckLimits(
        oldest_age_s=chk.Threshold(args.max_oldest_age, args.crit_oldest_age),
        dead=chk.Threshold(args.max_dead, args.crit_dead),
        ready=chk.Threshold(args.max_ready, args.crit_ready),
    )
    for name, th in (
        ("oldest-age", limits.oldest_age_s),
        ("dead", limits.dead),
        ("ready", limits.ready),
    ):
        if th.crit is not None and th.warn is not None and th.crit < th.warn:
            code, line = chk.unknown(f"--crit-{name} is below --max-{name}")
            _out(line)
            return code

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        from jobtui.metrics import snapshot

        snap = await snapshot(conn, schema, history_minutes=1)
        code, line = chk.evaluate(snap, limits)
        _out(fmt.clean(line))
        return code

    try:
        return _arun(args, body)
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        from jobtui.cli import explain, one_line

        code, line = chk.unknown(one_line(explain(exc)[0]))
        _out(line)
        return code


# --- dead letters and jobs ------------------------------------------------------------------


def _dead_filter(args: Args) -> DeadFilter:
    return DeadFilter(kind=args.kind, error=args.error, signature=args.signature, text=args.text)


def _states(args: Args) -> tuple[str, ...]:
    states: list[str] = []
    for item in args.state or []:
        for s in item.split(","):
            s = s.strip().lower()
            if not s:
                continue
            if s not in JOB_STATES:
                raise CliError(f"unknown state {s!r}: use {', '.join(JOB_STATES)}")
            states.append(s)
    return tuple(dict.fromkeys(states))


def _job_filter(args: Args) -> JobFilter:
    return JobFilter(states=_states(args), kind=args.kind, text=args.error)


def _has_filter(flt: DeadFilter | JobFilter) -> bool:
    return any(bool(v) for v in vars(flt).values())


async def _collect(
    fetch: Callable[[int | None, int], Awaitable[Any]], limit: int
) -> tuple[list[Any], bool]:
    """Up to `limit` rows through keyset pages; also whether more exist."""
    rows: list[Any] = []
    before: int | None = None
    while len(rows) < limit:
        page = await fetch(before, min(1000, limit - len(rows) + 1))
        rows.extend(page.rows)
        if page.next_before is None:
            break
        before = page.next_before
    return rows[:limit], len(rows) > limit


def cmd_dead_list(args: Args) -> int:
    from jobtui.browse import list_dead

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        flt = _dead_filter(args)
        rows, more = await _collect(
            lambda before, n: list_dead(conn, schema, flt, before=before, limit=n), args.limit
        )
        if args.json:
            _out(fmt.dumps(rows))
            return 0
        if not rows:
            _out("no dead letters" + (" match" if _has_filter(flt) else ""))
            return 0
        now = datetime.now(UTC)
        _out(
            fmt.table(
                ("ID", "KIND", "REASON", "ATTEMPTS", "DIED", "ERROR"),
                [
                    (
                        r.id,
                        r.kind,
                        r.reason,
                        f"{r.attempts}/{r.max_attempts}",
                        fmt.age(r.died_at, now) + " ago",
                        fmt.first_line(r.last_error),
                    )
                    for r in rows
                ],
            )
        )
        if more:
            _out(f"(first {len(rows)} shown; more with --limit)")
        return 0

    return _arun(args, body)


def cmd_dead_show(args: Args) -> int:
    from jobtui.browse import get_dead

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        row = await get_dead(conn, schema, args.id)
        if row is None:
            raise CliError(f"no dead letter with id {args.id}")
        _out(fmt.dumps(row) if args.json else fmt.dead_detail(row))
        return 0

    return _arun(args, body)


def _dead_action(args: Args, verb: str, by_ids: str, matching: str) -> int:
    from jobtui import ops
    from jobtui.browse import count_dead
    from jobtui.cli_progress import progress

    flt = _dead_filter(args)
    _require_target(args, _has_filter(flt), "dead letter")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        n = 0
        if args.ids:
            n += await getattr(ops, by_ids)(conn, schema, list(args.ids), actor=actor)
        if _has_filter(flt) or args.all:
            total = await count_dead(conn, schema, flt)
            with progress(f"{verb} dead letters", total) as update:
                n += await getattr(ops, matching)(
                    conn, schema, flt, actor=actor, on_progress=update
                )
        _out(f"{verb} {n} dead letter{'s' if n != 1 else ''}")
        return 0

    return _arun(args, body)


def _require_target(args: Args, has_filter: bool, what: str) -> None:
    if not args.ids and not has_filter and not args.all:
        raise CliError(f"name {what} ids, a filter (--kind, --error, …) or --all")
    if args.all and (args.ids or has_filter):
        raise CliError("--all cannot be combined with ids or filters")


def cmd_dead_requeue(args: Args) -> int:
    return _dead_action(args, "requeued", "requeue_dead", "requeue_dead_matching")


def cmd_dead_delete(args: Args) -> int:
    return _dead_action(args, "deleted", "delete_dead", "delete_dead_matching")


def cmd_jobs_list(args: Args) -> int:
    from jobtui.browse import list_jobs

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        flt = _job_filter(args)
        rows, more = await _collect(
            lambda before, n: list_jobs(conn, schema, flt, before=before, limit=n), args.limit
        )
        if args.json:
            _out(fmt.dumps(rows))
            return 0
        if not rows:
            _out("no jobs" + (" match" if _has_filter(flt) else ""))
            return 0
        now = datetime.now(UTC)
        _out(
            fmt.table(
                ("ID", "KIND", "STATE", "PRIO", "ATTEMPTS", "RUN AT", "ERROR / PAYLOAD"),
                [
                    (
                        r.id,
                        r.kind,
                        r.state,
                        r.priority,
                        f"{r.attempts}/{r.max_attempts}",
                        _when(r.run_at, now),
                        fmt.first_line(r.last_error) or fmt.compact_json(r.payload),
                    )
                    for r in rows
                ],
            )
        )
        if more:
            _out(f"(first {len(rows)} shown; more with --limit)")
        return 0

    return _arun(args, body)


def _when(t: datetime, now: datetime) -> str:
    delta = (t - now).total_seconds()
    if delta > 0:
        return "in " + fmt.format_duration(delta)
    return fmt.format_duration(-delta) + " ago"


def cmd_jobs_show(args: Args) -> int:
    from jobtui.browse import get_job

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        row = await get_job(conn, schema, args.id)
        if row is None:
            raise CliError(
                f"no job with id {args.id} (it may be a dead letter: `jobtui dead show {args.id}`)"
            )
        _out(fmt.dumps(row) if args.json else fmt.job_detail(row))
        return 0

    return _arun(args, body)


def cmd_jobs_cancel(args: Args) -> int:
    from jobtui import ops
    from jobtui.browse import count_jobs
    from jobtui.cli_progress import progress

    flt = _job_filter(args)
    _require_target(args, _has_filter(flt), "job")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        n = 0
        if args.ids:
            n += await ops.cancel_jobs(conn, schema, list(args.ids), actor=actor)
        if _has_filter(flt) or args.all:
            pending = (
                flt
                if flt.states
                else JobFilter(states=PENDING_STATES, kind=flt.kind, text=flt.text)
            )
            total = await count_jobs(conn, schema, pending)
            with progress("cancelling jobs", total) as update:
                n += await ops.cancel_jobs_matching(
                    conn, schema, pending, actor=actor, on_progress=update
                )
        _out(f"cancelled {n} job{'s' if n != 1 else ''}")
        return 0

    return _arun(args, body)


def cmd_jobs_run_now(args: Args) -> int:
    from jobtui import ops
    from jobtui.browse import list_jobs

    flt = _job_filter(args)
    _require_target(args, _has_filter(flt), "job")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        ids = list(args.ids)
        if _has_filter(flt) or args.all:
            states = flt.states or ("scheduled", "retrying")
            matching = JobFilter(states=states, kind=flt.kind, text=flt.text)
            before: int | None = None
            while True:
                page = await list_jobs(conn, schema, matching, before=before, limit=1000)
                ids.extend(r.id for r in page.rows)
                if page.next_before is None:
                    break
                before = page.next_before
        n = await ops.run_now(conn, schema, ids, actor=actor) if ids else 0
        _out(f"made {n} job{'s' if n != 1 else ''} ready now")
        return 0

    return _arun(args, body)


def cmd_prune(args: Args) -> int:
    from jobtui import ops
    from jobtui.cli_progress import progress

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        with progress("pruning finished jobs", None) as update:
            n = await ops.prune_finished(
                conn,
                schema,
                timedelta(seconds=args.older_than),
                actor=ops.Actor.current(),
                on_progress=update,
            )
        _out(
            f"pruned {n} finished job{'s' if n != 1 else ''} older than "
            f"{fmt.format_duration(args.older_than)}"
        )
        return 0

    return _arun(args, body)


def cmd_roles(args: Args) -> int:
    from jobtui.roles import roles_sql

    sys.stdout.write(roles_sql(_schema(args), args.prefix))
    return 0


COMMANDS: dict[str, Callable[[Args], int]] = {
    "console": cmd_console,
    "demo": cmd_demo,
    "worker": cmd_worker,
    "migrate": cmd_migrate,
    "enqueue": cmd_enqueue,
    "stats": cmd_stats,
    "check": cmd_check,
    "dead_list": cmd_dead_list,
    "dead_show": cmd_dead_show,
    "dead_requeue": cmd_dead_requeue,
    "dead_delete": cmd_dead_delete,
    "jobs_list": cmd_jobs_list,
    "jobs_show": cmd_jobs_show,
    "jobs_cancel": cmd_jobs_cancel,
    "jobs_run_now": cmd_jobs_run_now,
    "prune": cmd_prune,
    "roles": cmd_roles,
}

__all__ = ["COMMANDS", "describe_error", "run"]
