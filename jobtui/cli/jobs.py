"""`jobtui jobs list|show|why|cancel|run-now|rerun`: jobs in the queue, through `browse`,
`why` and `ops`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import psycopg

from jobtui import ops, why
from jobtui.browse import count_jobs, get_job, list_jobs
from jobtui.cli import output as fmt
from jobtui.cli.args import Args, Commands, Parser, job_id
from jobtui.cli.errors import CliError
from jobtui.cli.output import dumps
from jobtui.cli.selection import (
    RowCommands,
    Vet,
    act_on_rows,
    has_filter,
    missing,
    not_done,
    print_list,
    print_one,
    require_target,
)
from jobtui.cli.session import out, plural, run_with_connection
from jobtui.config import format_duration
from jobtui.inert import clean, compact_json, first_line
from jobtui.lookups import id_places
from jobtui.models import JOB_STATES, PENDING_STATES, JobFilter, JobRow


def register(commands: Commands) -> None:
    RowCommands(
        group="jobs",
        what="jobs",
        help="Jobs: list, show, why, cancel, run now, rerun.",
        order="running first, then waiting ones in claim order (priority, due time, id), then "
        "finished ones newest first (with --error, newest first)",
        examples=(
            "jobtui jobs list --state ready --kind send_email",
            "jobtui jobs show 42",
            "jobtui jobs cancel --kind generate_report --state scheduled",
            "jobtui jobs run-now 42 43",
            "jobtui jobs why 42            # why is job 42 not running?",
            "jobtui jobs rerun 42          # run a finished job again, as a new job",
        ),
        list_=cmd_list,
        show=cmd_show,
        actions=(
            ("cancel", "Cancel pending jobs; running ones are asked to stop.", cmd_cancel),
            ("run-now", "Make scheduled or retrying jobs ready now.", cmd_run_now),
        ),
        every="pending job",
        example_filter="--kind send_email --state scheduled",
    ).register(commands)
    jobs = commands.parser.subcommands.choices["jobs"] if commands.parser.subcommands else None
    assert isinstance(jobs, Parser)  # RowCommands.register just made it
    p = Commands(jobs, commands.common).add(
        "why",
        "Say in plain words why a job is not running (or what it is waiting for).",
        cmd_why,
        "jobtui jobs why 42",
        "jobtui jobs why 42 --json",
    )
    p.add_argument("id", type=job_id)
    p.add_argument("--json", action="store_true", help="JSON for scripts")
    p = Commands(jobs, commands.common).add(
        "rerun",
        "Run finished (succeeded or cancelled) jobs again, as new jobs linked to them.",
        cmd_rerun,
        "jobtui jobs rerun 42",
        "jobtui jobs rerun 42 43",
    )
    p.add_argument("ids", type=job_id, nargs="+", metavar="ID")


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
    return JobFilter(states=_states(args), kind=args.kind, text=args.error, unique_key=args.key)


def _when(t: datetime, now: datetime) -> str:
    delta = (t - now).total_seconds()
    if delta > 0:
        return "in " + format_duration(delta)
    return format_duration(-delta) + " ago"


def cmd_list(args: Args) -> int:
    flt = _filter(args)
    return print_list(
        args,
        lambda conn, schema, before, n: list_jobs(conn, schema, flt, before=before, limit=n),
        "no jobs" + (" match" if has_filter(flt) else ""),
        ("ID", "KIND", "STATE", "PRIO", "ATTEMPTS", "RUN AT", "ERROR / PAYLOAD"),
        lambda r, now: (
            r.id,
            r.kind,
            r.state,
            r.priority,
            f"{r.attempts}/{r.max_attempts}",
            _when(r.run_at, now),
            first_line(r.last_error) or compact_json(r.payload),
        ),
    )


def cmd_show(args: Args) -> int:
    return print_one(
        args,
        get_job,
        f"no job with id {args.id} (it may be a dead letter: `jobtui dead show {args.id}`)",
        fmt.job_detail,
    )


def cmd_why(args: Args) -> int:
    """Exit 0 with the answer; 1 with one line when there is no such job."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        answer = await why.explain(conn, schema, args.id)
        if answer is None:
            raise CliError(f"no job or dead letter with id {args.id} (it may have been pruned)")
        if args.json:
            out(dumps(answer.as_json()))
            return 0
        out(clean(f"job {answer.job_id} ({answer.kind}): {answer.state}"))
        for reason in answer.reasons:
            out(clean(f"- {reason.text}"))
        return 0

    return run_with_connection(args, body)


