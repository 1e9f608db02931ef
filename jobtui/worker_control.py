"""Quiet, resume or stop a worker through the database: the operator's side.

Shared by the console (Workers tab) and the CLI (`jobtui workers quiet|resume|stop`). Each call
is one transaction: lock the worker's row, set the request on it (migration 0018), write the
action's one audit row with the same statement as every other operator action (`ops_audit`),
and NOTIFY `control:<worker id>` so the worker acts at once. A worker that does not hear the
NOTIFY (behind a transaction pooler, LISTEN down) acts after its next heartbeat.

    quiet   stop claiming, finish running jobs, keep heartbeating (shown as "quiet")
    resume  undo quiet: claim again
    stop    stop claiming, drain as on SIGTERM (running jobs get the worker's shutdown grace,
            then are released), and exit

A stop cannot be undone by a resume: the worker may already be draining.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.types.json import Jsonb

from jobtui.browse import statement
from jobtui.ops import Actor, InvalidAction
from jobtui.sql import notify_channel

ACTIONS = ("quiet", "resume", "stop")
CONTROL_PREFIX = "control:"  # NOTIFY payload prefix; the worker id follows
# What each action asks of the worker (the `control` column); resume clears it.
REQUESTS: dict[str, str | None] = {"quiet": "quiet", "resume": None, "stop": "stop"}


@dataclass(frozen=True)
class ControlOutcome:
    """What a request did: `changed` is False when the worker was already so asked; `stale`
    says the worker has not heartbeat within its timeout (it may never act on it)."""

    worker_id: str
    action: str
    changed: bool
    stale: bool

    def text(self) -> str:
        """One line for the operator (CLI output, console notice)."""
        past = {"quiet": "quieted", "resume": "resumed", "stop": "asked to stop"}[self.action]
        if not self.changed:
            line = f"worker {self.worker_id} was already {past}"
        else:
            line = f"worker {self.worker_id} {past}"
        if self.stale:
            line += " (its heartbeat is overdue: it may be gone)"
        return line


def notify_payload(worker_id: str) -> str:
    return f"{CONTROL_PREFIX}{worker_id}"


async def control_worker(
    conn: psycopg.AsyncConnection, schema: str, worker_id: str, action: str, *, actor: Actor
) -> ControlOutcome:
    """Ask worker `worker_id` to quiet, resume or stop (`action`); audited, one row.

    Raises InvalidAction for an unknown action or worker id, and for a resume of a worker that
    was asked to stop.
    """
    if action not in ACTIONS:
        raise InvalidAction(f"unknown worker action {action!r}: use {', '.join(ACTIONS)}")
    if not isinstance(worker_id, str) or not worker_id.strip() or "\x00" in worker_id:
        raise InvalidAction("worker id must be a non-empty string")
    if not isinstance(actor, Actor) or not actor.os_user.strip():
        raise InvalidAction("an actor (Actor.current()) is required")
    params = {"worker": worker_id, "control": REQUESTS[action], "os_user": actor.os_user}
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(statement(schema, "control_lock"), params)
        row = await cur.fetchone()
        if row is None:
            raise InvalidAction(f"no worker with id {worker_id!r} (see `jobtui workers list`)")
        asked, _applied, stale = row
        if action == "resume" and asked == "stop":
            raise InvalidAction(f"worker {worker_id} was asked to stop; a stop cannot be resumed")
        if action == "quiet" and asked == "stop":
            raise InvalidAction(f"worker {worker_id} was asked to stop already")
        await cur.execute(statement(schema, "control_set"), params)
        changed = bool(await cur.fetchall())
        await cur.execute(
            statement(schema, "ops_audit"),
            {
                "os_user": actor.os_user,
                "action": f"{action}_worker",
                "ids": None,
                "filter": Jsonb({"worker": worker_id}),
                "count": int(changed),
            },
        )
        if changed:
            await cur.execute(
                statement(schema, "notify"),
                {"channel": notify_channel(schema), "message": notify_payload(worker_id)},
            )
    return ControlOutcome(worker_id, action, changed, bool(stale))
