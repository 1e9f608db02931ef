"""`jobtui dead list|show|requeue|delete`: dead letters, through `browse` and `ops`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import psycopg

from jobtui import ops
from jobtui.browse import count_dead, get_dead, list_dead
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
from jobtui.inert import first_line
from jobtui.models import DeadFilter


def register(commands: Commands) -> None:
    dead = commands.group(
        "dead",
        "Dead letters: list, show, requeue, delete.",
        "jobtui dead list --kind export_crm",
        "jobtui dead show 123",
        "jobtui dead requeue 123 124",
        "jobtui dead requeue --kind export_crm --error timeout",
        "jobtui dead delete --all",
    )
    add_list_and_show(dead, "dead", "dead letters", cmd_list, cmd_show)
    for name, help_, handler in (
        ("requeue", "Put dead letters back in the queue (same ids).", cmd_requeue),
        ("delete", "Delete dead letters for good.", cmd_delete),
    ):
        add_action(
            dead,
            "dead",
            name,
            help_,
            handler,
            every="dead letter",
            example_filter="--kind export_crm --error 'HTTP 503'",
        )


def _filter(args: Args) -> DeadFilter:
    return DeadFilter(kind=args.kind, error=args.error, signature=args.signature, text=args.text)


def cmd_list(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        flt = _filter(args)
        rows, more = await collect(
            lambda before, n: list_dead(conn, schema, flt, before=before, limit=n), args.limit
        )
        if args.json:
            out(fmt.dumps(rows))
            return 0
        if not rows:
            out("no dead letters" + (" match" if has_filter(flt) else ""))
            return 0
        now = datetime.now(UTC)
        out(
            fmt.table(
                ("ID", "KIND", "REASON", "ATTEMPTS", "DIED", "ERROR"),
                [
                    (
                        r.id,
                        r.kind,
                        r.reason,
                        f"{r.attempts}/{r.max_attempts}",
                        fmt.age(r.died_at, now) + " ago",
                        first_line(r.last_error),
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
        row = await get_dead(conn, schema, args.id)
        if row is None:
            raise CliError(f"no dead letter with id {args.id}")
        out(fmt.dumps(row) if args.json else fmt.dead_detail(row))
        return 0

    return run_with_connection(args, body)


ByIds = Callable[..., Awaitable[int]]


def _act(args: Args, verb: str, by_ids: ByIds, matching: ByIds) -> int:
    flt = _filter(args)
    require_target(args, flt, "dead letter")

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        n = 0
        if args.ids:
            n += await by_ids(conn, schema, list(args.ids), actor=actor)
        if has_filter(flt) or args.all:
            total = await count_dead(conn, schema, flt)
            with progress(f"{verb} dead letters", total) as update:
                n += await matching(conn, schema, flt, actor=actor, on_progress=update)
        out(f"{verb} {plural(n, 'dead letter')}")
        return 0

    return run_with_connection(args, body)


def cmd_requeue(args: Args) -> int:
    return _act(args, "requeued", ops.requeue_dead, ops.requeue_dead_matching)


def cmd_delete(args: Args) -> int:
    return _act(args, "deleted", ops.delete_dead, ops.delete_dead_matching)
