"""Keyset-paged reads for the console and the CLI: jobs, dead letters, groups, counts.

Pages continue with `before=page.next_before` until it is None, so no call ever loads a whole
table (a text search examines a bounded scope per page). Dead letters and a text search of jobs
go newest first (`id DESC`). Jobs otherwise go as an operator reads a queue: running rows
first, then waiting rows in claim order (priority DESC, run_at, id: what runs next comes
first), then finished rows newest first; their `next_before` is a JobCursor, an id that also
knows its place in that order. Filters travel as parameters; the statements run unprepared so
that each is planned with its own values and picks the index that fits (see `sql/browse.sql`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from jobtui.models import (
    JOB_STATES,
    PENDING_STATES,
    CappedCount,
    DeadFilter,
    DeadGroup,
    DeadLetterRow,
    ErrorEntry,
    JobFilter,
    JobRow,
    Page,
)
from jobtui.sql import Queries, queries

RowT = TypeVar("RowT", JobRow, DeadLetterRow)

MAX_LIMIT = 10_000
# A text search (payload or error substring) cannot use an index: each page examines at most
# this many of the rows that pass the other filters, newest first, and the next page carries on
# below them. A page of a search may therefore hold fewer than `limit` rows and still have a
# `next_before`; only `next_before is None` means the end.
SEARCH_SCOPE = 20_000
# A count shown on every refresh stops here ("10k+") unless the operator asks for it exactly.
COUNT_CAP = 10_000
_BIGINT_MAX = 2**63 - 1


class InvalidFilter(ValueError):
    """A filter or paging argument that cannot be applied as given."""


# Where a row stands in a page of jobs (browse_jobs_page): running, waiting, finished.
RANK_RUNNING, RANK_WAITING, RANK_FINISHED = 0, 1, 2


class JobCursor(int):
    """Where a page of jobs ended: the last row's id, as an int (what callers keep and pass
    back as `before`), that also knows the row's place in the page order: its phase `rank`
    and, for a waiting row, its `priority` and `run_at` (as PostgreSQL spells it: exact, and
    infinite dates too); and `listed_at`, when the listing's first page was read (see
    browse_jobs_page). A bare int as `before` is placed by reading that row (job_position).
    """

    rank: int
    priority: int | None
    run_at: str | None
    listed_at: str | None

    def __new__(
        cls,
        job_id: int,
        rank: int,
        priority: int | None = None,
        run_at: str | None = None,
        listed_at: str | None = None,
    ) -> JobCursor:
        cursor = super().__new__(cls, job_id)
        cursor.rank, cursor.priority, cursor.run_at = rank, priority, run_at
        cursor.listed_at = listed_at
        return cursor

    def params(self) -> dict[str, Any]:
        waiting = self.rank == RANK_WAITING
        return {
            "c_rank": self.rank,
            "c_id": int(self),
            "c_priority": self.priority if waiting else None,
            "c_run_at": self.run_at if waiting else None,
            "c_listed_at": self.listed_at,
        }


NO_CURSOR = {
    "c_rank": None,
    "c_id": None,
    "c_priority": None,
    "c_run_at": None,
    "c_listed_at": None,
}


PHASES = ("waiting", "running", "finished")
_UNION = re.compile(r"__union:([a-z0-9_]+)__")


@cache
def statement(schema: str, name: str, phased: bool = False) -> str:
    """Statement `name` for `schema` with the shared fragments (filters, columns) spliced in.

    A `__union:NAME__` becomes fragment NAME once per phase of a job's life, joined by UNION
    ALL, when `phased` (see `phased_read` and `job_phase_waiting` in common.sql), else NAME
    once over the whole table.
    """
    q = queries(schema)

    def union(match: re.Match[str]) -> str:
        rows = _spliced(q, q[match.group(1)])
        if not phased:
            return rows.replace("__job_phase__", q.job_rows)
        return " UNION ALL ".join(
            "(" + rows.replace("__job_phase__", q[f"job_phase_{p}"]) + ")" for p in PHASES
        )

    text = _UNION.sub(union, _spliced(q, q[name])).replace("__job_rows__", q.job_rows)
    for p in PHASES:
        text = text.replace(f"__job_phase_{p}__", q[f"job_phase_{p}"])
    return text


def _spliced(q: Queries, text: str) -> str:
    return (
        text.replace("__cancel_picked__", q.ops_cancel_picked)  # fragments holding fragments first
        .replace("__dead_pick_batch__", q.ops_dead_pick_batch)
        .replace("__job_columns__", q.browse_job_columns)
        .replace("__dead_columns__", q.browse_dead_columns)
        .replace("__job_where__", q.browse_job_where)
        .replace("__job_text__", q.browse_job_text)
        .replace("__filter_order_desc__", q.browse_filter_order.replace("__dir__", "DESC"))
        .replace("__filter_order_asc__", q.browse_filter_order.replace("__dir__", "ASC"))
        .replace("__claim_order__", q.browse_claim_order)
        .replace("__dead_where__", q.browse_dead_where)
        .replace("__dead_text__", q.browse_dead_text)
    )


def phased_read(params: dict[str, Any]) -> bool:
    """Whether a jobs count or text search with these filter parameters goes through each
    phase's indexes (a page of jobs always does: browse_jobs_page).

    Since migration 0020 the indexes by kind and of running rows hold one phase each (the
    unique keys' two indexes: unfinished and finished rows; since 0025 waiting rows have none
    in id order, only the claim's and run_at's), so a kind, a unique key or a state set is read
    phase by phase and merged: each state's test folds away in the phases it cannot match.
    Finished rows in id order come from the primary key, from the newest finished id down
    (job_phase_finished), so a set with succeeded jobs is phased too: read whole, its test of a
    `CASE` over the columns was estimated at a few thousand rows of 2M and planned as a sort of
    the whole table. No filter at all is not phased: every row matches, and the primary key
    serves them newest first.
    """
    if params["kind"] is not None or params["unique_key"] is not None:
        return True  # each phase has an index by kind, and one by unique key
    return bool(params["by_state"])


def phased_count(params: dict[str, Any]) -> bool:
    """Whether a count of rows (a filter the state counts cannot sum: text, a unique key, some
    state sets) goes phase by phase. As `phased_read`, except that a set with succeeded jobs
    and no kind or key is counted over the whole table: a count reads every finished row, and
    a parallel scan of the table did that in half the time of the finished phase's walk of the
    primary key (2M finished rows: 0.9 s against 1.8 s, for `#` on a text search)."""
    if params["kind"] is None and params["unique_key"] is None and params["s_succeeded"]:
        return False
    return phased_read(params)


def like_pattern(text: str) -> str:
    """`%text%` for ILIKE with the user's `%`, `_` and `\\` matched literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _clean(value: str | None, what: str) -> str:
    """The stripped text of a filter field; refuses what PostgreSQL text cannot hold."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidFilter(f"{what} must be text, not {value!r}")
    if "\x00" in value:
        raise InvalidFilter(f"{what} cannot contain a NUL character")
    return value.strip()


def _text_params(text: str | None) -> dict[str, Any]:
    text = _clean(text, "search text")
    if not text:
        return {"pattern": None, "text_id": None}
    text_id = int(text) if text.isascii() and text.isdigit() and int(text) <= _BIGINT_MAX else None
    return {"pattern": like_pattern(text), "text_id": text_id}


def _kind(kind: str | None) -> str | None:
    return _clean(kind, "kind") or None


def _unique_key(key: str | None) -> str | None:
    """The exact unique key sought (`key:`); surrounding blanks are not part of it."""
    return _clean(key, "unique key") or None


def job_filter_params(flt: JobFilter) -> dict[str, Any]:
    """Parameters for `browse_job_where` from a JobFilter (unknown states are refused)."""
    states = (flt.states,) if isinstance(flt.states, str) else tuple(flt.states or ())
    unknown = [s for s in states if s not in JOB_STATES]
    if unknown:
        raise InvalidFilter(
            f"unknown job state(s) {', '.join(map(str, unknown))}: use {', '.join(JOB_STATES)}"
        )
    chosen = set(states)
    params: dict[str, Any] = {
        "kind": _kind(flt.kind),
        "unique_key": _unique_key(flt.unique_key),
        "by_state": bool(chosen),
        # Stated separately so the planner can use the partial indexes on unfinished rows.
        "pending_only": bool(chosen) and chosen <= set(PENDING_STATES),
        "cancelled_only": chosen == {"cancelled"},
    }
    for s in JOB_STATES:
        params[f"s_{s}"] = s in chosen
    params.update(_text_params(flt.text))
    return params


def dead_filter_params(flt: DeadFilter) -> dict[str, Any]:
    """Parameters for `browse_dead_where` from a DeadFilter."""
    error = _clean(flt.error, "error text")
    signature = flt.signature if _clean(flt.signature, "error signature") else None
    return {
        "kind": _kind(flt.kind),
        "unique_key": _unique_key(flt.unique_key),
        "signature": signature,
        "error": like_pattern(error) if error else None,
        **_text_params(flt.text),
    }


def _limit(limit: int, most: int = MAX_LIMIT) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidFilter(f"limit must be an integer from 1 to {most}, not {limit!r}")
    return limit


def _before(before: int | None) -> int | None:
    if before is None:
        return None
    if isinstance(before, bool) or not isinstance(before, int):
        raise InvalidFilter(f"before must be a job id, not {before!r}")
    return before


def _errors(value: Any) -> list[ErrorEntry]:
    if not isinstance(value, list):
        return []
    return [ErrorEntry.from_json(item) for item in value if isinstance(item, dict)]


def decode_payload(text: str | None) -> Any:
    """The payload from its JSON text; a placeholder string for one Python cannot decode."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        return f"<payload nested too deeply to decode ({len(text):,} characters)>"
    except ValueError as exc:
        return f"<payload cannot be decoded: {exc}>"


