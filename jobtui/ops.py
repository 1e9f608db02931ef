"""Operator actions shared by the console, the CLI and the worker.

Every action is atomic, safe when several operators (or workers) act at once, returns how many
rows it changed, and writes one `audit_log` row in the same transaction (the database role is
filled in by the column default, so it is the role that really did it). Whether an action is
allowed is the database's decision: a role without the privileges gets InsufficientPrivilege.

Bulk `*_matching` actions act on the rows matching *when they start*: they fix an upper bound
first, then work in id order in batches, one transaction per batch, so rows arriving later are
not swept and a bulk action can never chase its own tail. One action is still one audit row,
holding the filter and the total: the first batch that changes something inserts it and each
later batch adds its count in its own transaction, so the row always equals what is committed.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from jobtui.browse import (
    InvalidFilter,
    dead_filter_params,
    get_job,
    ids_list,
    job_filter_params,
    statement,
)
from jobtui.models import DeadFilter, JobFilter, RequeueOutcome
from jobtui.sql import notify_channel, queries

Progress = Callable[[int], None]
# An action on one named thing (a kind, a schedule): returns 1 if it changed, 0 if not.
NamedAction = Callable[..., Awaitable[int]]

MAX_BATCH = 100_000


class InvalidAction(InvalidFilter):
    """An operator action asked with arguments it cannot act on (bad kind, ids, batch size)."""


@dataclass(frozen=True)
class Actor:
    """Who performs an action, as recorded in the audit log (`user@host`)."""

    os_user: str

    @classmethod
    def current(cls) -> Actor:
        """The OS user of this process at this host; never fails."""
        try:
            user = getpass.getuser()
        except (OSError, KeyError, ImportError):  # no passwd entry, no LOGNAME/USER
            user = os.environ.get("USER") or (
                f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
            )
        try:
            host = socket.gethostname() or "localhost"
        except OSError:
            host = "localhost"
        return cls(f"{user}@{host}")

    @classmethod
    def worker(cls, worker_id: str) -> Actor:
        """A worker acting on its own (pruning, for example)."""
        return cls(f"worker:{worker_id}")

    @classmethod
    def web(cls, user: str) -> Actor:
        """A browser user of `jobtui serve`, named by the token they signed in with."""
        return cls(f"web:{user}")


def _actor(actor: Actor) -> str:
    if not isinstance(actor, Actor) or not actor.os_user.strip():
        raise InvalidAction("an actor (Actor.current() or Actor.worker(id)) is required")
    return actor.os_user


def _batch(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise InvalidAction(f"batch size must be an integer, not {batch_size!r}")
    if not 1 <= batch_size <= MAX_BATCH:
        raise InvalidAction(f"batch size must be from 1 to {MAX_BATCH}, not {batch_size}")
    return batch_size


def _kind(kind: str) -> str:
    if not isinstance(kind, str) or not kind.strip():
        raise InvalidAction("kind must be a non-empty string")
    if "\x00" in kind:
        raise InvalidAction("kind cannot contain a NUL character")
    return kind


def _filter_json(flt: JobFilter | DeadFilter, **extra: Any) -> Jsonb:
    data = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(flt).items()}
    data = {k: v for k, v in data.items() if v not in (None, [], "")}
    data.update({k: v.isoformat() if isinstance(v, datetime) else v for k, v in extra.items()})
    return Jsonb(data)


async def _audit(
    conn: psycopg.AsyncConnection,
    schema: str,
    os_user: str,
    action: str,
    count: int,
    *,
    ids: list[int] | None = None,
    filter: Jsonb | None = None,
) -> None:
    await conn.execute(
        statement(schema, "ops_audit"),
        {"os_user": os_user, "action": action, "ids": ids, "filter": filter, "count": count},
    )


class _AuditTotal:
    """The one audit row of a bulk action, kept equal to what its committed batches changed."""

    def __init__(self, schema: str, os_user: str, action: str, filter: Jsonb) -> None:
        self.schema, self.os_user, self.action, self.filter = schema, os_user, action, filter
        self.id: int | None = None

    async def add(self, conn: psycopg.AsyncConnection, n: int) -> None:
        """Inside the batch's transaction: insert the row (first batch) or add `n` to it."""
        if self.id is None:
            async with conn.cursor() as cur:
                await cur.execute(
                    statement(self.schema, "ops_audit_open"),
                    {
                        "os_user": self.os_user,
                        "action": self.action,
                        "ids": None,
                        "filter": self.filter,
                        "count": n,
                    },
                )
                row = await cur.fetchone()
            assert row is not None
            self.id = int(row[0])
        else:
            await conn.execute(statement(self.schema, "ops_audit_add"), {"id": self.id, "count": n})

    async def close_empty(self, conn: psycopg.AsyncConnection) -> None:
        """An action that changed nothing still leaves its one row (count 0)."""
        if self.id is None:
            await _audit(conn, self.schema, self.os_user, self.action, 0, filter=self.filter)


