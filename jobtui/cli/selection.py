"""What `jobtui jobs …` and `jobtui dead …` share: filter flags, the list/show sub-commands,
the ids-or-filter-or-`--all` target of an action, and reading rows through keyset pages.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

from jobtui.cli.args import Args, Commands, Handler, job_id, positive_int
from jobtui.cli.errors import CliError
from jobtui.models import DeadFilter, JobFilter


def add_filters(p: argparse.ArgumentParser, *, dead: bool) -> None:
    p.add_argument("--kind", help="only this kind")
    if dead:
        p.add_argument("--error", help="error text contains this (case-insensitive)")
        p.add_argument("--signature", help="exactly this error signature (one failure group)")
        p.add_argument("--text", help="payload text contains this, or an id")
    else:
        p.add_argument(
            "--state",
            action="append",
            metavar="STATE",
            help="ready, scheduled, retrying, running, succeeded or cancelled "
            "(repeat or comma-separate)",
        )
        p.add_argument("--error", help="error or payload text contains this")


def add_list_and_show(
    commands: Commands, group: str, what: str, list_: Handler, show: Handler
) -> None:
    """`jobtui GROUP list` and `jobtui GROUP show ID`; `what` is "jobs" or "dead letters"."""
    p = commands.add(
        "list",
        f"List {what}, newest first.",
        list_,
        f"jobtui {group} list --kind send_email --limit 20",
        f"jobtui {group} list --json",
    )
    add_filters(p, dead=group == "dead")
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many (default 50)")
    p.add_argument("--json", action="store_true", help="JSON array for scripts")
    p = commands.add(
        "show",
        f"Show one {what.rstrip('s')} with its error history and tracebacks.",
        show,
        f"jobtui {group} show 42",
        f"jobtui {group} show 42 --json",
    )
    p.add_argument("id", type=job_id)
    p.add_argument("--json", action="store_true")


def add_action(
    commands: Commands,
    group: str,
    name: str,
    help_: str,
    handler: Handler,
    *,
    every: str,
    example_filter: str,
) -> None:
    """An action on ids and/or on every row matching filters now (`--all`: every `every`)."""
    p = commands.add(
        name,
        help_,
        handler,
        f"jobtui {group} {name} 17 18",
        f"jobtui {group} {name} {example_filter}",
        f"jobtui {group} {name} --all",
    )
    p.add_argument("ids", nargs="*", type=job_id, metavar="ID")
    add_filters(p, dead=group == "dead")
    p.add_argument("--all", action="store_true", help=f"every {every} (when no id or filter)")


def has_filter(flt: DeadFilter | JobFilter) -> bool:
    return any(bool(v) for v in vars(flt).values())


def require_target(args: Args, flt: DeadFilter | JobFilter, what: str) -> None:
    filtered = has_filter(flt)
    if not args.ids and not filtered and not args.all:
        raise CliError(f"name {what} ids, a filter (--kind, --error, …) or --all")
    if args.all and (args.ids or filtered):
        raise CliError("--all cannot be combined with ids or filters")


async def collect(
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