def job_row(r: dict[str, Any]) -> JobRow:
    """A JobRow from a `browse_jobs_page`-shaped row."""
    return _record(JobRow, r)


def dead_row(r: dict[str, Any]) -> DeadLetterRow:
    """A DeadLetterRow from a `browse_dead_page`-shaped row."""
    return _record(DeadLetterRow, r)


def _record(cls: type[RowT], r: dict[str, Any]) -> RowT:
    """`cls` from the row's columns of the same names, payload and errors decoded."""
    values = {f.name: r[f.name] for f in dataclasses.fields(cls)}
    values["payload"] = decode_payload(r["payload"])
    values["errors"] = _errors(r["errors"])
    return cls(**values)


async def fetch_dicts(
    conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any], *, serial: bool = False
) -> list[dict[str, Any]]:
    """Run `sql` unprepared (planned with these values) and return the rows as dicts.

    In a transaction of its own with JIT off (`browse_read_settings`): on a large table whose
    visibility map is stale the planner's estimates cross the JIT thresholds and compiling costs
    more than the query (Dead letters' groups 63 -> 42 ms at 100,000 rows, benchmarks/scale.py).
    With `serial` (a read split by phase: a few index entries per phase) no parallel workers
    either; a read of the whole table (a text count) keeps them. Per transaction, so it holds
    behind a transaction pooler and never leaks to another client.
    """
    async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(queries().browse_read_settings, {"serial": serial})
        await cur.execute(sql, params, prepare=False)
        return await cur.fetchall()