async def _notify(conn: psycopg.AsyncConnection, schema: str, message: str) -> None:
    await conn.execute(
        statement(schema, "notify"), {"channel": notify_channel(schema), "message": message}
    )


async def _audited(
    conn: psycopg.AsyncConnection,
    schema: str,
    os_user: str,
    action: str,
    sql_name: str,
    params: dict[str, Any],
    *,
    ids: list[int] | None = None,
    filter: Jsonb | None = None,
    notify: str | None = None,
    notify_if: Callable[[list[Any]], bool] = bool,
) -> list[Any]:
    """Run one statement and write the action's one audit row (count = rows it returned) in one
    transaction; send `notify` when `notify_if(rows)` (by default: when it changed anything)."""
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(statement(schema, sql_name), params)
        rows = await cur.fetchall()
        await _audit(conn, schema, os_user, action, len(rows), ids=ids, filter=filter)
        if notify and notify_if(rows):
            await _notify(conn, schema, notify)
    return rows


async def _ids_action(
    conn: psycopg.AsyncConnection,
    schema: str,
    ids: Sequence[int],
    actor: Actor,
    *,
    action: str,
    sql_name: str,
    notify: str | None = None,
    notify_if: Callable[[list[Any]], bool] = bool,
) -> int:
    """An action on these ids (audited with them); returns how many rows it changed."""
    wanted = ids_list(ids)
    os_user = _actor(actor)
    if not wanted:
        return 0
    rows = await _audited(
        conn,
        schema,
        os_user,
        action,
        sql_name,
        {"ids": wanted},
        ids=wanted,
        notify=notify,
        notify_if=notify_if,
    )
    return len(rows)


