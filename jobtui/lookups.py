"""Small reads that let a command tell "nothing to do" from "no such thing": where ids are
now, and whether anything knows a kind. The CLI asks these before an action so an id or a kind
that does not exist is an error, never "done 0" with exit 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from jobtui.browse import ids_list
from jobtui.sql import queries


@dataclass(frozen=True)
class IdPlaces:
    """Where each of some ids is: in `jobs`, in `dead_letters`, or `missing` from both."""

    jobs: tuple[int, ...]
    dead: tuple[int, ...]
    missing: tuple[int, ...]


async def id_places(conn: psycopg.AsyncConnection, schema: str, ids: Sequence[int]) -> IdPlaces:
    """Where `ids` are now (one statement, ids in order)."""
    wanted = ids_list(ids)
    jobs: list[int] = []
    dead: list[int] = []
    missing: list[int] = []
    if wanted:
        cur = await conn.execute(queries(schema).lookup_ids, {"ids": wanted})
        for id_, in_jobs, in_dead in await cur.fetchall():
            (jobs if in_jobs else dead if in_dead else missing).append(int(id_))
    return IdPlaces(tuple(jobs), tuple(dead), tuple(missing))


async def kind_known(conn: psycopg.AsyncConnection, schema: str, kind: str) -> bool:
    """Whether a worker handles `kind` by name, or a limit, pause, job, dead letter or
    schedule names it."""
    cur = await conn.execute(queries(schema).lookup_kind_known, {"kind": kind})
    row = await cur.fetchone()
    return bool(row and row[0])