async def _scalar(
    conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any], *, serial: bool = False
) -> Any:
    rows = await fetch_dicts(conn, sql, params, serial=serial)
    return None if not rows else next(iter(rows[0].values()))


def _page(rows: list[Any], limit: int) -> Page[Any]:
    return Page(rows=rows, next_before=rows[-1].id if len(rows) == limit else None)


async def _search(
    conn: psycopg.AsyncConnection,
    sql: str,
    params: dict[str, Any],
    limit: int,
    *,
    serial: bool = False,
) -> tuple[list[dict[str, Any]], int | None]:
    """Rows of a bounded-scope search and where the next page should continue (or None)."""
    rows = await fetch_dicts(conn, sql, {**params, "scan": SEARCH_SCOPE}, serial=serial)
    found = [r for r in rows if r["id"] is not None]
    if len(found) == limit:
        return found, found[-1]["id"]
    scope_lo, scope_n = (rows[0]["scope_lo"], rows[0]["scope_n"]) if rows else (None, 0)
    return found, scope_lo if scope_n == SEARCH_SCOPE else None


async def list_jobs(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: JobFilter,
    *,
    before: int | None = None,
    limit: int = 100,
) -> Page[JobRow]:
    """One page of jobs matching `flt`: running first (newest first), then waiting in claim
    order (priority DESC, run_at, id), then finished (newest first); after `before`, the
    `next_before` (a JobCursor) of the page before.

    With `flt.text` the page goes newest first with ids below `before`, and may be short yet
    continue (see SEARCH_SCOPE).
    """
    params = {**job_filter_params(flt), "before": _before(before), "limit": _limit(limit)}
    if params["pattern"] is not None:
        phased = phased_read(params)
        sql = statement(schema, "browse_jobs_search_page", phased)
        found, after = await _search(conn, sql, params, params["limit"], serial=phased)
        return Page(rows=[job_row(r) for r in found], next_before=after)
    cursor = await job_position(conn, schema, params["before"])
    params.update(cursor.params() if cursor is not None else NO_CURSOR)
    rows = await fetch_dicts(conn, statement(schema, "browse_jobs_page"), params, serial=True)
    if len(rows) < params["limit"]:
        return Page(rows=[job_row(r) for r in rows], next_before=None)
    last = rows[-1]
    nxt = JobCursor(
        last["id"],
        last["jobtui_rank"],
        last["priority"],
        last["jobtui_cursor_run_at"],
        last["jobtui_listed_at"],
    )
    return Page(rows=[job_row(r) for r in rows], next_before=nxt)