async def requeue_dead(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> int:
    """Move these dead letters back to `jobs` (same id, error history and unique key kept,
    attempts reset); returns how many moved. One whose unique key an unfinished job holds
    stays a dead letter: `requeue_dead_keyed` says which."""
    return len((await requeue_dead_keyed(conn, schema, ids, actor=actor)).requeued)


async def delete_dead(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> int:
    """Delete these dead letters for good."""
    return await _ids_action(
        conn, schema, ids, actor, action="delete_dead", sql_name="ops_delete_dead_ids"
    )


async def run_now(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> int:
    """Make these scheduled (unlocked, unfinished, future) jobs due now and wake the workers."""
    return await _ids_action(
        conn, schema, ids, actor, action="run_now", sql_name="ops_run_now", notify="run_now"
    )


async def cancel_jobs(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> int:
    """Cancel these jobs: pending ones at once, running ones by asking their worker to stop."""
    return await _ids_action(
        conn,
        schema,
        ids,
        actor,
        action="cancel_jobs",
        sql_name="ops_cancel_ids",
        notify="cancel",
        notify_if=lambda rows: any(running for _, running in rows),
    )


async def _bound(
    conn: psycopg.AsyncConnection, schema: str, sql_name: str, params: dict[str, Any]
) -> dict[str, Any]:
    """The upper bound (and, for dead letters, the start time `t0`) a bulk action works up to."""
    async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        # Unfinished jobs are read phase by phase (jobtui.browse.statement), with the settings
        # of a browse read split by phase; dead letters have no phases.
        await cur.execute(queries(schema).browse_read_settings, {"serial": True})
        await cur.execute(statement(schema, sql_name, phased=True), params, prepare=False)
        row = await cur.fetchone()
    assert row is not None
    return row


async def _bulk_start(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: JobFilter | DeadFilter,
    actor: Actor,
    batch_size: int,
    action: str,
) -> tuple[dict[str, Any], _AuditTotal]:
    """Check a bulk action's arguments and fix the rows it may touch; returns the batch
    statements' parameters (filter, bound, batch size) and the action's audit row."""
    dead = isinstance(flt, DeadFilter)
    params = dead_filter_params(flt) if isinstance(flt, DeadFilter) else job_filter_params(flt)
    os_user = _actor(actor)
    batch = _batch(batch_size)
    first = await _bound(conn, schema, "ops_dead_bound" if dead else "ops_jobs_bound", params)
    at = {"at": first["t0"]} if dead else {}  # when the dead-letter bound was fixed
    audit = _AuditTotal(schema, os_user, action, _filter_json(flt, bound=first["bound"], **at))
    return {**params, **first, "batch": batch}, audit


async def _batches(
    conn: psycopg.AsyncConnection,
    schema: str,
    audit: _AuditTotal,
    sql_name: str,
    params: dict[str, Any],
    *,
    notify: str | None,
    on_progress: Progress | None,
) -> int:
    """Run batch statement `sql_name` from the lowest id up to `params["bound"]`, one
    transaction a batch, adding each batch to the audit row; returns the total changed.

    The statement returns (last id picked, ids changed[, how many of them are running]);
    with that third column, `notify` is sent only for a batch that has running rows.
    """
    total, after = 0, -(2**63)
    while params["bound"] is not None:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(queries(schema).browse_read_settings, {"serial": True})
            await cur.execute(
                statement(schema, sql_name, phased=True),
                {**params, "after": after},
                prepare=False,
            )
            row = await cur.fetchone()
            assert row is not None
            last_id, ids, *running = row
            if last_id is None:
                break
            after = last_id
            if ids:
                await audit.add(conn, len(ids))
                if notify and all(running):
                    await _notify(conn, schema, notify)
        total += len(ids)
        if on_progress:
            on_progress(total)
    await audit.close_empty(conn)
    return total


async def requeue_dead_matching(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: DeadFilter,
    *,
    actor: Actor,
    batch_size: int = 5000,
    on_progress: Progress | None = None,
) -> int:
    """Requeue every dead letter matching `flt` at the start, in batches; returns the total
    (keys held by unfinished jobs stay behind: `requeue_dead_matching_keyed` says which)."""
    outcome = await requeue_dead_matching_keyed(
        conn, schema, flt, actor=actor, batch_size=batch_size, on_progress=on_progress
    )
    return len(outcome.requeued)


async def requeue_dead_matching_keyed(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: DeadFilter,
    *,
    actor: Actor,
    batch_size: int = 5000,
    on_progress: Progress | None = None,
) -> RequeueOutcome:
    """Requeue every dead letter matching `flt` at the start, in batches, keeping unique keys:
    one whose key an unfinished job holds stays a dead letter and is reported as skipped.

    One audit row for the whole action (count = requeued); `on_progress` gets the running
    total of rows requeued or skipped.
    """
    params, audit = await _bulk_start(conn, schema, flt, actor, batch_size, "requeue_dead_matching")
    requeued: list[int] = []
    skipped: list[int] = []
    after = -(2**63)
    while params["bound"] is not None:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                statement(schema, "ops_dead_pick_batch"), {**params, "after": after}, prepare=False
            )
            picked = [r[0] for r in await cur.fetchall()]
            if not picked:
                break
            after = max(picked)
            await cur.execute(statement(schema, "unique_requeue_dead_ids"), {"ids": picked})
            rows = await cur.fetchall()
            moved = sorted({r[0] for r in rows if r[1]})
            kept = sorted({r[0] for r in rows if not r[1]} - set(moved))
            if moved:
                await audit.add(conn, len(moved))
                await _notify(conn, schema, "requeue")
        requeued += moved
        skipped += kept
        if on_progress:
            on_progress(len(requeued) + len(skipped))
    await audit.close_empty(conn)
    return RequeueOutcome(requeued, skipped)


async def delete_dead_matching(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: DeadFilter,
    *,
    actor: Actor,
    batch_size: int = 5000,
    on_progress: Progress | None = None,
) -> int:
    """Delete every dead letter matching `flt` at the start, in batches; returns the total."""
    params, audit = await _bulk_start(conn, schema, flt, actor, batch_size, "delete_dead_matching")
    return await _batches(
        conn, schema, audit, "ops_delete_dead_batch", params, notify=None, on_progress=on_progress
    )


async def cancel_jobs_matching(
    conn: psycopg.AsyncConnection,
    schema: str,
    flt: JobFilter,
    *,
    actor: Actor,
    batch_size: int = 5000,
    on_progress: Progress | None = None,
) -> int:
    """Cancel every unfinished job matching `flt` at the start, in batches; returns the total."""
    params, audit = await _bulk_start(conn, schema, flt, actor, batch_size, "cancel_jobs_matching")
    return await _batches(
        conn, schema, audit, "ops_cancel_batch", params, notify="cancel", on_progress=on_progress
    )


async def _kind_action(
    conn: psycopg.AsyncConnection,
    schema: str,
    kind: str,
    actor: Actor,
    action: str,
    *,
    notify: str | None = None,
) -> int:
    """Run `ops_<action>` on one kind, audited with it; 1 if it changed, 0 if not."""
    kind = _kind(kind)
    os_user = _actor(actor)
    params = {"kind": kind, "os_user": os_user}
    filter = Jsonb({"kind": kind})
    return len(
        await _audited(
            conn, schema, os_user, action, f"ops_{action}", params, filter=filter, notify=notify
        )
    )


async def pause_kind(conn: psycopg.AsyncConnection, schema: str, kind: str, *, actor: Actor) -> int:
    """Stop workers claiming `kind`; 1 if newly paused, 0 if it already was."""
    return await _kind_action(conn, schema, kind, actor, "pause_kind")


async def resume_kind(
    conn: psycopg.AsyncConnection, schema: str, kind: str, *, actor: Actor
) -> int:
    """Let workers claim `kind` again and wake them; 1 if it was paused, else 0."""
    return await _kind_action(conn, schema, kind, actor, "resume_kind", notify="resume")


async def prune_finished(
    conn: psycopg.AsyncConnection,
    schema: str,
    older_than: timedelta,
    *,
    actor: Actor,
    batch_size: int = 1000,
    on_progress: Progress | None = None,
) -> int:
    """Delete jobs finished (succeeded or cancelled) before now − `older_than`, in batches.

    Dead letters and unfinished jobs are never touched. One audit row for the whole prune,
    holding the total (a prune that finds nothing leaves no trace).
    """
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        raise InvalidAction(f"older_than must be a non-negative duration, not {older_than!r}")
    os_user = _actor(actor)
    batch = _batch(batch_size)
    async with conn.cursor() as cur:
        await cur.execute(statement(schema, "ops_now"))
        now_row = await cur.fetchone()
    assert now_row is not None
    try:
        cutoff = now_row[0] - older_than
    except OverflowError:  # before year 1 (`--older-than 999999999d`): no finished_at is
        cutoff = datetime.min.replace(tzinfo=now_row[0].tzinfo)  # older, none can be read back
    audit = _AuditTotal(
        schema,
        os_user,
        "prune_finished",
        Jsonb({"older_than_s": older_than.total_seconds(), "cutoff": cutoff.isoformat()}),
    )
    total = 0
    while True:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                statement(schema, "ops_prune_batch"), {"cutoff": cutoff, "batch": batch}
            )
            n = len(await cur.fetchall())
            if n:
                await audit.add(conn, n)
        if not n:
            break
        total += n
        if on_progress:
            on_progress(total)
    return total


# ------------------------------------------------ issue 13: unique jobs, schedules, limits
# Appended as one block (this file is shared with other work in flight); its imports move to
# the top when the branches meet.
from jobtui.limits import InvalidLimit, KindLimit  # noqa: E402


async def requeue_dead_keyed(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> RequeueOutcome:
    """Requeue these dead letters with their unique keys; a dead letter whose key is held by
    an unfinished job stays in dead letters and is reported as skipped (and in the audit row).

    Meant to replace `requeue_dead` once the worker copies keys into dead letters.
    """
    wanted = ids_list(ids)
    os_user = _actor(actor)
    if not wanted:
        return RequeueOutcome([], [])
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(statement(schema, "unique_requeue_dead_ids"), {"ids": wanted})
        rows = await cur.fetchall()
        requeued = sorted({r[0] for r in rows if r[1]})
        skipped = sorted({r[0] for r in rows if not r[1]} - set(requeued))
        extra = Jsonb({"skipped_key_taken": skipped}) if skipped else None
        await _audit(conn, schema, os_user, "requeue_dead", len(requeued), ids=wanted, filter=extra)
        if requeued:
            await _notify(conn, schema, "requeue")
    return RequeueOutcome(requeued, skipped)


def _schedule_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise InvalidAction("schedule name must be a non-empty string")
    return name


async def _schedule_flip(
    conn: psycopg.AsyncConnection, schema: str, name: str, actor: Actor, action: str
) -> int:
    """Pause or resume a schedule; 1 if it changed, 0 if it already was; unknown: InvalidAction."""
    name = _schedule_name(name)
    os_user = _actor(actor)
    notify = "resume" if action == "resume_schedule" else None
    # The outer transaction lets an unknown name undo the audit row written for it.
    async with conn.transaction():
        n = len(
            await _audited(
                conn,
                schema,
                os_user,
                action,
                f"ops_{action}",
                {"name": name, "os_user": os_user},
                filter=Jsonb({"schedule": name}),
                notify=notify,
            )
        )
        if not n:
            async with conn.cursor() as cur:
                await cur.execute(statement(schema, "ops_schedule_exists"), {"name": name})
                if await cur.fetchone() is None:
                    raise InvalidAction(f"no schedule named {name!r}")
    return n


async def pause_schedule(
    conn: psycopg.AsyncConnection, schema: str, name: str, *, actor: Actor
) -> int:
    """Stop enqueueing ticks of schedule `name`; 1 if newly paused, 0 if it already was."""
    return await _schedule_flip(conn, schema, name, actor, "pause_schedule")


async def resume_schedule(
    conn: psycopg.AsyncConnection, schema: str, name: str, *, actor: Actor
) -> int:
    """Enqueue ticks of `name` again from now on (ticks that fell while paused are not run)."""
    return await _schedule_flip(conn, schema, name, actor, "resume_schedule")


async def run_schedule_now(
    conn: psycopg.AsyncConnection, schema: str, name: str, *, actor: Actor
) -> int:
    """Enqueue one job of schedule `name` now (paused or not); returns its id.

    Recorded as a manual tick, so the schedule's own ticks are unaffected.
    """
    name = _schedule_name(name)
    os_user = _actor(actor)
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            statement(schema, "ops_run_schedule_now"),
            {"name": name, "os_user": os_user, "channel": notify_channel(schema)},
        )
        row = await cur.fetchone()
        if row is None:
            raise InvalidAction(f"no schedule named {name!r}")
        await _audit(
            conn,
            schema,
            os_user,
            "run_schedule_now",
            1,
            ids=[row[0]],
            filter=Jsonb({"schedule": name}),
        )
    return int(row[0])


async def set_kind_limits(
    conn: psycopg.AsyncConnection,
    schema: str,
    kind: str,
    *,
    concurrency: int | None = None,
    per_worker: int | None = None,
    rate: int | None = None,
    rate_period_s: int = 1,
    actor: Actor,
) -> int:
    """Override the limits of `kind` as a whole (None lifts that limit, even a declared one)
    until `clear_kind_limits`; applies from the next claim. Returns 1, or 0 when the kind
    already had exactly this override (nothing written but the audit row, no NOTIFY)."""
    kind = _kind(kind)
    os_user = _actor(actor)
    try:
        limit = KindLimit(kind, concurrency, per_worker, rate, rate_period_s)
    except InvalidLimit as exc:
        raise InvalidAction(str(exc)) from None
    values = limit.row()
    rows = await _audited(
        conn,
        schema,
        os_user,
        "set_kind_limits",
        "ops_set_kind_limits",
        {**values, "os_user": os_user},
        filter=Jsonb(values),
        notify="limits",
    )
    return len(rows)


async def clear_kind_limits(
    conn: psycopg.AsyncConnection, schema: str, kind: str, *, actor: Actor
) -> int:
    """Drop the operator's override of `kind`: its declared limits apply again; 1 or 0."""
    return await _kind_action(conn, schema, kind, actor, "clear_kind_limits", notify="limits")


# ------------------------------------------------ issue 11: applicability, run again
@dataclass(frozen=True)
class Rerun:
    """The outcome of `rerun_job`: the new job's id, or the unfinished job holding the key."""

    original: int
    new_id: int | None
    held_by: int | None = None


RERUN_ACTIONS = ("cancel_jobs", "run_now", "rerun_job")


async def applicable_ids(
    conn: psycopg.AsyncConnection, schema: str, action: str, ids: Sequence[int]
) -> list[int]:
    """Those of `ids` that the job action `action` ("cancel_jobs", "run_now", "rerun_job")
    can change now, judged as the action's own statement would; in id order."""
    if action not in RERUN_ACTIONS:
        raise InvalidAction(f"no applicability check for action {action!r}")
    wanted = ids_list(ids)
    if not wanted:
        return []
    async with conn.cursor() as cur:
        await cur.execute(
            statement(schema, "ops_applicable_ids"), {"ids": wanted, "action": action}
        )
        return [int(r[0]) for r in await cur.fetchall()]


async def rerun_jobs(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], *, actor: Actor
) -> int:
    """Run these finished jobs again as new jobs (see `rerun_job`); returns how many were
    made. Unfinished or unknown ids, and keys held by an unfinished job, make none. One
    audit row: ids = the originals, filter = {"new_jobs": {original: new}}."""
    return len(await _rerun(conn, schema, ids, actor))


async def _rerun(
    conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int], actor: Actor
) -> dict[int, int]:
    """{original: new job} for the reruns made, in one transaction with its audit row."""
    wanted = ids_list(ids)
    os_user = _actor(actor)
    if not wanted:
        return {}
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            statement(schema, "ops_rerun_jobs"),
            {"ids": wanted, "channel": notify_channel(schema)},
        )
        made = {int(r[0]): int(r[1]) for r in await cur.fetchall()}
        detail = Jsonb({"new_jobs": {str(k): v for k, v in made.items()}})
        await _audit(conn, schema, os_user, "rerun_job", len(made), ids=wanted, filter=detail)
    return made


