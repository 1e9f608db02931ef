"""Cancelling or terminating another session's backend: the one place it is done, audited.

Used by the console's Database tab (on the transaction holding back vacuum) and open to any
CLI. The session is named by pid *and* backend start, so a pid reused by a new connection is
never signalled. Whether the role may is PostgreSQL's decision (superuser, pg_signal_backend,
or membership of the target's role); a refusal becomes `SignalRefused` with plain words and
writes nothing. A signal sent writes one audit row (the same `ops_audit` statement as every
operator action) in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb

from jobtui.sql import queries

ACTIONS = {False: "cancel_backend", True: "terminate_backend"}


class SignalRefused(Exception):
    """The role may not signal that backend; str() says why in plain words."""


@dataclass(frozen=True)
class SignalOutcome:
    """`signalled`: PostgreSQL sent the signal; `gone`: that session had already ended."""

    pid: int
    action: str
    signalled: bool
    gone: bool

    def describe(self) -> str:
        verb = "terminated" if self.action == "terminate_backend" else "cancelled the query of"
        if self.gone:
            return f"backend {self.pid} had already ended; nothing was signalled"
        if not self.signalled:
            return f"backend {self.pid} could not be signalled (it may just have ended)"
        return f"{verb} backend {self.pid}"


async def signal_backend(
    conn: psycopg.AsyncConnection,
    schema: str,
    pid: int,
    backend_start: datetime | None,
    *,
    terminate: bool,
    os_user: str,
    why: str | None = None,
) -> SignalOutcome:
    """Cancel (`terminate=False`) or terminate backend `pid` if it is still the session that
    started at `backend_start`; audited as `cancel_backend` / `terminate_backend`.

    Raises SignalRefused when the role may not. `conn` must not be inside a transaction.
    """
    action = ACTIONS[terminate]
    if backend_start is None:
        raise SignalRefused(
            f"this role cannot see when session {pid} started (grant it pg_read_all_stats), so "
            "it cannot make sure it would signal that session and not a new one with its pid"
        )
    details: dict[str, object] = {"pid": pid, "backend_start": backend_start.isoformat()}
    if why:
        details["why"] = why
    try:
        async with conn.transaction():
            cur = await conn.execute(
                queries(schema).backend_signal,
                {
                    "pid": pid,
                    "backend_start": backend_start,
                    "terminate": terminate,
                    "os_user": os_user,
                    "action": action,
                    "details": Jsonb(details),
                },
            )
            row = await cur.fetchone()
    except pgerrors.InsufficientPrivilege as exc:
        raise SignalRefused(_plain_refusal(exc, action)) from None
    assert row is not None  # the INSERT always writes its one row
    signalled, found = bool(row[0]), bool(row[1])
    return SignalOutcome(pid, action, signalled, gone=not found)


def _plain_refusal(exc: pgerrors.InsufficientPrivilege, action: str) -> str:
    """PostgreSQL's refusal, said for an operator (and the audit insert's, if that was it)."""
    text = (exc.diag.message_primary or str(exc)).strip()
    verb = "terminate" if action == "terminate_backend" else "cancel"
    if "audit_log" in text:
        return f"not allowed to {verb} it: this role may not write the audit log ({text})"
    return (
        f"not allowed to {verb} it: {text}. It takes a superuser, a member of "
        "pg_signal_backend, or a member of the session's own role"
    )
