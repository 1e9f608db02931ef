"""`jobtui kinds list|limit|pause|resume`: per-kind settings, through `limits`, `browse` and
`ops` (every change audited).

`kinds limit` overrides a kind's declared limits as a whole until `--clear`: a limit not given
is lifted, even one the handler declares. The command prints what then applies.
"""

from __future__ import annotations

import argparse

import psycopg

from jobtui import ops
from jobtui.browse import kinds as kinds_with_rows
from jobtui.browse import paused_kinds
from jobtui.cli.args import Args, Commands, kind_name, positive_int
from jobtui.cli.errors import CliError
from jobtui.cli.output import dumps, limits_text, table
from jobtui.cli.session import flip_named, out, run_with_connection
from jobtui.inert import clean
from jobtui.limits import list_kind_limits, parse_rate
from jobtui.lookups import kind_known
from jobtui.metrics import rate_text
from jobtui.models import KindLimitRow


def register(commands: Commands) -> None:
    sub = commands.group(
        "kinds",
        "Job kinds: limits and pauses.",
        "jobtui kinds list",
        "jobtui kinds limit send_email --concurrency 5 --rate 100/m",
        "jobtui kinds limit send_email --clear",
    )
    p = sub.add(
        "list",
        "List kinds with their limits (declared or overridden) and whether they are paused.",
        cmd_list,
        "jobtui kinds list",
        "jobtui kinds list --json",
    )
    p.add_argument("--json", action="store_true", help="JSON array for scripts")
    p = sub.add(
        "limit",
        "Override a kind's concurrency and rate limits (audited), or --clear the override.",
        cmd_limit,
        "The override replaces the declared limits as a whole: a limit you leave out is lifted.",
        "jobtui kinds limit send_email --concurrency 5",
        "jobtui kinds limit send_email --concurrency 10 --per-worker 2 --rate 100/m",
        "jobtui kinds limit send_email --clear   # the handler's declared limits apply again",
    )
    p.add_argument("kind", type=kind_name)
    p.add_argument(
        "--concurrency", type=positive_int, metavar="N", help="at most N running, all workers"
    )
    p.add_argument("--per-worker", type=positive_int, metavar="N", help="at most N per worker")
    p.add_argument("--rate", metavar="N/s|N/m", help="at most N starts per second or minute")
    p.add_argument("--clear", action="store_true", help="drop the override")
    _force(p)
    p = sub.add(
        "pause",
        "Stop workers claiming a kind (audited).",
        cmd_pause,
        "jobtui kinds pause send_email",
        "jobtui kinds pause new_kind --force   # a kind no worker handles yet",
    )
    p.add_argument("kind", type=kind_name)
    _force(p)
    p = sub.add(
        "resume",
        "Let workers claim a kind again (audited).",
        cmd_resume,
        "jobtui kinds resume send_email",
    )
    p.add_argument("kind", type=kind_name)


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="accept a kind that nothing knows yet (no worker handles it, no job uses it)",
    )


async def _known(conn: psycopg.AsyncConnection, schema: str, args: Args) -> None:
    """An unknown kind is most often a typo: refuse it unless --force says it comes later."""
    if getattr(args, "force", False) or await kind_known(conn, schema, args.kind):
        return
    raise CliError(
        clean(
            f"no kind named {args.kind!r}: no worker handles it and no job, dead letter, "
            "schedule or limit names it (see `jobtui kinds list`; --force for a kind that "
            "comes later)"
        )
    )


def _phantom(row: KindLimitRow) -> bool:
    """A limits row left by an override that was cleared, for a kind no handler declares."""
    return not row.overridden and row.declared_at is None


def _source(row: KindLimitRow | None) -> str:
    if row is None:
        return "–"
    if row.overridden:
        return f"override by {row.overridden_by}"
    return "declared on the handler" if row.limited else "–"


def _limits(row: KindLimitRow | None) -> str:
    if row is None or not row.limited:
        return "no limits"
    return limits_text(row.concurrency, row.per_worker, rate_text(row.rate, row.period_s))


def cmd_list(args: Args) -> int:
    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        limits = {r.kind: r for r in await list_kind_limits(conn, schema) if not _phantom(r)}
        paused = await paused_kinds(conn, schema)
        names = sorted(set(await kinds_with_rows(conn, schema)) | set(limits) | set(paused))
        if args.json:
            out(
                dumps(
                    [
                        {"kind": k, "limits": limits.get(k), "paused_by": paused.get(k)}
                        for k in names
                    ]
                )
            )
            return 0
        if not names:
            out("no kinds yet")
            return 0
        rows = [
            (
                k,
                _limits(limits.get(k)),
                _source(limits.get(k)),
                f"paused by {paused[k]}" if k in paused else "no",
            )
            for k in names
        ]
        out(table(("KIND", "LIMITS", "SOURCE", "PAUSED"), rows, flex=0))
        return 0

    return run_with_connection(args, body)


def cmd_limit(args: Args) -> int:
    given = [v is not None for v in (args.concurrency, args.per_worker, args.rate)]
    if args.clear and any(given):
        raise CliError("--clear cannot be combined with --concurrency, --per-worker or --rate")
    if not args.clear and not any(given):
        raise CliError("give --concurrency, --per-worker and/or --rate, or --clear")
    rate, period = parse_rate(args.rate) if args.rate is not None else (None, 1)
    actor = ops.Actor.current()

    async def body(conn: psycopg.AsyncConnection, schema: str) -> int:
        if not args.clear:
            await _known(conn, schema, args)
        if args.clear:
            n = await ops.clear_kind_limits(conn, schema, args.kind, actor=actor)
            if not n:
                raise CliError(clean(f"nothing cleared: {args.kind} has no override"))
        elif not await ops.set_kind_limits(
            conn,
            schema,
            args.kind,
            concurrency=args.concurrency,
            per_worker=args.per_worker,
            rate=rate,
            rate_period_s=period,
            actor=actor,
        ):
            now = await _described(conn, schema, args.kind)
            raise CliError(clean(f"nothing changed: {now}"))
        out(clean(await _described(conn, schema, args.kind)))
        return 0

    return run_with_connection(args, body)


async def _described(conn: psycopg.AsyncConnection, schema: str, kind: str) -> str:
    """`kind: its limits (where they come from)`, as `kinds limit` prints it."""
    row = {r.kind: r for r in await list_kind_limits(conn, schema)}.get(kind)
    if row is not None and _phantom(row):
        row = None
    return f"{kind}: {_limits(row)} ({_source(row)})"


def cmd_pause(args: Args) -> int:
    return flip_named(
        args, args.kind, ops.pause_kind, "paused {}", "{} was already paused", check=_known
    )


def cmd_resume(args: Args) -> int:
    return flip_named(args, args.kind, ops.resume_kind, "resumed {}", "{} was not paused")