async def rerun_job(
    conn: psycopg.AsyncConnection, schema: str, job_id: int, *, actor: Actor
) -> Rerun:
    """Run a finished (succeeded or cancelled) job again as a new job linked to it by
    `rerun_of`: same kind, payload, priority, max_attempts and unique key, due now.

    While an unfinished job holds the original's unique key, no job is made and the outcome
    names the holder (the key's one-unfinished-job rule holds for operators too); the audit
    row says so with count 0. An unknown or unfinished job raises InvalidAction and writes
    nothing.
    """
    [original] = ids_list([job_id])
    state = await _job_state(conn, schema, original)
    if state not in ("succeeded", "cancelled"):
        raise InvalidAction(f"job #{original}: {_not_rerunnable(state)}")
    made = await _rerun(conn, schema, [original], actor)
    if original in made:
        return Rerun(original, made[original])
    async with conn.cursor() as cur:
        await cur.execute(statement(schema, "ops_rerun_blocker"), {"id": original})
        holder = await cur.fetchone()
    return Rerun(original, None, None if holder is None else int(holder[0]))


async def _job_state(conn: psycopg.AsyncConnection, schema: str, job_id: int) -> str | None:
    found = await get_job(conn, schema, job_id)
    return None if found is None else found.state


def _not_rerunnable(state: str | None) -> str:
    if state is None:
        return "no such job (it may be a dead letter: requeue it instead, or pruned)"
    return f"the job is {state}: only a finished (succeeded or cancelled) job can be run again"


