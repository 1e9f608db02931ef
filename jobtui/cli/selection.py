"""What `jobtui jobs …` and `jobtui dead …` share: filter flags, the list/show sub-commands,
the ids-or-filter-or-`--all` target of an action, and reading rows through keyset pages.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from jobtui import ops
from jobtui.cli.args import Args, Commands, Handler, filter_text, job_id, positive_int
from jobtui.cli.errors import CliError
from jobtui.cli.output import dumps, table
from jobtui.cli.progress import progress
from jobtui.cli.session import err, out, plural, run_with_connection
from jobtui.models import DeadFilter, JobFilter, Page

Fetch = Callable[[psycopg.AsyncConnection, str, int | None, int], Awaitable[Page[Any]]]


def add_filters(p: argparse.ArgumentParser, *, dead: bool) -> None:
    p.add_argument("--kind", type=filter_text, help="only this kind")
    p.add_argument(
        "--key", type=filter_text, help="exactly this unique key (jobs enqueued with unique_key=…)"
    )
    if dead:
        p.add_argument(
            "--error", type=filter_text, help="error text contains this (case-insensitive)"
        )
        p.add_argument(
            "--signature",
            type=filter_text,
            help="exactly this error signature (one failure group)",
        )
        p.add_argument("--text", type=filter_text, help="payload text contains this, or an id")
    else:
        p.add_argument(
            "--state",
            action="append",
            metavar="STATE",
            help="ready, scheduled, retrying, running, exhausted, succeeded or cancelled "
            "(repeat or comma-separate)",
        )
        p.add_argument("--error", type=filter_text, help="error or payload text contains this")


@dataclass(frozen=True)
class RowCommands:
    """The sub-commands of `jobtui jobs` or `jobtui dead`: list, show and actions on rows."""

    group: str  # "jobs" or "dead"
    what: str  # "jobs" or "dead letters"
    help: str
    examples: Sequence[str]
    list_: Handler
    show: Handler
    actions: Sequence[tuple[str, str, Handler]]  # (name, help, handler)
    every: str  # what `--all` covers, e.g. "pending job"
    example_filter: str  # filter flags for the actions' examples
    order: str = "newest first"  # the order `list` shows rows in (jobtui.browse)

    def register(self, commands: Commands) -> None:
        group, sub = self.group, commands.group(self.group, self.help, *self.examples)
        p = sub.add(
            "list",
            f"List {self.what}, {self.order}.",
            self.list_,
            f"jobtui {group} list --kind send_email --limit 20",
            f"jobtui {group} list --json",
        )
        add_filters(p, dead=group == "dead")
        p.add_argument(
            "--limit", type=positive_int, default=50, help="at most this many (default 50)"
        )
        p.add_argument("--json", action="store_true", help="JSON array for scripts")
        p = sub.add(
            "show",
            f"Show one {self.what.rstrip('s')} with its error history and tracebacks.",
            self.show,
            f"jobtui {group} show 42",
            f"jobtui {group} show 42 --json",
        )
        p.add_argument("id", type=job_id)
        p.add_argument("--json", action="store_true", help="JSON for scripts")
        for name, help_, handler in self.actions:
            p = sub.add(
                name,
                help_,
                handler,
                f"jobtui {group} {name} 17 18",
                f"jobtui {group} {name} {self.example_filter}",
                f"jobtui {group} {name} --all",
            )
            p.add_argument("ids", nargs="*", type=job_id, metavar="ID")
            add_filters(p, dead=group == "dead")
            p.add_argument(
                "--all", action="store_true", help=f"every {self.every} (when no id or filter)"
            )


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


def print_list(
    args: Args,
    fetch: Fetch,
    empty: str,
    headers: Sequence[str],
    cells: Callable[[Any, datetime], Sequence[object]],
) -> int:
    """`list`: up to `--limit` rows as a table (or JSON); `fetch(conn, schema, before, n)`."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        rows, more = await collect(lambda before, n: fetch(conn, schema, before, n), args.limit)
        if args.json:
            out(dumps(rows))
            return 0
        if not rows:
            out(empty)
            return 0
        now = datetime.now(UTC)
        out(table(headers, [cells(r, now) for r in rows]))
        if more:
            out(f"(first {len(rows)} shown; more with --limit)")
        return 0

    return run_with_connection(args, body)


def print_one(
    args: Args,
    get: Callable[[psycopg.AsyncConnection, str, int], Awaitable[Any]],
    missing: str,
    detail: Callable[[Any], str],
) -> int:
    """`show`: one row in detail (or JSON); `missing` is the error when there is none."""

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        row = await get(conn, schema, args.id)
        if row is None:
            raise CliError(missing)
        out(dumps(row) if args.json else detail(row))
        return 0

    return run_with_connection(args, body)


