"""`jobtui schedules list|pause|resume|run-now`: periodic jobs, through `schedules` and `ops`.

Each change is one audited operator action (jobtui.ops); an unknown name is one line on stderr.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from jobtui import ops
from jobtui.cli.args import Args, Commands
from jobtui.cli.output import age, dumps, table
from jobtui.cli.session import flip_named, out, run_with_connection
from jobtui.inert import clean
from jobtui.models import ScheduleRow
from jobtui.schedules import list_schedules


def register(commands: Commands) -> None:
    sub = commands.group(
        "schedules",
        "Periodic jobs: list, pause, resume, run now.",
        "jobtui schedules list",
        "jobtui schedules pause nightly_report",
        "jobtui schedules run-now nightly_report",
    )
    p = sub.add(
        "list",
        "List schedules: cron, time zone, kind, next run, last run and its outcome, paused.",
        cmd_list,
        "jobtui schedules list",
        "jobtui schedules list --json",
    )
    p.add_argument("--json", action="store_true", help="JSON array for scripts")
    for name, help_, handler in (
        ("pause", "Stop enqueueing ticks of a schedule (audited).", cmd_pause),
        ("resume", "Enqueue ticks again from now on; missed ones are not run.", cmd_resume),
        ("run-now", "Enqueue one job of a schedule now, paused or not (audited).", cmd_run_now),
    ):
        p = sub.add(name, help_, handler, f"jobtui schedules {name} nightly_report")
        p.add_argument("name", help="the schedule's name (see `jobtui schedules list`)")


def _when(t: datetime | None, now: datetime) -> str:
    if t is None:
        return "–"
    delta = (t - now).total_seconds()
    return f"in {age(now, t)}" if delta > 0 else f"{age(t, now)} ago"


def _row(s: ScheduleRow, now: datetime) -> tuple[object, ...]:
    last = s.last_enqueued_at or s.last_tick
    outcome = s.last_state or ("–" if s.last_job_id is None else "pruned")
    return (
        s.name,
        s.cron,
        s.timezone,
        s.kind,
        "–" if s.paused_at else _when(s.next_tick, now),
        _when(last, now),
        outcome if s.last_job_id is None else f"{outcome} (job {s.last_job_id})",
        f"paused by {s.paused_by}" if s.paused_at else "no",
    )


def cmd_list(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        rows = await list_schedules(conn, schema)
        if args.json:
            out(dumps(rows))
            return 0
        if not rows:
            out("no schedules (declare them with @registry.periodic or registry.schedule)")
            return 0
        now = datetime.now(UTC)
        headers = ("NAME", "CRON", "TZ", "KIND", "NEXT RUN", "LAST RUN", "OUTCOME", "PAUSED")
        out(table(headers, [_row(s, now) for s in rows], flex=0))
        return 0

    return run_with_connection(args, body)


def cmd_pause(args: Args) -> int:
    return flip_named(
        args, args.name, ops.pause_schedule, "paused schedule {}", "schedule {} was already paused"
    )


def cmd_resume(args: Args) -> int:
    return flip_named(
        args, args.name, ops.resume_schedule, "resumed schedule {}", "schedule {} was not paused"
    )


def cmd_run_now(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        job_id = await ops.run_schedule_now(conn, schema, args.name, actor=ops.Actor.current())
        out(clean(f"enqueued job {job_id} for schedule {args.name}"))
        return 0

    return run_with_connection(args, body)
