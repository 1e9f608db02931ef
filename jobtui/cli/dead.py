"""`jobtui dead list|show|requeue|delete`: dead letters, through `browse` and `ops`."""

from __future__ import annotations

import psycopg

from jobtui import ops
from jobtui.browse import count_dead, get_dead, list_dead
from jobtui.cli import output as fmt
from jobtui.cli.args import Args, Commands
from jobtui.cli.selection import (
    RowCommands,
    RowsBy,
    act_on_rows,
    has_filter,
    missing,
    print_list,
    print_one,
)
from jobtui.inert import first_line
from jobtui.lookups import id_places
from jobtui.models import DeadFilter


def register(commands: Commands) -> None:
    RowCommands(
        group="dead",
        what="dead letters",
        help="Dead letters: list, show, requeue, delete.",
        examples=(
            "jobtui dead list --kind export_crm",
            "jobtui dead show 123",
            "jobtui dead requeue 123 124",
            "jobtui dead requeue --kind export_crm --error timeout",
            "jobtui dead delete --all",
        ),
        list_=cmd_list,
        show=cmd_show,
        actions=(
            ("requeue", "Put dead letters back in the queue (same ids).", cmd_requeue),
            ("delete", "Delete dead letters for good.", cmd_delete),
        ),
        every="dead letter",
        example_filter="--kind export_crm --error 'HTTP 503'",
    ).register(commands)


def _filter(args: Args) -> DeadFilter:
    return DeadFilter(
        kind=args.kind,
        error=args.error,
        signature=args.signature,
        text=args.text,
        unique_key=args.key,
    )


def cmd_list(args: Args) -> int:
    flt = _filter(args)
    return print_list(
        args,
        lambda conn, schema, before, n: list_dead(conn, schema, flt, before=before, limit=n),
        "no dead letters" + (" match" if has_filter(flt) else ""),
        ("ID", "KIND", "REASON", "ATTEMPTS", "DIED", "ERROR"),
        lambda r, now: (
            r.id,
            r.kind,
            r.reason,
            f"{r.attempts}/{r.max_attempts}",
            fmt.age(r.died_at, now) + " ago",
            first_line(r.last_error),
        ),
    )


def cmd_show(args: Args) -> int:
    return print_one(args, get_dead, f"no dead letter with id {args.id}", fmt.dead_detail)


def cmd_requeue(args: Args) -> int:
    """Requeue keeping unique keys; a dead letter whose key an unfinished job holds stays and
    is reported (on stderr) with its id: an error when it was named by id or nothing moved."""
    skipped: list[int] = []

    async def by_ids(
        conn: psycopg.AsyncConnection, schema: str, ids: list[int], *, actor: ops.Actor
    ) -> int:
        outcome = await ops.requeue_dead_keyed(conn, schema, ids, actor=actor)
        skipped.extend(outcome.skipped)
        return len(outcome.requeued)

    async def matching(
        conn: psycopg.AsyncConnection,
        schema: str,
        flt: DeadFilter,
        *,
        actor: ops.Actor,
        on_progress: ops.Progress | None = None,
    ) -> int:
        outcome = await ops.requeue_dead_matching_keyed(
            conn, schema, flt, actor=actor, on_progress=on_progress
        )
        skipped.extend(outcome.skipped)
        return len(outcome.requeued)

    return _act(args, "requeued", by_ids, matching, held=skipped)


def cmd_delete(args: Args) -> int:
    return _act(args, "deleted", ops.delete_dead, ops.delete_dead_matching)


async def _vet(conn: psycopg.AsyncConnection, schema: str, ids: list[int]) -> dict[int, str]:
    """Every id must be a dead letter now: an unknown id, or a job's, stops the command."""
    places = await id_places(conn, schema, ids)
    missing("dead letter", places.missing, places.jobs, "in the queue: see `jobtui jobs show ID`")
    return {}


def _act(
    args: Args, verb: str, by_ids: RowsBy, matching: RowsBy, held: list[int] | None = None
) -> int:
    return act_on_rows(
        args,
        _filter(args),
        noun="dead letter",
        doing=f"{verb} dead letters",
        done=verb,
        by_ids=by_ids,
        matching=matching,
        count=count_dead,
        vet=_vet,
        held=held,
    )