def cmd_rerun(args: Args) -> int:
    """By ids only (a filter could rerun thousands by accident), in the order given, each
    printed as it is made. An unknown id (or a dead letter's) stops the command before anything
    is done; an unfinished job, or one whose unique key an unfinished job holds, is named after
    the others are run again, with exit 1."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        wanted = list(dict.fromkeys(args.ids))
        places = await id_places(conn, schema, wanted)
        missing("job", places.missing, places.dead, "a dead letter: see `jobtui dead requeue ID`")
        refused: dict[int, str] = {}
        for original in wanted:
            try:
                outcome = await ops.rerun_job(conn, schema, original, actor=actor)
            except ops.InvalidAction as exc:
                refused[original] = str(exc).removeprefix(f"job #{original}: ")
                continue
            if outcome.new_id is not None:
                out(f"job #{original} run again as job #{outcome.new_id}")
            else:
                refused[original] = f"job #{outcome.held_by} holds its unique key"
        if refused:
            raise CliError("not run again: " + not_done(refused))
        return 0

    return run_with_connection(args, body)


def _vet(action: str, wont: Callable[[JobRow], str]) -> Vet:
    """Every id must be a job now (else the command stops); one that the action would not
    change is named with `wont(job)`, the reason."""

    async def vet(conn: psycopg.AsyncConnection, schema: str, ids: list[int]) -> dict[int, str]:
        places = await id_places(conn, schema, ids)
        missing("job", places.missing, places.dead, "a dead letter: see `jobtui dead show ID`")
        able = set(await ops.applicable_ids(conn, schema, action, ids))
        refused: dict[int, str] = {}
        for i in ids:
            if i not in able:
                job = await get_job(conn, schema, i)
                refused[i] = "changed meanwhile" if job is None else wont(job)
        return refused

    return vet


def _wont_cancel(job: JobRow) -> str:
    if job.state == "running":
        return "already asked to stop"
    return f"already {job.state}"


def _wont_run_now(job: JobRow) -> str:
    return f"not waiting for a later time: {job.state}"


def cmd_cancel(args: Args) -> int:
    flt = _filter(args)
    pending = flt if flt.states else replace(flt, states=PENDING_STATES)
    return act_on_rows(
        args,
        flt,
        noun="job",
        doing="cancelling jobs",
        done="cancelled",
        by_ids=ops.cancel_jobs,
        matching=ops.cancel_jobs_matching,
        count=count_jobs,
        vet=_vet("cancel_jobs", _wont_cancel),
        scope=pending,
    )


def cmd_run_now(args: Args) -> int:
    flt = _filter(args)
    require_target(args, flt, "job")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        named = list(dict.fromkeys(args.ids))
        refused = await _vet("run_now", _wont_run_now)(conn, schema, named) if named else {}
        ids = [i for i in named if i not in refused]
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
        if n:
            out(f"made {plural(n, 'job')} ready now")
        if refused:
            raise CliError(f"not made ready: {not_done(refused)}")
        if not n and len(ids) > len(named) - len(refused):
            raise CliError(
                f"nothing made ready: {plural(len(ids), 'job')} matched, none waits for a later "
                "time now"
            )
        if not n:
            raise CliError("nothing made ready: no scheduled or retrying job matches")
        return 0

    return run_with_connection(args, body)