async def job_position(
    conn: psycopg.AsyncConnection, schema: str, before: int | None
) -> JobCursor | None:
    """`before` as a JobCursor: itself, or a bare id placed where that job stands now (one
    gone, say pruned, is placed among the finished rows)."""
    if before is None or isinstance(before, JobCursor):
        return before
    rows = await fetch_dicts(conn, statement(schema, "browse_job_position"), {"id": before})
    if not rows:
        return JobCursor(before, RANK_FINISHED)
    return JobCursor(before, rows[0]["rank"], rows[0]["priority"], rows[0]["run_at"])


async def get_job(conn: psycopg.AsyncConnection, schema: str, job_id: int) -> JobRow | None:
    """The job with this id, or None (it may be a dead letter, or pruned)."""
    return await _get(conn, statement(schema, "browse_job_by_id"), job_id, job_row)


async def list_dead(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: DeadFilter,
    *,
    before: int | None = None,
    limit: int = 100,
) -> Page[DeadLetterRow]:
    """One page of dead letters matching `flt`, newest first, with ids below `before`.

    With `flt.text` the page may be short yet continue (see SEARCH_SCOPE).
    """
    params = {**dead_filter_params(flt), "before": _before(before), "limit": _limit(limit)}
    page, search = (statement(schema, n) for n in ("browse_dead_page", "browse_dead_search_page"))
    return await _list(conn, page, search, params, dead_row)


async def get_dead(
    conn: psycopg.AsyncConnection, schema: str, dead_id: int
) -> DeadLetterRow | None:
    """The dead letter with this id, or None."""
    return await _get(conn, statement(schema, "browse_dead_by_id"), dead_id, dead_row)


async def _list(
    conn: psycopg.AsyncConnection,
    page_sql: str,
    search_sql: str,
    params: dict[str, Any],
    to_row: Callable[[dict[str, Any]], RowT],
    *,
    serial: bool = False,
) -> Page[RowT]:
    """A keyset page (`page_sql`), or a bounded search (`search_sql`) when text is sought;
    `serial` for a read split by phase (see fetch_dicts)."""
    limit = params["limit"]
    if params["pattern"] is not None:
        found, nxt = await _search(conn, search_sql, params, limit, serial=serial)
        return Page(rows=[to_row(r) for r in found], next_before=nxt)
    rows = await fetch_dicts(conn, page_sql, params, serial=serial)
    return _page([to_row(r) for r in rows], limit)


async def _get(
    conn: psycopg.AsyncConnection,
    sql: str,
    row_id: int,
    to_row: Callable[[dict[str, Any]], RowT],
) -> RowT | None:
    if isinstance(row_id, bool) or not isinstance(row_id, int) or abs(row_id) > _BIGINT_MAX:
        return None
    rows = await fetch_dicts(conn, sql, {"id": row_id})
    return to_row(rows[0]) if rows else None