async def rerun_links(
    conn: psycopg.AsyncConnection, schema: str, job_id: int
) -> tuple[int | None, list[int]]:
    """(the job `job_id` was made from by a rerun, the reruns made from it, newest first)."""
    [wanted] = ids_list([job_id])
    async with conn.cursor() as cur:
        await cur.execute(statement(schema, "ops_rerun_links"), {"id": wanted})
        row = await cur.fetchone()
    assert row is not None
    return (None if row[0] is None else int(row[0])), [int(i) for i in row[1]]


# --- what holds back vacuum (issue 26 item 15): a prepared transaction, a replication slot ----


class Refused(Exception):
    """The database refused the action (privilege, object in use); str() says why, one line."""


async def end_prepared(
    conn: psycopg.AsyncConnection,
    schema: str,
    gid: str,
    xid: str,
    *,
    commit: bool,
    actor: Actor,
) -> bool:
    """COMMIT PREPARED (`commit`) or ROLLBACK PREPARED the prepared transaction `gid`, if it is
    still the one with transaction id `xid`; False when it had already ended.

    Neither statement may run inside a transaction, so the audit row cannot share one with it:
    the row is written first with count 0, the statement runs, then the count becomes 1. The
    log never lacks an action, and a role that may not write it ends nothing. `conn` must be in
    autocommit mode. Raises Refused (one line) when the role may not.
    """
    os_user = _actor(actor)
    action = "commit_prepared" if commit else "rollback_prepared"
    try:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(statement(schema, "ops_prepared_find"), {"gid": gid, "xid": xid})
            found = await cur.fetchone() is not None
            details = Jsonb({"gid": gid, "xid": xid, "found": found})
            await cur.execute(
                statement(schema, "ops_audit_open"),
                {"os_user": os_user, "action": action, "ids": None, "filter": details, "count": 0},
            )
            row = await cur.fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        raise Refused(_refusal(exc, f"end prepared transaction {gid!r}")) from None
    assert row is not None
    if not found:
        return False
    sql_name = "ops_commit_prepared" if commit else "ops_rollback_prepared"
    try:
        async with psycopg.AsyncClientCursor(conn) as ccur:
            await ccur.execute(statement(schema, sql_name), {"gid": gid})
    except psycopg.errors.UndefinedObject:
        return False  # ended by someone else since: the audit row stays at 0
    except psycopg.errors.InsufficientPrivilege as exc:
        raise Refused(_refusal(exc, f"end prepared transaction {gid!r}")) from None
    await conn.execute(statement(schema, "ops_audit_add"), {"id": int(row[0]), "count": 1})
    return True