RowsBy = Callable[..., Awaitable[int]]
# Before an action on ids: {id: why it cannot be acted on} for ids that exist but do not
# qualify; raises CliError (nothing done) for an id that does not exist at all.
Vet = Callable[[psycopg.AsyncConnection, str, list[int]], Awaitable[dict[int, str]]]


def ids_text(ids: Sequence[int], most: int = 20) -> str:
    """`5, 6, 7` (the first `most`, then `…`)."""
    shown = ", ".join(map(str, list(ids)[:most]))
    return shown + (" …" if len(ids) > most else "")


def not_done(reasons: dict[int, str]) -> str:
    """`job 5 is succeeded; jobs 6, 7 changed meanwhile`: reasons grouped, ids in order."""
    by_reason: dict[str, list[int]] = {}
    for id_, reason in sorted(reasons.items()):
        by_reason.setdefault(reason, []).append(id_)
    return "; ".join(f"{reason} (ids {ids_text(ids)})" for reason, ids in by_reason.items())


def missing(noun: str, ids: Sequence[int], elsewhere: Sequence[int], there: str) -> None:
    """Raise the one-line error for ids that are not `noun`s: unknown ones, and ones that
    are `there` instead (e.g. a job's id given to a dead-letter command)."""
    if not ids and not elsewhere:
        return
    parts = []
    if ids:
        many = len(ids) > 1
        parts.append(f"no {noun}{'s' if many else ''} with id{'s' if many else ''} {ids_text(ids)}")
    if elsewhere:
        parts.append(f"{'ids' if len(elsewhere) > 1 else 'id'} {ids_text(elsewhere)} {there}")
    raise CliError("; ".join(parts) + " (nothing done)")


def act_on_rows(
    args: Args,
    flt: DeadFilter | JobFilter,
    *,
    noun: str,
    doing: str,
    done: str,
    by_ids: RowsBy,
    matching: RowsBy,
    count: RowsBy,
    vet: Vet,
    scope: DeadFilter | JobFilter | None = None,
    held: list[int] | None = None,
) -> int:
    """An action on the ids given and/or every row matching `scope` (default `flt`) now.

    Prints "`done` N `noun`s"; a progress bar (`doing`) shows on a terminal for large sets.
    Never says "done 0" with exit 0: an id that does not exist stops the command before
    anything is done; an id named but not acted on, or a filter that matched nothing, is one
    error line and exit 1. `held` collects ids the action skipped for a reason it knows
    (a unique key held by an unfinished job), filled by `by_ids`/`matching`.
    """
    require_target(args, flt, noun)
    target = flt if scope is None else scope
    skipped = held if held is not None else []

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        actor = ops.Actor.current()
        n = 0
        refused: dict[int, str] = {}
        meanwhile = 0
        if args.ids:
            ids = list(dict.fromkeys(args.ids))
            refused = await vet(conn, schema, ids)
            ok = [i for i in ids if i not in refused]
            acted = await by_ids(conn, schema, ok, actor=actor) if ok else 0
            n += acted
            refused.update({i: "an unfinished job holds its unique key" for i in skipped})
            meanwhile = len(ok) - len(skipped) - acted
            del skipped[:]
        matched = 0
        if has_filter(flt) or args.all:
            matched = await count(conn, schema, target)
            with progress(doing, matched) as update:
                n += await matching(conn, schema, target, actor=actor, on_progress=update)
        if n:
            out(f"{done} {plural(n, noun)}")
        problems = [not_done(refused)] if refused else []
        if meanwhile > 0:
            problems.append(f"{plural(meanwhile, noun)} changed meanwhile")
        held_note = (
            f"skipped {plural(len(set(skipped)), noun)}: an unfinished job holds its unique key "
            f"(ids {ids_text(sorted(set(skipped)))})"
        )
        if skipped and not n:
            problems.append(held_note)
        if problems:
            raise CliError(f"not {done}: " + "; ".join(problems))
        if skipped:  # a filter's skips after work was done: a note on stderr, exit 0
            err(held_note)
        elif not n:
            if matched:
                why = f"{plural(matched, noun)} matched, none could be {done} now"
            elif has_filter(flt):
                why = f"no {noun} matches"
            else:
                why = f"there is no {noun} to act on"
            raise CliError(f"nothing {done}: {why}")
        return 0

    return run_with_connection(args, body)
