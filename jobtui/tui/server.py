"""What the console asks the server about itself: its clock, and whether it is a standby.

A console whose own clock is minutes off must show the same ages as any other, so panes ask
the database for `now()` with the rows they show and never use the local clock for an age.
On a hot standby the replication lag is asked on every refresh, whichever tab is shown.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from jobtui.models import ReplicaInfo
from jobtui.sql import queries


async def server_now(conn: psycopg.AsyncConnection, schema: str) -> datetime:
    """The database server's current time (`now()`, with its time zone)."""
    cur = await conn.execute(queries(schema).ops_now)
    row = await cur.fetchone()
    assert row is not None  # SELECT now() always returns one row
    return row[0]


def age_s(now: datetime, then: datetime) -> float:
    """Seconds from `then` to the server's `now` (negative when `then` is still ahead)."""
    return (now - then).total_seconds()


async def replica_info(conn: psycopg.AsyncConnection, schema: str) -> ReplicaInfo | None:
    """The standby's replay position and lag (the snapshot's own statement); None on a primary."""
    cur = await conn.execute(queries(schema).metrics_replica)
    row = await cur.fetchone()
    if row is None or not row[0]:
        return None
    lag, lsn = row[1], row[2]
    return ReplicaInfo(lag_s=None if lag is None else float(lag), replay_lsn=lsn)