async def drop_slot(
    conn: psycopg.AsyncConnection,
    schema: str,
    name: str,
    slot_type: str,
    *,
    actor: Actor,
) -> bool:
    """Drop replication slot `name` (of `slot_type`) unless a consumer holds it; audited as
    `drop_replication_slot`. False: it was gone. Raises Refused when the role may not, or
    when the slot is in use (its consumer must disconnect first)."""
    os_user = _actor(actor)
    try:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                statement(schema, "ops_drop_slot"),
                {
                    "name": name,
                    "slot_type": slot_type,
                    "os_user": os_user,
                    "details": Jsonb({"slot": name, "slot_type": slot_type}),
                },
            )
            row = await cur.fetchone()
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse) as exc:
        raise Refused(_refusal(exc, f"drop replication slot {name!r}")) from None
    assert row is not None
    dropped, found = int(row[0]) == 1, bool(row[1])
    if found and not dropped:
        raise Refused(
            f"replication slot {name!r} is in use: it can be dropped once its consumer disconnects"
        )
    return dropped


def _refusal(exc: psycopg.Error, what: str) -> str:
    """PostgreSQL's refusal in one line, with its hint."""
    diag = exc.diag
    text = (diag.message_primary or str(exc)).strip()
    hint = f" ({diag.message_hint.strip()})" if diag.message_hint else ""
    return f"not allowed to {what}: {text}{hint}"