async def dead_groups(
    conn: psycopg.AsyncConnection, schema: str, flt: DeadFilter, *, limit: int = 500
) -> list[DeadGroup]:
    """Dead letters grouped by (kind, error signature), biggest group first."""
    params = {**dead_filter_params(flt), "limit": _limit(limit)}
    # Without a filter that needs the rows, the groups come from migration 0016's counts.
    rows_needed = any(params[p] is not None for p in ("unique_key", "error", "pattern"))
    name = "browse_dead_groups" if rows_needed else "browse_dead_groups_counted"
    rows = await fetch_dicts(conn, statement(schema, name), params)
    return [
        DeadGroup(
            kind=r["kind"],
            error_signature=r["error_signature"],
            count=r["count"],
            first_seen=r["first_seen"],
            last_seen=r["last_seen"],
            sample_id=r["sample_id"],
        )
        for r in rows
    ]


async def oldest_ready_job(
    conn: psycopg.AsyncConnection, schema: str, kind: str | None = None
) -> int | None:
    """The id of the ready job that has waited longest (of `kind`, or of any), or None.

    Read from the database, not from the rows a page holds: the oldest ready job usually has
    a low id, pages away from the newest rows the console loads first.
    """
    n = await _scalar(conn, statement(schema, "browse_oldest_ready_job"), {"kind": _kind(kind)})
    return None if n is None else int(n)


async def count_dead(conn: psycopg.AsyncConnection, schema: str, flt: DeadFilter) -> int:
    """How many dead letters match `flt` (exact)."""
    counted = await _counted_dead(conn, schema, flt)
    if counted is not None:
        return counted
    n = await _scalar(conn, statement(schema, "browse_dead_count"), dead_filter_params(flt))
    return int(n or 0)


async def count_jobs(conn: psycopg.AsyncConnection, schema: str, flt: JobFilter) -> int:
    """How many jobs match `flt` (exact; with no filter this counts finished rows too).

    A filter of at most a kind and one state is read from the per-kind state counts that
    migration 0016's triggers keep (a few hundred rows); any other filter counts the rows.
    """
    counted = await _counted_jobs(conn, schema, flt)
    if counted is not None:
        return counted
    params = job_filter_params(flt)
    phased = phased_count(params)
    n = await _scalar(conn, statement(schema, "browse_jobs_count", phased), params, serial=phased)
    return int(n or 0)


async def count_jobs_capped(
    conn: psycopg.AsyncConnection, schema: str, flt: JobFilter, *, cap: int = COUNT_CAP
) -> CappedCount:
    """How many jobs match `flt`, reading at most `cap` rows: for a count shown on every
    refresh. Exact whatever the size when the state counts can answer (see count_jobs)."""
    counted = await _counted_jobs(conn, schema, flt)
    if counted is not None:
        return CappedCount(counted, capped=False)
    params = {**job_filter_params(flt), "cap": _limit(cap)}
    phased = phased_count(params)
    sql = statement(schema, "browse_jobs_count_capped", phased)
    n = int(await _scalar(conn, sql, params, serial=phased) or 0)
    return CappedCount(min(n, cap), capped=n > cap)


async def count_dead_capped(
    conn: psycopg.AsyncConnection, schema: str, flt: DeadFilter, *, cap: int = COUNT_CAP
) -> CappedCount:
    """How many dead letters match `flt`, reading at most `cap` rows (see count_jobs_capped)."""
    counted = await _counted_dead(conn, schema, flt)
    if counted is not None:
        return CappedCount(counted, capped=False)
    params = {**dead_filter_params(flt), "cap": _limit(cap)}
    n = int(await _scalar(conn, statement(schema, "browse_dead_count_capped"), params) or 0)
    return CappedCount(min(n, cap), capped=n > cap)


async def _counted_jobs(conn: psycopg.AsyncConnection, schema: str, flt: JobFilter) -> int | None:
    """The count from the state counts, or None when the filter needs the rows themselves."""
    params = job_filter_params(flt)  # validates
    states = {s for s in JOB_STATES if params[f"s_{s}"]}
    if params["pattern"] is not None or params["unique_key"] is not None:
        return None
    if states and _state_sum(states, dict.fromkeys(_COUNTED_PARTS, 0)) is None:
        return None  # decided before the read: whether a sum can answer is not in the counts
    rows = await fetch_dicts(conn, queries(schema).metrics_state_counts, {})
    picked = [r for r in rows if params["kind"] is None or r["kind"] == params["kind"]]
    total = 0
    for row in picked:
        counts = {p: int(row[p]) for p in _COUNTED_PARTS}
        n = _state_sum(states or set(JOB_STATES), counts)
        assert n is not None  # every state: the no-filter case always sums
        total += n
    return total


