"""The server's clock, which every age the console shows is measured against.

A console whose own clock is minutes off must show the same ages as any other, so panes ask
the database for `now()` with the rows they show and never use the local clock for an age.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

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
