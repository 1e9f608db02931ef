"""Periodic jobs: declarations in code, their rows in the database, and enqueueing due ticks.

A `Schedule` names a cron expression, a time zone and the job to enqueue at each tick. The
worker upserts its declarations at start (`sync_schedules`) and its housekeeper calls
`enqueue_due_ticks` about once a second. Each tick is enqueued exactly once however many
workers call it at the same time: the tick's row in `schedule_ticks` (unique per schedule and
tick) is inserted in the same statement as its job, and the job only if the row was new; the
schedule's row is locked with SKIP LOCKED, by that same statement only, so concurrent
housekeepers split the work, never wait on each other, and one that freezes holds nothing.
Delivery of the job itself is then at-least-once like any job's.

Missed ticks (downtime, a long pause of every worker): a tick is on time while it is at most
`grace` old (default 60 s). On-time ticks are all enqueued. Older ones are missed: with
`missed="skip"` they are dropped; with `missed="latest"` the latest of them is enqueued once,
unless an on-time tick is enqueued anyway. Ticks that fall while a schedule is paused are
never run (resuming starts from the moment of resuming). DST: see jobtui.cron.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from jobtui import cron
from jobtui.jobspec import DEFAULT_MAX_ATTEMPTS, InvalidJob, JobSpec
from jobtui.models import ScheduleRow
from jobtui.sql import notify_channel, queries

MISSED_POLICIES = ("skip", "latest")
DEFAULT_GRACE = timedelta(seconds=60)
# On-time ticks enqueued per schedule per call: a per-second schedule after a minute's pause of
# its housekeepers has 60; more than this means the clock jumped, and the rest count as missed.
MAX_TICKS_PER_CALL = 600


log = logging.getLogger("jobtui.schedules")


class InvalidSchedule(ValueError):
    """A schedule declaration that cannot be used; str() says which field and why."""


@dataclass(frozen=True)
class Schedule:
    """One periodic job, as declared in code (the registry exposes it as `@registry.periodic`
    and `registry.schedule(...)`)."""

    name: str
    cron: str
    kind: str
    payload: Any = field(default_factory=dict)
    timezone: str = "UTC"
    missed: str = "skip"
    priority: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or "\x00" in self.name:
            raise InvalidSchedule(f"schedule name must be a non-empty string, not {self.name!r}")
        if self.missed not in MISSED_POLICIES:
            raise InvalidSchedule(
                f"schedule {self.name!r}: missed must be 'skip' or 'latest', not {self.missed!r}"
            )
        try:
            cron.check(self.cron, self.timezone)
            JobSpec(
                self.kind, self.payload, max_attempts=self.max_attempts, priority=self.priority
            ).validated()
        except (cron.InvalidCron, InvalidJob) as exc:
            raise InvalidSchedule(f"schedule {self.name!r}: {exc}") from None

    @classmethod
    def periodic(
        cls,
        kind: str,
        cron_expr: str,
        *,
        name: str | None = None,
        payload: Any = None,
        timezone: str = "UTC",
        missed: str = "skip",
    ) -> Schedule:
        """What `@registry.periodic(cron, timezone=…)` on the handler of `kind` declares: a
        schedule named after the kind (give `name` when one kind has several schedules)."""
        return cls(
            name=kind if name is None else name,
            cron=cron_expr,
            kind=kind,
            payload={} if payload is None else payload,
            timezone=timezone,
            missed=missed,
        )

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cron": self.cron,
            "timezone": self.timezone,
            "kind": self.kind,
            "payload": self.payload,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "missed": self.missed,
        }


@dataclass(frozen=True)
class TickEnqueued:
    """One tick this call enqueued."""

    schedule: str
    tick: datetime
    job_id: int


async def sync_schedules(
    conn: psycopg.AsyncConnection, schema: str, schedules: Iterable[Schedule]
) -> list[str]:
    """Upsert these definitions (names changed or new); pause state and ticks are kept.

    Schedules in the database that these do not name are left alone (another application's
    worker may declare them); `enqueue_due_ticks` only handles the names it is given.
    """
    rows = [s.row() for s in schedules]
    names = [r["name"] for r in rows]
    if len(set(names)) != len(names):
        raise InvalidSchedule("two schedules have the same name")
    if not rows:
        return []
    # One statement and no BEGIN/COMMIT around it: on the worker's autocommit connection the
    # server commits it as it ends, so no lock on the rows it upserts waits on the worker (a
    # worker frozen between the two would stop every other worker; behind a pooler, for good).
    cur = await conn.execute(queries(schema).schedules_sync, {"rows": Jsonb(rows)})
    return [r[0] for r in await cur.fetchall()]


def _due(row: dict[str, Any], now: datetime, grace: timedelta) -> tuple[list[datetime], bool]:
    """Ticks to enqueue for one schedule, and whether any older ones were missed."""
    expr, tz, after = row["cron"], row["timezone"], row["checked_until"]
    on_time = cron.ticks_between(expr, tz, max(after, now - grace), now, limit=MAX_TICKS_PER_CALL)
    first = cron.next_tick(expr, tz, after)
    missed = first is not None and first <= now and (not on_time or first < on_time[0])
    if missed and not on_time and row["missed"] == "latest":
        latest = cron.latest_tick(expr, tz, now)
        return ([latest] if latest is not None and latest > after else []), True
    return on_time, missed


async def enqueue_due_ticks(
    conn: psycopg.AsyncConnection,
    schema: str,
    names: Iterable[str],
    now: datetime | None = None,
    *,
    grace: timedelta = DEFAULT_GRACE,
) -> list[TickEnqueued]:
    """Enqueue the due ticks of these schedules (by name); what was enqueued.

    `now` defaults to the database's clock (one clock for every worker); tests pass a fixed one.
    The due schedules are read without a lock, then each is enqueued by one statement that
    locks its row only for that statement (schedules_enqueue_ticks): on an autocommit
    connection no lock outlives a round trip, so a caller that freezes stops nobody. A schedule
    another caller holds at that moment, or has moved on meanwhile, is skipped: that caller
    enqueues it.
    """
    q = queries(schema)
    wanted = sorted(set(names))
    if not wanted:
        return []
    async with conn.cursor(row_factory=dict_row) as cur:
        if now is None:
            await cur.execute(q.schedules_now)
            clock = await cur.fetchone()
            assert clock is not None
            now = clock["statement_timestamp"]
        await cur.execute(q.schedules_due, {"names": wanted, "now": now})
        due = await cur.fetchall()
    done: list[TickEnqueued] = []
    for row in due:
        try:
            done += await _enqueue_schedule(conn, schema, row, now, grace)
        except cron.InvalidCron as exc:
            # Another app version may have written a cron or zone this one cannot read;
            # that schedule waits for a worker that can, and the others still tick.
            log.warning("schedule=%r event=schedule_unreadable error=%s", row["name"], exc)
    return done


async def _enqueue_schedule(
    conn: psycopg.AsyncConnection,
    schema: str,
    row: dict[str, Any],
    now: datetime,
    grace: timedelta,
) -> list[TickEnqueued]:
    """One due schedule: its ticks enqueued and its bookkeeping moved to `now`, in one
    statement that does nothing if another caller holds or has moved the schedule."""
    ticks, _missed = _due(row, now, grace)
    cur = await conn.execute(
        queries(schema).schedules_enqueue_ticks,
        {
            "name": row["name"],
            "checked_until": row["checked_until"],
            "cron": row["cron"],
            "timezone": row["timezone"],
            "ticks": ticks,
            "now": now,
            "next_tick": cron.next_tick(row["cron"], row["timezone"], now),
            "channel": notify_channel(schema),
        },
    )
    return [TickEnqueued(row["name"], tick, job_id) for tick, job_id in await cur.fetchall()]


async def prune_ticks(conn: psycopg.AsyncConnection, schema: str, older_than: timedelta) -> int:
    """Delete tick records enqueued before now − `older_than` (one batch of up to 5 000).

    Safe at any age: `checked_until` keeps old ticks from being enqueued again.
    """
    cur = await conn.execute(queries(schema).schedules_now)
    row = await cur.fetchone()
    assert row is not None
    cur = await conn.execute(queries(schema).schedules_prune_ticks, {"cutoff": row[0] - older_than})
    return len(await cur.fetchall())


async def list_schedules(conn: psycopg.AsyncConnection, schema: str) -> list[ScheduleRow]:
    """Every schedule with its next tick, last run and that run's state, by name."""
    cur = await conn.execute(queries(schema).schedules_list)
    rows = await cur.fetchall()
    cur = await conn.execute(queries(schema).schedules_now)
    clock = await cur.fetchone()
    assert clock is not None
    server_now: datetime = clock[0]  # the database's clock, never this machine's
    listed = []
    for r in rows:
        row = ScheduleRow(*r)
        if row.next_tick is None and row.paused_at is None:
            try:  # not looked at by a worker yet (just declared, resumed or changed)
                upcoming = cron.next_tick(row.cron, row.timezone, server_now)
            except cron.InvalidCron:
                upcoming = None
            row = dataclasses.replace(row, next_tick=upcoming)
        listed.append(row)
    return listed