_COUNTED_PARTS = (
    "ready", "scheduled", "retrying", "running", "exhausted", "succeeded", "cancelled",
    "cancel_open",
)  # fmt: skip
_UNFINISHED_PARTS = frozenset({"ready", "scheduled", "running", "exhausted"})


def _state_sum(states: set[str], counts: dict[str, int]) -> int | None:
    """How many rows are in any of `states`, from one kind's state counts; None when the
    counts cannot tell without the rows.

    `ready`, `scheduled`, `running`, `exhausted` and `succeeded` hold each row at most once.
    `retrying` rows are also ready or scheduled: with both chosen they are counted already;
    alone they are their own count; beside only one of the two the counts cannot split them.
    `cancelled` is every row with cancelled_at set, finished or not (`cancel_open`, also in an
    unfinished state): beside all unfinished states or none of them it adds exactly what is
    not counted yet; beside some of them, the counts cannot tell which.
    """
    chosen = set(states)
    if "retrying" in chosen:
        if {"ready", "scheduled"} <= chosen:
            chosen.discard("retrying")
        elif chosen == {"retrying"}:
            return counts["retrying"]
        else:
            return None
    total = sum(counts[s] for s in chosen - {"cancelled"})
    if "cancelled" in chosen:
        unfinished = chosen & _UNFINISHED_PARTS
        if unfinished == _UNFINISHED_PARTS:
            total += counts["cancelled"] - counts["cancel_open"]
        elif not unfinished:
            total += counts["cancelled"]
        else:
            return None
    return total


async def _counted_dead(conn: psycopg.AsyncConnection, schema: str, flt: DeadFilter) -> int | None:
    """The count from migration 0015's per-kind counts, or None when the filter needs rows."""
    params = dead_filter_params(flt)
    if any(params[p] is not None for p in ("unique_key", "error", "pattern")):
        return None
    if params["signature"] is not None:
        return sum(g.count for g in await dead_groups(conn, schema, flt, limit=MAX_LIMIT))
    rows = await fetch_dicts(conn, queries(schema).metrics_dead_by_kind, {})
    return sum(int(r["dead"]) for r in rows if params["kind"] in (None, r["kind"]))


async def kinds(conn: psycopg.AsyncConnection, schema: str) -> list[str]:
    """Kinds with unfinished jobs, dead letters or a pause, sorted, for filter pickers."""
    rows = await fetch_dicts(conn, statement(schema, "browse_kinds"), {})
    return [r["kind"] for r in rows]


async def paused_kinds(conn: psycopg.AsyncConnection, schema: str) -> dict[str, str]:
    """Paused kinds and who paused each."""
    rows = await fetch_dicts(conn, statement(schema, "browse_paused_kinds"), {})
    return {r["kind"]: r["paused_by"] for r in rows}


READ_ONLY_REPLICA = "replica: read-only (hot standby)"
READ_ONLY_ROLE = "the database role cannot write"
READ_ONLY_SESSION = "the session is read-only (default_transaction_read_only)"


async def read_only_reason(conn: psycopg.AsyncConnection, schema: str) -> str | None:
    """Why operator actions cannot succeed here, in words; None when they can.

    A standby is named first: it refuses every write whatever the role may do.
    """
    rows = await fetch_dicts(conn, statement(schema, "browse_can_write"), {})
    if not rows:
        return READ_ONLY_ROLE
    row = rows[0]
    if row["replica"]:
        return READ_ONLY_REPLICA
    if row["read_only"]:
        return READ_ONLY_SESSION
    if not row["privileged"]:
        return READ_ONLY_ROLE
    return None


async def can_write(conn: psycopg.AsyncConnection, schema: str) -> bool:
    """Whether operator actions can succeed: the role's privileges and a writable session."""
    return await read_only_reason(conn, schema) is None


def ids_list(ids: Sequence[int]) -> list[int]:
    """Distinct ids in order; refuses anything that is not an integer id."""
    seen: dict[int, None] = {}
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or abs(i) > _BIGINT_MAX:
            raise InvalidFilter(f"ids must be integers, not {i!r}")
        seen[i] = None
    return list(seen)
