"""`jobtui jobs list|show|cancel|run-now`: jobs in the queue, through `browse` and `ops`."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from jobtui import ops
from jobtui.browse import count_jobs, get_job, list_jobs
from jobtui.cli import output as fmt
from jobtui.cli.args import Args, Commands
from jobtui.cli.errors import CliError
from jobtui.cli.progress import progress
from jobtui.cli.selection import (
    add_action,
    add_list_and_show,
    collect,
    has_filter,
    require_target,
)
from jobtui.cli.session import out, plural, run_with_connection
from jobtui.config import format_duration
from jobtui.inert import compact_json, first_line
from jobtui.models import JOB_STATES, PENDING_STATES, JobFilter


def register(commands: Commands) -> None:
    jobs = commands.group(
        "jobs",
        "Jobs: list, show, cancel, run now.",
        "jobtui jobs list --state ready --kind send_email",
        "jobtui jobs show 42",
        "jobtui jobs cancel --kind generate_report --state scheduled",
        "jobtui jobs run-now 42 43",
    )
    add_list_and_show(jobs, "jobs", "jobs", cmd_list, cmd_show)
    for name, help_, handler in (
        ("cancel", "Cancel pending jobs; running ones are asked to stop.", cmd_cancel),
        ("run-now", "Make scheduled or retrying jobs ready now.", cmd_run_now),
    ):
        add_action(
            jobs,
            "jobs",
            name,
            help_,
            handler,
            every="pending job",
            example_filter="--kind send_email --state scheduled",
        )


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


def _filter(args: Args) -> JobFilter:
    return JobFilter(states=_states(args), kind=args.kind, text=args.error)


def _when(t: datetime, now: datetime) -> str:
    delta = (t - now).total_seconds()
    if delta > 0:
        return "in " + format_duration(delta)
    return format_duration(-delta) + " ago"


def cmd_list(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        flt = _filter(args)
        rows, more = await collect(
            lambda before, n: list_jobs(conn, schema, flt, before=before, limit=n), args.limit
        )
        if args.json:
            out(fmt.dumps(rows))
            return 0
        if not rows:
            out("no jobs" + (" match" if has_filter(flt) else ""))
            return 0
        now = datetime.now(UTC)
        out(
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
                        first_line(r.last_error) or compact_json(r.payload),
                    )
                    for r in rows
                ],
            )
        )
        if more:
            out(f"(first {len(rows)} shown; more with --limit)")
        return 0

    return run_with_connection(args, body)


def cmd_show(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        row = await get_job(conn, schema, args.id)
        if row is None:
            raise CliError(
                f"no job with id {args.id} (it may be a dead letter: `jobtui dead show {args.id}`)"
            )
        out(fmt.dumps(row) if args.json else fmt.job_detail(row))
        return 0

    return run_with_connection(args, body)


def cmd_cancel(args: Args) -> int:
    flt = _filter(args)
    require_target(args, flt, "job")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        n = 0
        if args.ids:
            n += await ops.cancel_jobs(conn, schema, list(args.ids), actor=actor)
        if has_filter(flt) or args.all:
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
        out(f"cancelled {plural(n, 'job')}")
        return 0

    return run_with_connection(args, body)


def cmd_run_now(args: Args) -> int:
    flt = _filter(args)
    require_target(args, flt, "job")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        ids = list(args.ids)
        if has_filter(flt) or args.all:
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
        out(f"made {plural(n, 'job')} ready now")
        return 0

    return run_with_connection(args, body)
